// libFuzzer target: what the fleet layer reads from outside the process. The first byte picks the reader, the rest
// is its input:
// - `detail::decode_envelope` and `detail::decode_ticket_payload` read bytes stored in Redis (by another process,
//   another version, or anyone with access to the server): a value is decoded or refused, never read past its end,
//   and what is decoded encodes to bytes that decode to the same value;
// - `redis_url::parse` reads a URL from the user's configuration: a refusal is always `errc::invalid_argument`; an
//   accepted URL's `redacted_url()` has no password and parses back to the same host, port, user and db.
#include "fleet/ticket_envelope.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/redis_url.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

void envelope(std::string_view bytes) {
  auto const decoded = wandura::detail::decode_envelope(bytes);
  if (!decoded) {
    return;
  }
  auto const again = wandura::detail::decode_envelope(wandura::detail::encode_envelope(decoded->who, decoded->ticket));
  expect(again.has_value());
  expect(again->who == decoded->who);
  expect(again->ticket == decoded->ticket);
}

void payload(std::string_view bytes) {
  auto const decoded = wandura::detail::decode_ticket_payload(bytes);
  if (!decoded) {
    return;
  }
  auto const again =
      wandura::detail::decode_ticket_payload(wandura::detail::encode_ticket_payload(decoded->process_id, decoded->value));
  expect(again.has_value());
  expect(again->process_id == decoded->process_id);
  expect(again->value == decoded->value);
}

void url(std::string_view text) {
  wandura::redis_url parsed;
  try {
    parsed = wandura::redis_url::parse(text);
  } catch (wandura::error const& e) {
    expect(e.code() == wandura::errc::invalid_argument);
    return;
  }
  auto const shown = parsed.redacted_url();
  if (!parsed.password.empty()) {
    expect(shown.find(":***@") != std::string::npos);
  }
  auto const back = wandura::redis_url::parse(shown);
  expect(back.host == parsed.host && back.port == parsed.port && back.user == parsed.user && back.db == parsed.db);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view const rest(reinterpret_cast<char const*>(data) + 1, size - 1);
  switch (data[0] % 3) {
  case 0:
    envelope(rest);
    break;
  case 1:
    payload(rest);
    break;
  default:
    url(rest);
    break;
  }
  return 0;
}
