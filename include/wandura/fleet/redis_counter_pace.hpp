// wandura::redis_counter_pace: the admission gate's shared pace (shared_pace.hpp) over Redis, one
// `shared_counter_pace` per rate-limit counter (docs/adr/0008, "Counter pace"; docs/adr/0006, "The fleet's pace").
//
//     auto redis = std::make_shared<wandura::redis_client>(asio::make_strand(io), wandura::redis_options{...});
//     options.retry.admission.shared_pace = std::make_shared<wandura::redis_counter_pace>(redis,
//         wandura::redis_counter_pace_options{.org = "acme"});
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/shared_pace.hpp"

namespace wandura {

/// Options of a `redis_counter_pace`.
struct redis_counter_pace_options {
  /// The organisation: the hash tag of every key (`wandura:{org}:pace:<counter>`), 1-64 of [A-Za-z0-9._-].
  std::string org = "default";
  /// The rate (units per minute) a counter is paced at before its limit is known to this process or set for the
  /// fleet by another: the gate publishes the limit it learns, so this is rarely used for long.
  double unknown_limit_per_minute = 60;
  /// The fleet's burst of a continuous counter, as time of its refill (the gate's own `burst`); at least two units.
  /// A fixed-window counter's burst is its whole window's allowance. Also how far ahead `acquire` books units
  /// (`shared_counter_pace::try_acquire`'s `book_within`).
  std::chrono::milliseconds burst{500};
  fallback_options fallback{};
};

/// The pace and hold-off of every rate-limit counter, shared by the processes of a fleet through Redis: one
/// `shared_counter_pace` (GCRA, one script per operation) per counter name, created on first use.
///
/// Each operation hops to the Redis client's executor, runs there, and completes on the caller's executor; holds
/// and limits are written in the background. Every Redis failure is answered within the client's `command_timeout`
/// and never throws: `acquire` then grants at once, so that while Redis is away each process's admission gate paces
/// alone at the rate it learnt (the fleet's local copy of a pace may not know a rate another process learnt).
///
/// @par Thread safety
/// Every member function may be called from any thread at once (the `shared_pace` contract). The Redis client
/// must run on a strand or a single-threaded io_context: every use of it and of the per-counter paces is on its
/// executor.
///
/// @par Lifetime
/// The pace shares ownership of the Redis client; operations in flight keep both alive. The client's executor
/// must outlive them (destroy clients and paces before the io_context).
class redis_counter_pace final : public shared_pace {
public:
  /// @param redis the connection (non-null), on a strand or a single-threaded io_context.
  /// @param options the organisation, the unknown-limit rate, the burst and the fallback; copied.
  /// @throws wandura::error with `errc::invalid_argument` for a null client, a bad `org`, a rate that is not
  ///         finite and > 0, or a negative burst.
  redis_counter_pace(std::shared_ptr<redis_client> redis, redis_counter_pace_options options);
  ~redis_counter_pace() override;

  /// `shared_counter_pace::try_acquire` of the counter, on the Redis client's executor, booking units that conform
  /// within `burst` of `now` (`go` with a later `wait_until`), so that the processes of a fleet take turns. A
  /// `cost` above the fleet's burst asks for the whole burst.
  /// @param counter the counter's name in keys, 1-64 characters; copied before the first suspension.
  /// @param cost units, >= 1. @param now the caller's wall-clock time.
  /// @throws wandura::error `operation_aborted` when cancelled; `invalid_argument` for a bad counter name (empty or
  ///         over 64 characters).
  [[nodiscard]] asio::awaitable<shared_pace_grant> acquire(std::string_view counter, std::uint32_t cost,
                                                           std::chrono::system_clock::time_point now) override;

  /// `shared_counter_pace::hold_until`, started on the Redis client's executor; returns at once.
  /// A bad counter name (empty or over 64 characters) is ignored: nothing is held.
  /// @param counter the counter's name in keys, 1-64 characters; copied. @param until the hold's end (a hold past
  /// the clock's reach is stored as a year short of its end). @param now the refusal's time.
  void hold_until(std::string_view counter, std::chrono::system_clock::time_point until,
                  std::chrono::system_clock::time_point now) noexcept override;

  /// `shared_counter_pace::set_rate` with the limit as units per minute and the burst of the options, started on
  /// the Redis client's executor; returns at once. A limit of 0, a window of 0 or a bad counter name (empty or over
  /// 64 characters) is ignored.
  /// @param counter the counter's name in keys, 1-64 characters; copied.
  /// @param limit units per window, and the refill kind.
  void set_limit(std::string_view counter, rate_limit const& limit) noexcept override;

  /// `shared_counter_pace::read` of the counter, on the Redis client's executor: the limit as units per 60 s.
  /// @param counter the counter's name in keys, 1-64 characters; copied before the first suspension.
  /// @param now unused: the view is what Redis holds (part of the `shared_pace` signature).
  /// @throws wandura::error `operation_aborted` when cancelled; `invalid_argument` for a bad counter name (empty or
  ///         over 64 characters).
  [[nodiscard]] asio::awaitable<shared_pace_view> read(std::string_view counter,
                                                       std::chrono::system_clock::time_point now) override;

  /// The counters of every counter's pace, summed; as of the latest completed operation. Any thread.
  [[nodiscard]] counter_pace_stats stats() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace wandura
