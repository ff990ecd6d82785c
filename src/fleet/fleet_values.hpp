// Small conversions the shared-state classes share: times as milliseconds since the epoch (doubles, as in the
// Lua scripts), numbers as shortest round-trip text, and reading a script's `{int, int}` reply. Not public API.
#pragma once

#include <algorithm>
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
/// fraction to the clock's tick. The double comes from Redis, where any process (or garbage) may have put it: NaN
/// reads as the epoch (no time: what an absent field reads as), and ±inf or a count the clock cannot hold saturates at
/// its min or max, never converted past its range.
inline std::chrono::system_clock::time_point from_epoch_ms(double ms) noexcept {
  using time_point = std::chrono::system_clock::time_point;
  if (std::isnan(ms)) {
    return time_point{};
  }
  // The bounds in whole milliseconds, a step inside the clock's range so that the fraction added cannot leave it.
  constexpr auto lo = std::chrono::ceil<std::chrono::milliseconds>(time_point::min().time_since_epoch()).count() + 1;
  constexpr auto hi = std::chrono::floor<std::chrono::milliseconds>(time_point::max().time_since_epoch()).count() - 1;
  if (ms <= static_cast<double>(lo)) {
    return time_point::min();
  }
  if (ms >= static_cast<double>(hi)) {
    return time_point::max();
  }
  double const whole = std::floor(ms);
  return time_point(
      std::chrono::milliseconds(static_cast<std::int64_t>(whole)) +
      std::chrono::round<std::chrono::system_clock::duration>(std::chrono::duration<double, std::milli>(ms - whole)));
}

/// `to_epoch_ms(t)` at most a year short of the clock's end: what a process writes for others to read (a hold until
/// `time_point::max()`), so that what a script adds to it still reads back inside the clock's range.
inline double to_written_epoch_ms(std::chrono::system_clock::time_point t) noexcept {
  constexpr auto year = std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::years(1));
  return to_epoch_ms(std::min(t, std::chrono::system_clock::time_point::max() - year));
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
