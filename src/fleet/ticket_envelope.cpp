#include "ticket_envelope.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace wandura::detail {
namespace {

constexpr std::string_view magic = "wt1|";
constexpr std::string_view payload_magic = "wp1|";

void put_field(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

// Reads one `<len>:<bytes>` field from the front of `in`.
std::optional<std::string_view> take_field(std::string_view& in) {
  std::size_t len = 0;
  auto const [end, ec] = std::from_chars(in.data(), in.data() + in.size(), len);
  if (ec != std::errc{} || end == in.data() + in.size() || *end != ':') {
    return std::nullopt;
  }
  auto const header = static_cast<std::size_t>(end - in.data()) + 1;
  if (in.size() - header < len) {
    return std::nullopt;
  }
  auto const field = in.substr(header, len);
  in.remove_prefix(header + len);
  return field;
}

template <class Int> std::optional<Int> to_int(std::optional<std::string_view> text) {
  Int value{};
  if (!text) {
    return std::nullopt;
  }
  auto const [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc{} || end != text->data() + text->size()) {
    return std::nullopt;
  }
  return value;
}

/// Whether `ms` since the epoch is a time the system clock holds: a larger stored count (written by another
/// version, or garbage) would overflow the conversion to nanoseconds, so the envelope is corrupt.
bool fits_clock(std::int64_t ms) noexcept {
  using std::chrono::system_clock;
  auto const lo = std::chrono::ceil<std::chrono::milliseconds>(system_clock::time_point::min().time_since_epoch());
  auto const hi = std::chrono::floor<std::chrono::milliseconds>(system_clock::time_point::max().time_since_epoch());
  return ms >= lo.count() && ms <= hi.count();
}
} // namespace

std::string encode_envelope(ticket_identity const& who, cached_ticket const& ticket) {
  std::string out(magic);
  out.reserve(magic.size() + 64 + who.viewer_ref.size() + who.union_info.size() + who.film_ref.size() +
              ticket.payload.size());
  put_field(out, who.viewer_ref);
  put_field(out, who.union_info);
  put_field(out, who.film_ref);
  put_field(out, std::to_string(who.episode_no));
  put_field(out, who.intent);
  auto const expires_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(ticket.expires_at.time_since_epoch()).count();
  put_field(out, std::to_string(expires_ms));
  put_field(out, ticket.payload);
  return out;
}

std::optional<ticket_envelope> decode_envelope(std::string_view bytes) {
  if (!bytes.starts_with(magic)) {
    return std::nullopt;
  }
  bytes.remove_prefix(magic.size());
  auto const viewer_ref = take_field(bytes);
  auto const union_info = take_field(bytes);
  auto const film_ref = take_field(bytes);
  auto const episode = to_int<int>(take_field(bytes));
  auto const intent = take_field(bytes);
  auto const expires_ms = to_int<std::int64_t>(take_field(bytes));
  auto const payload = take_field(bytes);
  if (!viewer_ref || !union_info || !film_ref || !episode || !intent || !expires_ms || !payload || !bytes.empty() ||
      !fits_clock(*expires_ms)) {
    return std::nullopt;
  }
  ticket_envelope env;
  env.who = {std::string(*viewer_ref), std::string(*union_info), std::string(*film_ref), *episode,
             std::string(*intent)};
  env.ticket.payload = std::string(*payload);
  env.ticket.expires_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(*expires_ms));
  return env;
}

std::string encode_ticket_payload(std::string_view process_id, wandura::ticket const& value) {
  std::string out(payload_magic);
  out.reserve(payload_magic.size() + 64 + process_id.size() + value.ticket_id.size() + value.manifest_url.size() +
              value.license_url.size() + value.expires_at_text.size() + value.drm_payload.size());
  put_field(out, process_id);
  put_field(out, value.ticket_id);
  put_field(out, value.manifest_url);
  put_field(out, value.license_url);
  auto const expires_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(value.expires_at.time_since_epoch()).count();
  put_field(out, std::to_string(expires_ns));
  put_field(out, value.expires_at_text);
  put_field(out, value.drm_payload);
  return out;
}

std::optional<ticket_payload_fields> read_ticket_payload(std::string_view bytes) noexcept {
  if (!bytes.starts_with(payload_magic) || bytes.size() > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  std::string_view const whole = bytes;
  bytes.remove_prefix(payload_magic.size());
  auto const where = [whole](std::string_view field) {
    return ticket_payload_fields::field{static_cast<std::uint32_t>(field.data() - whole.data()),
                                        static_cast<std::uint32_t>(field.size())};
  };
  auto const process_id = take_field(bytes);
  auto const ticket_id = take_field(bytes);
  auto const manifest_url = take_field(bytes);
  auto const license_url = take_field(bytes);
  auto const expires_ns = to_int<std::int64_t>(take_field(bytes));
  auto const expires_at_text = take_field(bytes);
  auto const drm_payload = take_field(bytes);
  if (!process_id || !ticket_id || !manifest_url || !license_url || !expires_ns || !expires_at_text || !drm_payload ||
      !bytes.empty()) {
    return std::nullopt;
  }
  ticket_payload_fields out;
  out.process_id = where(*process_id);
  out.ticket_id = where(*ticket_id);
  out.manifest_url = where(*manifest_url);
  out.license_url = where(*license_url);
  out.expires_at_text = where(*expires_at_text);
  out.drm_payload = where(*drm_payload);
  out.expires_at = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(*expires_ns)));
  return out;
}

wandura::ticket ticket_payload_fields::ticket(std::string_view bytes) const {
  wandura::ticket out;
  out.ticket_id = ticket_id.in(bytes);
  out.manifest_url = manifest_url.in(bytes);
  out.license_url = license_url.in(bytes);
  out.expires_at = expires_at;
  out.expires_at_text = expires_at_text.in(bytes);
  out.drm_payload = drm_payload.in(bytes);
  return out;
}

stored_ticket ticket_payload_fields::stored(std::string_view bytes) const {
  return stored_ticket{std::string(process_id.in(bytes)), ticket(bytes)};
}

std::optional<stored_ticket> decode_ticket_payload(std::string_view bytes) {
  auto const fields = read_ticket_payload(bytes);
  if (!fields) {
    return std::nullopt;
  }
  return fields->stored(bytes);
}

} // namespace wandura::detail
