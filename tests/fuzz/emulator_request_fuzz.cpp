// libFuzzer target: the emulator's request path on bytes alone. The first byte picks how the rest is split into
// reads (1-64 bytes, or all at once); the rest is what a client sent on one connection. Every request the reader
// completes goes through `service::handle` (authentication, idempotency, the ticket batch's JSON, the catalogue),
// then the next pipelined one, as a connection does. Checks: a reply has a valid status, a JSON body, and header
// lines that each end in CRLF; a refusal has a reason and one of the reader's statuses.
#include "emulator/clock.hpp"
#include "emulator/request_reader.hpp"
#include "emulator/service.hpp"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <simdjson.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

namespace emu = wandura::emulator;

void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

emu::config fuzz_config() {
  emu::config cfg;
  cfg.manual_clock = true; // no real time: a play is never held, nothing sleeps
  cfg.seed = 1;
  cfg.orgs.front().limits.playback = 3; // small limits: shedding and 429 are reached in a few requests
  cfg.orgs.front().limits.catalog = 2;
  return cfg;
}

void check_reply(emu::detail::http_reply const& reply, simdjson::dom::parser& json) {
  expect(reply.status >= 100 && reply.status <= 599);
  simdjson::dom::element doc;
  expect(json.parse(reply.body).get(doc) == simdjson::SUCCESS);
  std::string_view headers = reply.headers;
  while (!headers.empty()) {
    std::size_t const end = headers.find("\r\n");
    expect(end != std::string_view::npos && end > 0);
    std::string_view const line = headers.substr(0, end);
    expect(line.find_first_of("\r\n") == std::string_view::npos);
    headers.remove_prefix(end + 2);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  std::size_t const chunk = data[0] % 65 == 0 ? size : data[0] % 65;
  std::string_view wire(reinterpret_cast<char const*>(data + 1), size - 1);

  emu::detail::emulator_clock clock(true);
  emu::detail::service svc(fuzz_config(), clock);
  emu::detail::request_reader reader;
  simdjson::dom::parser request_json;
  simdjson::dom::parser reply_json;
  asio::io_context io;
  while (!wire.empty()) {
    auto const [what, consumed] = reader.feed(wire.substr(0, chunk));
    expect(consumed <= chunk);
    wire.remove_prefix(consumed);
    if (what == emu::detail::request_reader::event::refused) {
      expect(!reader.refusal().empty());
      int const status = reader.refusal_status();
      expect(status == 400 || status == 413 || status == 414 || status == 431 || status == 501 || status == 505);
      break;
    }
    if (what != emu::detail::request_reader::event::request) {
      continue;
    }
    emu::detail::http_request& req = reader.request();
    req.json = &request_json;
    req.peer_is_loopback = true;
    auto reply = asio::co_spawn(io, svc.handle(req, false, std::chrono::milliseconds(0)), asio::use_future);
    io.restart();
    io.run();
    check_reply(reply.get(), reply_json);
  }
  return 0;
}
