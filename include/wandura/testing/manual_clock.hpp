// A hand-stepped clock for tests (google-cloud-cpp `testing_util/fake_clock.h`): time moves only when the test
// says so, and sleeps complete when the test advances past their wake-up time, so retry loops, backoff, hold-offs
// and the retry budget are tested in zero real time and deterministically.
//
// Typical loop:
//
//     wandura::testing::manual_clock clock;
//     asio::io_context io;
//     asio::co_spawn(io, engine.call(...), [&](std::exception_ptr, wandura::call_result r) { ... });
//     for (int i = 0; i < 100 && !done; ++i) { io.poll(); clock.advance_to_next_wakeup(); io.restart(); }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "wandura/resilience/clock.hpp"

namespace wandura::testing {

/// A `wandura::clock` whose time moves only through `advance` and `advance_to_next_wakeup` (to reach a time point
/// `t`, `advance(t - now())`).
///
/// @par Thread safety
/// `now`, `system_now`, `advance`, `advance_to_next_wakeup`, `pending_sleeps`, `next_wakeup` and `elapsed` may be
/// called from any thread.
/// Sleeps complete by `asio::post` to the sleeping coroutine's executor, never inline in `advance`.
/// Cancellation of a sleep must be emitted on the thread that runs the sleeping coroutine (the Asio rule for any
/// cancellation slot).
///
/// @par Lifetime
/// The clock and the execution contexts of its sleepers may end in either order. A sleep pending when its
/// coroutine's context is shut down or destroyed is dropped with it: the coroutine is destroyed, never resumed (as
/// with Asio's own timers), so what it holds (a client holding the clock, say) is freed, and the sleep is no longer
/// pending. Sleeps pending when the clock is destroyed complete with `asio::error::operation_aborted` (a
/// cancellation emitted after that finds them done and touches nothing of the clock).
class manual_clock final : public wandura::clock {
public:
  /// Starts at steady time `1000 h` after the steady epoch (never near zero, so "time before start" is testable)
  /// and wall time 2026-11-30T09:00:00Z.
  manual_clock();
  manual_clock(time_point steady_start, std::chrono::system_clock::time_point wall_start);
  ~manual_clock() override;

  [[nodiscard]] time_point now() const noexcept override;
  [[nodiscard]] std::chrono::system_clock::time_point system_now() const noexcept override;
  /// Registers a sleeper woken by `advance`; completes at once (still by post) when `when <= now()`.
  [[nodiscard]] asio::awaitable<std::error_code> sleep_until(time_point when) override;

  /// Moves both clocks forward by `d` and wakes every sleeper whose time has come, in wake-up order. A negative
  /// `d` moves nothing (time never goes back); a `d` past the end of either clock's range stops it at its
  /// `time_point::max()` instead of overflowing.
  void advance(duration d);
  /// Advances exactly to the earliest pending wake-up (the wall clock by as much, saturating like `advance`);
  /// returns false (and does nothing) when nobody sleeps.
  bool advance_to_next_wakeup();
  /// Sleepers not yet woken, cancelled or dropped with their context.
  [[nodiscard]] std::size_t pending_sleeps() const;
  /// The earliest pending wake-up, if any.
  [[nodiscard]] std::optional<time_point> next_wakeup() const;
  /// Total time the clock was advanced since construction (what the sleeps "cost"); `duration::max()` when that is
  /// more than a duration holds (a start before the steady epoch, then an advance to the end of time).
  [[nodiscard]] duration elapsed() const;

private:
  struct sleeper;
  void wake_due(std::unique_lock<std::mutex>& lock);
  /// Takes out the sleepers cancelled or dropped with their context. Called with `mutex_` held.
  void forget_dropped();

  mutable std::mutex mutex_;
  time_point start_;
  time_point now_;
  std::chrono::system_clock::time_point wall_now_;
  /// Keyed by (wake-up time, registration order) so that wake-ups are ordered and ties stay in arrival order.
  std::multimap<time_point, std::shared_ptr<sleeper>> sleepers_;
};

} // namespace wandura::testing
