// wandura::shared_viewer_limit: the per-viewer ticket limit, held across every process of a fleet through Redis.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/playback/viewer_limit.hpp"

namespace wandura {

struct viewer_limit_options {
  /// Tickets one viewer_ref may get per minute, refilled continuously (docs/protocol.md §2: a per-viewer limit on our
  /// side).
  double tickets_per_minute = 30;
  /// The most tickets at once from idle; 0 means `tickets_per_minute`.
  double burst = 0;
  /// The most viewers the local fallback tracks, those Redis answered for included (full buckets are dropped first;
  /// beyond it unknown viewers are granted without tracking rather than blocked).
  std::size_t local_capacity = 100'000;
  /// This process's share of each viewer's limit while it answers alone (Redis away): its local bucket of a viewer
  /// refills at `local_share` of the rate, holds `local_share` of the burst, and starts from `local_share` of what
  /// Redis last said the viewer's bucket held. 1 (the default) lets each process spend all of it; 1/N keeps N
  /// processes within the limit together (a viewer served by one process alone then gets 1/N of it). A request of
  /// more tickets than the share's burst but within the burst goes when the local bucket is full, leaving it in
  /// debt: such requests may take up to one burst per process at an outage's start, so the bound holds exactly for
  /// requests of at most `local_share` of the burst (with a burst share under one ticket, every request). Tickets
  /// granted locally are charged in Redis once it answers again ("Degrade, never block"): the share bounds what the
  /// processes grant together while Redis is away, the charge what a window spanning the outage gives. In (0, 1].
  double local_share = 1.0;
  fallback_options fallback{};
};

/// The answer of `shared_viewer_limit::try_acquire`.
struct viewer_limit_decision {
  bool granted = false;
  /// When refused: how long until the same request would be granted (rounded up to whole ms). A request for more
  /// than the burst is never granted: its `retry_after` is only the time until the bucket is full, 0 when it is
  /// full already, and not a time to retry.
  std::chrono::milliseconds retry_after{0};
  /// Which bucket decided: `primary` the viewer's bucket in Redis, `fallback` this limiter's local bucket (Redis
  /// was slow, down or failing). Give unused tickets back with it (`release`).
  viewer_limit::account taken_from = viewer_limit::account::primary;
};

/// Counters of one limiter. A snapshot.
struct viewer_limit_stats {
  std::uint64_t granted = 0;
  std::uint64_t refused = 0;
  std::uint64_t fallbacks = 0; ///< operations answered from local state because Redis was slow, down or failing
  bool degraded = false;
};

/// A continuous token bucket per viewer_ref and limit in Redis (`wandura:{org}:viewer:<N>pm-b<B>:<viewer_ref>`,
/// include/wandura/fleet/key_layout.hpp), so that a viewer's limit is one limit whichever process serves them.
/// Each operation is one script (`EVALSHA`), atomic.
///
/// @par One bucket per limit
/// The key names the rate N (tickets a minute) and the burst B (the capacity, `tickets_per_minute` when `burst` is
/// 0): limiters of the same rate and burst share a viewer's bucket, in any process of the organisation; limiters of
/// another rate or burst have their own, so a 3-a-minute limit never takes from, or caps, a 30-a-minute one.
///
/// @par Degrade, never block
/// When Redis is slow, down or failing, decisions come from a local bucket per viewer with the same limit; see
/// `fallback_options`. Every answer from Redis sets the local bucket of its viewer to what the viewer's bucket in
/// Redis held, so a fallback goes on from the fleet's count as this process last saw it: a stall gives no viewer
/// it asked about a fresh allowance, though each process may spend the rest it last saw (N processes: up to N
/// times what was left), and a copy taken before another process gave tickets back may refuse until it refills.
/// A viewer it never asked about starts full (the process then enforces the limit for what it sees alone).
/// `viewer_limit_options::local_share` of 1/N scales all three (the rest, the refill, the burst) so that N
/// processes stay within the limit together while Redis is away (for requests of at most 1/N of the burst), at the
/// cost of a viewer served by one of them. The local buckets belong to this limiter, so limits of different rates
/// stay apart there too.
///
/// @par Owed tickets
/// Tickets granted locally are owed to Redis: the viewer's next take that Redis answers carries them, and its
/// script takes them first, down to an empty bucket and no further (the rest is forgiven), then decides the take.
/// What a viewer owes is how much less Redis's bucket would hold with those grants than without them, both
/// refilled from what Redis last said at the full rate up to the full burst: Redis's refill to the burst absorbs
/// local grants as it would have had Redis counted them, so a viewer one process served alone through the outage
/// owes nothing once its bucket would be full again, and comes back to Redis with the count that process kept.
/// So a window that spans an outage does not give a viewer the rest twice (once locally, once from Redis after).
/// The rule errs towards the viewer, never counting a ticket twice: where several processes granted a viewer
/// locally, each counts all of Redis's refill against its own grants (some go uncounted); owed tickets travel only
/// once Redis answers again (a probe of an outage carries none); a take sent with owed tickets but not answered
/// (timed out, connection lost, cancelled) forgives them here, since Redis may have taken them (if its late reply
/// comes, they were, and count as taken there). A ticket the local bucket grants for such a take is not owed
/// either: Redis may have counted the take, whose late reply, if it comes, gives its own tickets back there, so
/// such a ticket counts at most once (one per process and outage goes uncounted, or every ticket of a viewer asking
/// once a probe interval or less, each being the outage's probe). Tickets stay owed when the take carrying them was not
/// run: not sent (no connection, the client refused it) or refused by Redis with an error reply; a take written on a
/// connection whose `AUTH` or `SELECT` went unanswered within the connect timeout may run later, and forgives them.
/// Locally granted tickets given back
/// (`release` with `account::fallback`) go to the local bucket while still owed, and to Redis once Redis took them
/// or while a take carries them (if that take's owed tickets are then forgiven or never sent, the viewer has them
/// back twice). A viewer granted untracked beyond `local_capacity` owes nothing, and owed tickets Redis took are
/// forgotten with the viewer's local state once its local bucket is full (a give-back after that is ignored, as an
/// unknown viewer's).
///
/// @par A key the SDK did not write
/// A viewer's key holding anything the SDK never writes (another type than a hash, a `t` that is not a number
/// within [0, B], a `ts` that is not a finite number of ms, e.g. `nan`, `inf`, `-inf`, `1e400`, `abc`) is repaired by
/// the script that meets it, in the same step: the bucket starts full, as a missing one does, is taken from and
/// gets its expiry. Other viewers never notice; an error reply about one call's key that the script did not foresee
/// falls back for that call only (`fallback_options`).
///
/// @par Thread safety
/// As `redis_client`: use an object from the client's executor only.
/// @par Lifetime
/// The limiter may be destroyed while operations it started are in flight: they keep what they use and complete as
/// they would have (the `redis_client` must still outlive them).
class shared_viewer_limit {
public:
  /// @param redis must outlive the limiter. @param org the organisation (hash tag).
  /// @param options the per-viewer rate and burst, and the fallback; copied.
  /// @throws wandura::error with `errc::invalid_argument` for a bad `org`, a rate that is not finite and > 0, a
  ///         burst that is not finite and >= 0, a `local_share` outside (0, 1], or a rate whose share is too small to
  ///         count (`tickets_per_minute * local_share / 60000` not a normal double, e.g. 1e-300 and 1e-300).
  shared_viewer_limit(redis_client& redis, std::string_view org, viewer_limit_options options = {});
  ~shared_viewer_limit();
  shared_viewer_limit(shared_viewer_limit const&) = delete;
  shared_viewer_limit& operator=(shared_viewer_limit const&) = delete;

