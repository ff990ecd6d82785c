// The two refill models of docs/protocol.md §2), as plain values over the emulator's clock. Not thread-safe: the
// owner (detail::service) serialises access with its mutex.
//
// Time is passed in, never read, so the models are exact under the manual clock. Both allow a burst to overshoot
// the limit by `slack` units before refusing (docs/protocol.md §1: "approximate on the high side, up to ~2.5 %").
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

namespace wandura::emulator::detail {

using time_point = std::chrono::system_clock::time_point;

/// Seconds (rounded up, at least 1) a client should wait for `d` to pass: the `Retry-After` of a refusal.
[[nodiscard]] inline std::uint32_t retry_after_seconds(double seconds) noexcept {
  if (!(seconds > 0.0)) {
    return 1;
  }
  auto s = std::ceil(seconds - 1e-9);
  return s < 1.0 ? 1u : static_cast<std::uint32_t>(std::min(s, 86400.0));
}

/// Continuous refill (`playback`, `catalog`): a bucket of `limit` units that refills at limit/60 per second. From
/// idle a whole minute's limit may be spent at once; space then returns every second.
class continuous_bucket {
public:
  continuous_bucket(std::uint32_t limit, double overshoot, time_point now) noexcept
      : limit_(limit), slack_(std::floor(limit * overshoot)), rate_(limit / 60.0), tokens_(limit), last_(now) {}

  [[nodiscard]] std::uint32_t limit() const noexcept { return limit_; }
  /// Units refilled per second.
  [[nodiscard]] double rate() const noexcept { return rate_; }

  /// Units left now (negative while overshooting or while play requests hold reservations).
  [[nodiscard]] double remaining(time_point now) noexcept {
    refill(now);
    return tokens_;
  }

  /// Takes `n` units if the bucket (with its slack) has them; returns whether it did.
  bool try_take(double n, time_point now) noexcept {
    refill(now);
    if (tokens_ - n < -slack_) {
      return false;
    }
    tokens_ -= n;
    return true;
  }

  /// Seconds until `try_take(n)` would succeed (0 when it would now).
  [[nodiscard]] double seconds_until(double n, time_point now) noexcept {
    refill(now);
    double deficit = -slack_ + n - tokens_;
    return deficit <= 0.0 ? 0.0 : deficit / rate_;
  }

  /// Seconds until more than `level` units are left (0 when they are now).
  [[nodiscard]] double seconds_until_above(double level, time_point now) noexcept {
    refill(now);
    return tokens_ > level ? 0.0 : (level - tokens_) / rate_ + 1e-6;
  }

  /// Takes `n` units that are not there yet: the caller waits `seconds_until(n)` before using them. Later
  /// requests see the debt and are refused or held accordingly, so a reservation is never granted twice.
  void reserve(double n, time_point now) noexcept {
    refill(now);
    tokens_ -= n;
  }

private:
  void refill(time_point now) noexcept {
    if (now > last_) {
      double dt = std::chrono::duration<double>(now - last_).count();
      tokens_ = std::min<double>(limit_, tokens_ + dt * rate_);
      last_ = now;
    }
  }

  std::uint32_t limit_;
  double slack_;
  double rate_;
  double tokens_;
  time_point last_;
};

/// Fixed UTC-minute window (`creatives`, `videos`, `video`, `config`): at most `limit` (+ slack) units per whole
/// minute; the count restarts at each minute boundary.
class fixed_window {
public:
  fixed_window(std::uint32_t limit, double overshoot) noexcept
      : limit_(limit), slack_(static_cast<std::uint64_t>(std::floor(limit * overshoot))) {}

  [[nodiscard]] std::uint32_t limit() const noexcept { return limit_; }

  /// Counts one unit if the current minute has room; returns whether it did.
  bool try_take(time_point now) noexcept {
    roll(now);
    if (used_ + 1 > limit_ + slack_) {
      return false;
    }
    ++used_;
    return true;
  }

  /// Seconds until the next whole UTC minute.
  [[nodiscard]] static double seconds_to_next_minute(time_point now) noexcept {
    auto since_epoch = now.time_since_epoch();
    auto into_minute = since_epoch - std::chrono::floor<std::chrono::minutes>(since_epoch);
    return 60.0 - std::chrono::duration<double>(into_minute).count();
  }

private:
  void roll(time_point now) noexcept {
    auto minute = std::chrono::floor<std::chrono::minutes>(now.time_since_epoch()).count();
    if (minute != minute_) {
      minute_ = minute;
      used_ = 0;
    }
  }

  std::uint32_t limit_;
  std::uint64_t slack_;
  std::int64_t minute_ = -1;
  std::uint64_t used_ = 0;
};

} // namespace wandura::emulator::detail
