// Time points computed from durations a user gives (timeouts, deadlines, latencies, pacing options), without the
// signed overflow of `now + d` when `d` is huge (`std::chrono::milliseconds::max()` is ~292 million years, more
// than a nanosecond clock can hold). Shared by the transport and the resilience layer. Not public API.
#pragma once

#include <chrono>
#include <type_traits>

namespace wandura::detail {

/// `from + d`, saturating at `time_point::max()` instead of overflowing, for a duration of 64-bit integer or
/// floating-point ticks no finer than the clock's (converted without overflow either). A negative or zero `d` gives
/// `from`: a time point computed from a duration never lies before the moment it was computed from.
template <typename Clock, typename ClockDuration, typename Rep, typename Period>
[[nodiscard]] constexpr std::chrono::time_point<Clock, ClockDuration>
saturating_add(std::chrono::time_point<Clock, ClockDuration> from, std::chrono::duration<Rep, Period> d) noexcept {
  using time_point = std::chrono::time_point<Clock, ClockDuration>;
  if (d <= std::chrono::duration<Rep, Period>::zero()) {
    return from;
  }
  if (from >= time_point::max()) {
    return time_point::max();
  }
  if (from.time_since_epoch() < ClockDuration::zero()) {
    // Before the epoch the room to max() is more than a duration holds: add what one holds, then the rest from there
    // (at or after the epoch, less one tick, after at most two steps).
    // A floating-point duration cannot hold max() itself (it rounds up, one past it, 2^63 ticks): half of it.
    auto const whole = std::chrono::floor<std::chrono::duration<Rep, Period>>(
        std::is_floating_point_v<Rep> ? ClockDuration::max() / 2 : ClockDuration::max());
    if (d <= whole) {
      return from + std::chrono::duration_cast<ClockDuration>(d); // negative plus at most max(): no overflow
    }
    return saturating_add(from + std::chrono::duration_cast<ClockDuration>(whole), d - whole);
  }
  auto const room = time_point::max() - from; // > 0: no overflow
  // Compared in the coarser of the two units, rounded down, so that neither side is multiplied up past its range.
  if (d >= std::chrono::floor<std::chrono::duration<Rep, Period>>(room)) {
    return time_point::max();
  }
  return from + std::chrono::duration_cast<ClockDuration>(d);
}

/// `from - d`, saturating at `time_point::min()` instead of overflowing, for any duration type. A negative or zero
/// `d` gives `from` (as in `saturating_add`: the margins subtracted are never negative); a `d` of the clock's whole
/// span or more (about 292 years of nanoseconds) gives `time_point::min()`.
template <typename Clock, typename ClockDuration, typename Rep, typename Period>
[[nodiscard]] constexpr std::chrono::time_point<Clock, ClockDuration>
saturating_sub(std::chrono::time_point<Clock, ClockDuration> from, std::chrono::duration<Rep, Period> d) noexcept {
  using time_point = std::chrono::time_point<Clock, ClockDuration>;
  if (d <= std::chrono::duration<Rep, Period>::zero()) {
    return from;
  }
  if (from <= time_point::min()) {
    return time_point::min();
  }
  // From the epoch on, `from - min()` is past what a duration holds: the room is at least the whole span, and any
  // `d` shorter than it lands after min().
  auto const room = from.time_since_epoch() >= ClockDuration::zero() ? ClockDuration::max() : from - time_point::min();
  if (d >= std::chrono::floor<std::chrono::duration<Rep, Period>>(room)) {
    return time_point::min();
  }
  return from - std::chrono::duration_cast<ClockDuration>(d);
}

} // namespace wandura::detail
