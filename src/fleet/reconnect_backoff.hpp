// The waits between a Redis connection's reconnects (the commands' connection and a subscription's), and timers
// armed for the durations a user gives in `redis_options`, without overflow. Not public API.
#pragma once

#include <algorithm>
#include <chrono>

#include <asio/steady_timer.hpp>

#include "saturating_time.hpp"
#include "wandura/fleet/redis_client.hpp"

namespace wandura::detail {

/// `reconnect_backoff` first, doubled after each further failure up to `max_reconnect_backoff`, back to the first
/// after a success. Every wait is at least 1 ms, so that a zero or negative option cannot make a reconnect loop
/// spin on a server that is down, and the longest is never shorter than the first.
class reconnect_backoff {
public:
  explicit reconnect_backoff(redis_options const& options) noexcept
      : first_(std::max(options.reconnect_backoff, std::chrono::milliseconds{1})),
        longest_(std::max(options.max_reconnect_backoff, first_)), next_(first_) {}

  /// The wait before this reconnect; the one after it is twice as long (at most the longest).
  [[nodiscard]] std::chrono::milliseconds next() noexcept {
    auto const wait = next_;
    next_ = next_ >= longest_ / 2 ? longest_ : next_ * 2; // no overflow: compared before doubling
    return wait;
  }
  /// A connection succeeded: the next failure waits the first wait again.
  void reset() noexcept { next_ = first_; }
  /// The longest wait.
  [[nodiscard]] std::chrono::milliseconds longest() const noexcept { return longest_; }

private:
  std::chrono::milliseconds first_;
  std::chrono::milliseconds longest_;
  std::chrono::milliseconds next_;
};

/// `timer.expires_after(d)` for a duration an option gives: `milliseconds::max()` is as good as never, not a
/// signed overflow when converted to the clock's nanoseconds.
inline void expire_after(asio::steady_timer& timer, std::chrono::milliseconds d) {
  timer.expires_at(saturating_add(std::chrono::steady_clock::now(), d));
}

} // namespace wandura::detail
