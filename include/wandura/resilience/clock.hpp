// The time source of the resilience layer: "what time is it" and "wake me at T", injectable so that retry loops,
// backoff sleeps, deadlines, hold-offs and the retry budget can be tested with a hand-stepped clock
// (`wandura::testing::manual_clock`) in zero real time.
#pragma once

#include <chrono>
#include <system_error>

#include <asio/awaitable.hpp>

namespace wandura {

/// A monotonic clock plus a wall clock, and a cancellable sleep on the monotonic one.
///
/// @par Thread safety
/// Implementations must allow `now`, `system_now` and `sleep_until` from any thread and from many coroutines at once.
class clock {
public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  clock() = default;
  clock(clock const&) = delete;
  clock& operator=(clock const&) = delete;
  virtual ~clock() = default;

  /// Monotonic time: deadlines, backoff wake-ups, hold-offs and the retry budget window are measured on it.
  [[nodiscard]] virtual time_point now() const noexcept = 0;

  /// Wall-clock time, used only to turn an HTTP-date `Retry-After` into a delay when the response has no usable
  /// `Date` header.
  [[nodiscard]] virtual std::chrono::system_clock::time_point system_now() const noexcept = 0;

  /// Suspends the awaiting coroutine until `now() >= when` (at once when `when` has passed).
  ///
  /// Completes with an empty error code when the time is reached, or `asio::error::operation_aborted` when the
  /// awaiting coroutine's cancellation slot is emitted first. Never throws for those.
  /// @par Cancellation
  /// Any cancellation that reaches the sleep (a coroutine lets terminal cancellation through by default) ends it
  /// at once with `operation_aborted`.
  [[nodiscard]] virtual asio::awaitable<std::error_code> sleep_until(time_point when) = 0;
};

/// The production clock: `std::chrono::steady_clock`, `std::chrono::system_clock` and an `asio::steady_timer`
/// created on the awaiting coroutine's executor for each sleep.
///
/// @par Thread safety
/// Stateless; one instance may be shared by every client and thread.
class real_clock final : public clock {
public:
  [[nodiscard]] time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
  [[nodiscard]] std::chrono::system_clock::time_point system_now() const noexcept override {
    return std::chrono::system_clock::now();
  }
  [[nodiscard]] asio::awaitable<std::error_code> sleep_until(time_point when) override;
};

} // namespace wandura
