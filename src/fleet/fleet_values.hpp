// Small conversions the shared-state classes share: times as milliseconds since the epoch (doubles, as in the
// Lua scripts), numbers as shortest round-trip text, and reading a script's `{int, int}` reply. Not public API.
#pragma once

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "wandura/fleet/redis_reply.hpp"

namespace wandura::detail {

inline double to_epoch_ms(std::chrono::system_clock::time_point t) noexcept {
  return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
}

/// Whole milliseconds exactly (a double of nanoseconds since the epoch is not exact: it came out 1 ns early), the
/// fraction to the clock's tick.
inline std::chrono::system_clock::time_point from_epoch_ms(double ms) noexcept {
  double const whole = std::floor(ms);
  return std::chrono::system_clock::time_point(
      std::chrono::milliseconds(static_cast<std::int64_t>(whole)) +
      std::chrono::round<std::chrono::system_clock::duration>(std::chrono::duration<double, std::milli>(ms - whole)));
}

/// The shortest text that reads back as the same double (what Lua's tonumber and Redis need).
inline std::string number_text(double value) {
  std::array<char, 32> buf{};
  auto const [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  return {buf.data(), ec == std::errc{} ? end : buf.data()};
}

/// `{a, b}` of two integers, or nothing for any other shape.
inline std::optional<std::pair<std::int64_t, std::int64_t>> integer_pair(redis_reply const& reply) noexcept {
  if (reply.type != redis_reply::kind::array || reply.elements.size() != 2 ||
      reply.elements[0].type != redis_reply::kind::integer || reply.elements[1].type != redis_reply::kind::integer) {
    return std::nullopt;
  }
  return std::pair{reply.elements[0].integer, reply.elements[1].integer};
}

} // namespace wandura::detail
