// wandura::shared_counter_pace: one rate-limit counter's pace, shared by every process of a fleet through Redis.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/redis_client.hpp"

namespace wandura {

struct counter_pace_options {
  /// The counter's name in keys, 1-64 characters, e.g. "playback" (docs/protocol.md §1 counters).
  std::string counter = "playback";
  /// The counter's limit per minute, refilled continuously (docs/protocol.md §1: limit/60 per second). Used until a
  /// rate is set for the fleet with `set_rate` Finite and > 0.
  double limit_per_minute = 6000;
  /// The most units at once from idle; 0 means `limit_per_minute` (docs/protocol.md §1: from idle a whole minute's
  /// limit). Finite and >= 0.
  double burst = 0;
  /// This process's share of the rate while it paces alone (Redis away): 1 lets every process go at the whole
  /// rate; 1/N keeps N processes within it together.
  double local_share = 1.0;
  fallback_options fallback{};
};

/// The answer of `shared_counter_pace::try_acquire`.
struct pace_decision {
  /// True: the units are granted (taken from the fleet's room), to be used from `wait_until` on.
  bool go = false;
  /// When `go`: `now`, or the booked instant the units conform (within `book_within`; rounded up to the
  /// millisecond). When not `go`: the earliest time the same request would go, or be booked (rounded up likewise).
  std::chrono::system_clock::time_point wait_until{};
};

/// What `shared_counter_pace::read` tells of the counter: what the other processes of the fleet did to it.
struct counter_pace_view {
  /// The fleet-wide hold (`hold_until`); the epoch when none was ever set.
  std::chrono::system_clock::time_point held_until{};
  /// The latest `now` any process passed to `hold_until` (a 429 it saw); the epoch when none.
  std::chrono::system_clock::time_point pressure_at{};
  /// The rate set for the fleet with `set_rate`, in units per minute; 0 when none was set.
  double limit_per_minute = 0;
};

/// Counters of one pace. A snapshot.
struct counter_pace_stats {
  std::uint64_t admitted = 0;
  std::uint64_t delayed = 0;
  std::uint64_t fallbacks = 0; ///< operations answered from local state because Redis was slow, down or failing
  bool degraded = false;
};

/// GCRA (the generic cell rate algorithm) for one counter in Redis (`wandura:{org}:pace:<counter>`): every
/// process asks before it sends, and together they are admitted at the counter's refill, not N times it. Each
/// operation is one script (`EVALSHA`), atomic. Times are the callers' `system_clock` (hosts must be NTP-synced:
/// a skew of d ms shifts a process's view of the pace by d ms).
///
/// @par Degrade, never block
/// When Redis is slow, down or failing, decisions come from a local GCRA at `local_share` of the rate, which also
/// keeps every hold and rate this process set; see `fallback_options`.
///
/// @par A key the SDK did not write
/// A field of the pace key that is not what the SDK writes (not a number, NaN, ±inf, a time beyond ±2^53 ms, an
/// `em` or `burst` that is not > 0) reads as absent, and a key of another type than a hash as missing: `read`
/// answers without it, and the next `try_acquire`, `hold_until` or `set_rate` deletes it and gives the key its
/// expiry, in the same script. No such value stops the fleet sharing the counter.
///
/// @par Thread safety
/// As `redis_client`: use an object from the client's executor only.
/// @par Lifetime
/// The pace may be destroyed while operations it started are in flight: they keep what they use and complete as
/// they would have (the `redis_client` must still outlive them).
class shared_counter_pace {
public:
  /// @param redis must outlive the pace. @param org the organisation (hash tag).
  /// @param options the counter, its rate and burst, and the fallback; copied.
  /// @throws wandura::error with `errc::invalid_argument` for a bad `org`, a counter name that is empty or over 64
  ///         characters, a rate that is not finite and > 0, a burst that is not finite and >= 0, or a share outside
  ///         (0, 1].
  shared_counter_pace(redis_client& redis, std::string_view org, counter_pace_options options = {});
  ~shared_counter_pace();
  shared_counter_pace(shared_counter_pace const&) = delete;
  shared_counter_pace& operator=(shared_counter_pace const&) = delete;

  /// Admits `cost` units (tickets of a batch; 1 for a request) at `now`, or says when they would be.
  ///
  /// With `book_within` > 0, units that conform within that time of `now` are booked: taken from the fleet's room
  /// now and granted for the instant they conform (`go` with that `wait_until`). Processes that each keep one
  /// booking open then take turns in the order they asked, instead of racing for each unit as it comes; the
  /// fleet's rate is unchanged (a booked unit is the one that would have gone at that instant). A booking whose
  /// user has gone by then is a unit lost to the fleet.
  /// @param cost units, 0 < cost <= burst.
  /// @param now the caller's wall-clock time.
  /// @param book_within how far ahead a booking may be; 0 (the default) admits only units there now.
  /// @throws wandura::error with `errc::invalid_argument` unless 0 < cost <= burst and book_within >= 0;
  ///         `operation_aborted` when cancelled. Never for Redis failures (local fallback, which books alike).
  [[nodiscard]] asio::awaitable<pace_decision>
  try_acquire(double cost, std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
              std::chrono::milliseconds book_within = std::chrono::milliseconds::zero());

  /// Holds every process of the fleet back until `until` (a 429's Retry-After: docs/protocol.md §3, "hold every request
  /// to that counter until Retry-After has passed"), and records `now` as the latest refusal (`read`'s
  /// `pressure_at`; a 429 without Retry-After passes `until == now`). A later hold wins over an earlier one; never
  /// shortened. Units booked for instants inside the hold are moved to its end, where they come out of the burst.
  /// A hold past the clock's reach (`time_point::max()`) is stored as a year short of its end, and every reader
  /// saturates what it reads at the clock's range: one process's hold never overflows another's clock.
  [[nodiscard]] asio::awaitable<void>
  hold_until(std::chrono::system_clock::time_point until,
             std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// Reads the fleet's hold, latest refusal and rate of the counter: one read-only script (`HMGET`), or this
  /// process's own hold, refusal and rate when Redis is slow, down or failing. Changes nothing.
  /// @throws wandura::error with `operation_aborted` when cancelled. Never for Redis failures (local fallback).
  [[nodiscard]] asio::awaitable<counter_pace_view> read();

  /// Sets the counter's rate for the whole fleet (e.g. from a 429's X-RateLimit-Limit); `burst` 0 means the
  /// limit. Kept in Redis for an hour after the counter's last use.
  /// @throws wandura::error with `errc::invalid_argument` for a limit that is not finite and > 0 or a burst that is
  ///         not finite and >= 0.
  [[nodiscard]] asio::awaitable<void> set_rate(double limit_per_minute, double burst = 0);

  [[nodiscard]] counter_pace_stats stats() const noexcept;

private:
  struct impl;
  std::shared_ptr<impl> impl_; ///< shared with the operations in flight: they may outlive the pace
};

} // namespace wandura
