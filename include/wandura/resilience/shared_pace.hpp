// wandura::shared_pace: a rate-limit counter's pace and hold-off shared beyond this process (docs/adr/0006, "The
// fleet's pace"; docs/adr/0008, "Counter pace").
//
// N processes that each pace a counter to its refill send N times what it refills, and a 429 seen by one of them
// holds only that one. An `admission_gate` given a `shared_pace` (`admission_gate_options::shared_pace`) publishes
// every hold-off and learnt limit through it, takes a fleet-wide grant for each request it releases while the
// counter is congested, and reads the fleet's view of the counter now and then, so that the processes of a fleet
// release at the counter's refill once, together, and all hold after a 429 any of them saw.
//
// `wandura::redis_counter_pace` (include/wandura/fleet/redis_counter_pace.hpp) implements it over Redis. Tests may
// implement it in memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include <asio/awaitable.hpp>

namespace wandura {

struct rate_limit;

/// The answer of `shared_pace::acquire`.
struct shared_pace_grant {
  /// True: the fleet granted the units; send from `wait_until` on. False: ask again, not before `wait_until`.
  bool go = false;
  /// When `go`: the time the granted units may be used, `now` or earlier for at once, or a later instant the
  /// implementation booked for this process (the units conform then; meanwhile they are nobody else's; the gate
  /// reads the fleet's view at that instant and uses them only when it shows no hold). When not
  /// `go`: the earliest time the same request would be granted (the end of a fleet-wide hold-off, or when the
  /// counter's fleet-wide room has refilled enough). Wall-clock time, as every time of a shared pace.
  std::chrono::system_clock::time_point wait_until{};
};

/// What the fleet knows of one counter, as `shared_pace::read` returns it.
struct shared_pace_view {
  /// The end of the fleet-wide hold-off (a 429's `Retry-After` published by any process); the epoch when none.
  std::chrono::system_clock::time_point held_until{};
  /// The latest time any process published that the counter refused a request (a 429); the epoch when none.
  std::chrono::system_clock::time_point pressure_at{};
  /// The counter's limit as last published by any process (continuous: units per `window`); empty when unknown.
  std::optional<std::uint32_t> limit;
  std::chrono::seconds window{60};
};

/// A counter's pace and hold-off shared by the processes of a fleet.
///
/// Every time is wall-clock (`std::chrono::system_clock`) and passed in by the caller (the gate passes its
/// `wandura::clock::system_now()`), so that processes on different hosts compare the same instants (hosts must be
/// NTP-synced) and tests can step time by hand.
///
/// @par Errors and slowness
/// An implementation should answer within a few milliseconds. The gate never waits on it longer than
/// `admission_gate_options::shared_pace_timeout`: an `acquire` or `read` that throws or takes longer makes the gate
/// act alone (its local pace) for `admission_gate_options::shared_pace_retry`.
///
/// @par Thread safety
/// Implementations must allow every member function from any thread and from many coroutines at once; the
/// awaitables complete on the awaiting coroutine's executor.
class shared_pace {
public:
  shared_pace() = default;
  shared_pace(shared_pace const&) = delete;
  shared_pace& operator=(shared_pace const&) = delete;
  virtual ~shared_pace() = default;

  /// Takes `cost` units of `counter`'s fleet-wide room at `now`, all or nothing, or says when they would be there.
  /// Refused (not `go`) before the end of a fleet-wide hold-off. May book units that conform a little later (`go`
  /// with a later `wait_until`): the gate asks for one grant at a time, so processes that book take turns in the
  /// order they asked, where processes that are only refused race for each unit as it comes.
  /// @param counter the rate-limit counter (`playback`, `catalog`, ...); viewed, valid until the awaitable
  ///        completes.
  /// @param cost units (tickets for `playback`, 1 for a read); >= 1. A cost above the fleet's burst is granted when
  ///        the whole burst is there.
  /// @param now the caller's wall-clock time.
  /// @throws anything the implementation fails with; the gate treats every exception as "shared pace unavailable".
  /// @par Cancellation
  /// Implementation-defined; the gate does not cancel it, it stops waiting for it after its timeout.
  [[nodiscard]] virtual asio::awaitable<shared_pace_grant> acquire(std::string_view counter, std::uint32_t cost,
                                                                   std::chrono::system_clock::time_point now) = 0;

  /// Holds every process of the fleet back on `counter` until `until` (a 429's `Retry-After`: docs/protocol.md §3),
  /// and records `now` as the latest time the counter refused a request (`shared_pace_view::pressure_at`): a 429
  /// without `Retry-After` passes `until == now`. A later hold wins over an earlier one; never shortened.
  /// Returns at once: the write goes on in the background; a failure is the implementation's to count or log.
  /// @param counter the rate-limit counter; viewed, copied before the call returns.
  /// @param until the end of the hold-off (wall clock); `now` or earlier for a refusal without one.
  /// @param now the caller's wall-clock time.
  /// @par Thread safety
  /// Callable from any thread, under no lock of the caller's that the implementation could need. Must not throw.
  virtual void hold_until(std::string_view counter, std::chrono::system_clock::time_point until,
                          std::chrono::system_clock::time_point now) noexcept = 0;

  /// Sets `counter`'s limit for the whole fleet (from `GET /v1/config` or a 429's `X-RateLimit-*`). Returns at
  /// once as `hold_until` does. Must not throw.
  /// @param counter the rate-limit counter; viewed, copied before the call returns.
  /// @param limit units per window and the refill kind; a limit or window of 0 is ignored.
  virtual void set_limit(std::string_view counter, rate_limit const& limit) noexcept = 0;

  /// Reads what the fleet knows of `counter`: the hold-off in force, the latest refusal, the limit. One light
  /// read; the gate calls it at most once per `admission_gate_options::shared_pace_refresh` for a counter in use.
  /// @param counter the rate-limit counter; viewed, valid until the awaitable completes.
  /// @param now the caller's wall-clock time.
  /// @throws anything the implementation fails with; the gate then keeps what it knew.
  [[nodiscard]] virtual asio::awaitable<shared_pace_view> read(std::string_view counter,
                                                               std::chrono::system_clock::time_point now) = 0;
};

} // namespace wandura