  /// Takes `tickets` from the viewer's bucket, all or nothing, at `now` (as `viewer_limiter::try_acquire`: 0 is
  /// always granted, without a round trip; more than the burst is always refused, with the time until the bucket
  /// is full, which may be 0: such a request is never granted, whenever it is retried).
  /// A take that Redis runs after this call stopped waiting for it (the call answered from the local bucket after
  /// `redis_options::command_timeout`, or was cancelled) gives its tickets back in Redis as soon as its reply
  /// comes, so the viewer's fleet-wide allowance is not spent for a decision made without it. As `release`, the
  /// give-back fills the bucket up to its capacity at most; takes that Redis runs between the late take and its
  /// give-back see the bucket without those tickets (the window is the outage's backlog, erring towards refusal).
  /// @throws wandura::error with `errc::invalid_argument` for an empty viewer_ref or `tickets` < 0;
  ///         `operation_aborted` when cancelled. Never for Redis failures (local fallback).
  [[nodiscard]] asio::awaitable<viewer_limit_decision>
  try_acquire(std::string viewer_ref, int tickets,
              std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// Gives `tickets` back (e.g. items the server refused or that were reused, so they did not count), up to the
  /// bucket's capacity, to the bucket that took them: whatever state Redis is in by then, tickets taken in Redis
  /// are given back in Redis (sent even while this limiter answers locally, so awaiting it then takes up to the
  /// command timeout; a give-back waiting for a stalled Redis holds one of `redis_options::max_pending` until it
  /// runs; if Redis does not run it, or none is free, the tickets stay spent there until the bucket refills), and
  /// tickets taken from the local bucket are given back to it while Redis has not counted them (an unknown viewer's,
  /// e.g. one dropped when full or never tracked beyond `local_capacity`, is ignored), and to Redis, as tickets taken
  /// there, once a take carried them there as owed ("Owed tickets"): then awaiting it may take up to the command
  /// timeout too.
  /// @param viewer_ref as given to `try_acquire`. @param tickets how many to give back.
  /// @param taken_from the `viewer_limit_decision::taken_from` of the takes. @param now the give-back's time.
  /// @throws as `try_acquire`.
  [[nodiscard]] asio::awaitable<void>
  release(std::string viewer_ref, int tickets, viewer_limit::account taken_from,
          std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  [[nodiscard]] viewer_limit_stats stats() const noexcept;

private:
  struct impl;
  std::shared_ptr<impl> impl_; ///< shared with the operations in flight: they may outlive the limiter
};

} // namespace wandura
