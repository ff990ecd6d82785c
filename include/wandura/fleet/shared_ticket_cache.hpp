// wandura::shared_ticket_cache: ticket reuse shared by every process of a fleet, through Redis.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/redis_client.hpp"

namespace wandura {
namespace detail {
struct ticket_cache_access;
} // namespace detail

/// A ticket as the cache keeps it: opaque serialized bytes and the expiry that decides reuse.
struct cached_ticket {
  std::string payload; ///< the serialized ticket (the playback layer's JSON of one ticket); opaque here
  std::chrono::system_clock::time_point expires_at; ///< the ticket's `expires_at` (kept to the millisecond)

  friend bool operator==(cached_ticket const&, cached_ticket const&) = default;
};

struct ticket_cache_options {
  /// A ticket is reused until this long before its `expires_at` (docs/protocol.md §3: 5 minutes); the Redis entry
  /// expires by itself then (PX).
  std::chrono::milliseconds reuse_margin = std::chrono::minutes(5);
  /// The most tickets the local copy keeps, as `memory_ticket_store_options::max_entries`. When it is full, tickets
  /// past their reuse limit go first, then the one with the least reuse time left (the earliest stored of several
  /// with as little), unless the new one has less: then it is not kept locally. Either way it is still in Redis.
  std::size_t local_capacity = 10'000;
  /// The most bytes the local copy's tickets may take (their serialized payloads and identities, plus ~230 bytes
  /// each for the structures around them), as `memory_ticket_store_options::max_bytes`: whichever of the two bounds
  /// binds first, evicting in the same order. A ticket larger than this is not kept locally (it is in Redis).
  std::size_t local_max_bytes = 64 * 1024 * 1024;
  /// Answer lookups from the local copy while Redis is up too (a near cache), so that a ticket this process stored
  /// or already read costs no round trip. Sound because a stored ticket never changes (a store that replaces it
  /// stores another valid ticket for the same identity) and every erase is published: the cache subscribes to
  /// the organisation's erase channel on a second connection and serves local copies only while that
  /// subscription is live and only copies kept since it began (and a ticket this process is storing, until its
  /// script has ended). False: every lookup asks Redis, the local copy serves only as the fallback.
  bool near_cache = true;
  /// With the near cache on: the most ticket keys of the organisation this process keeps track of (see Keys known
  /// absent), in a table of 16-byte slots at most three quarters full (8 MiB at most at the default). Past it the
  /// replica empties and lookups ask Redis until it is read again (after a backoff). 0: not kept; every near miss
  /// asks Redis.
  std::size_t known_keys_capacity = 250'000;
  fallback_options fallback{};
};

/// Counters of one cache. A snapshot. Each ticket a lookup asks for is counted once, in `hits` or `misses`, when
/// the lookup returns; a lookup cancelled (it throws `operation_aborted`) counts none of its tickets.
struct ticket_cache_stats {
  std::uint64_t hits = 0; ///< lookups that returned a ticket (from Redis, the near cache or the fallback)
  /// Of `hits`: answered from the local copy without a round trip, while the Redis client is open: a copy kept while
  /// the erase subscription was live, or one this process stored and has not written to Redis yet (while Redis is down,
  /// every ticket stored since: served as near, since no other process knows it to erase it, and not a fallback).
  std::uint64_t near_hits = 0;
  std::uint64_t erasures_heard = 0; ///< erase notifications received (this process's own erases included)
  std::uint64_t misses = 0;         ///< lookups that returned nothing
  std::uint64_t rejected = 0;       ///< stored values refused: another identity under the key, corrupt, or expiring
  /// Operations that needed Redis and were answered from local state because Redis was slow, down or failing, or
  /// the Redis client was closed (`redis_client::close`, as `fleet::shutdown` does: then every lookup the local copy
  /// answers).
  std::uint64_t fallbacks = 0;
  bool degraded = false;                  ///< answering locally right now
  bool near_cache_live = false;           ///< the erase subscription is confirmed: the near cache answers
  std::uint64_t known_absent = 0;         ///< of `misses`: answered absent by the replica of keys, without a round trip
  std::size_t known_keys = 0;             ///< ticket keys the replica holds now
  bool known_keys_complete = false;       ///< the replica is complete: a key it lacks is answered absent
  std::uint64_t known_keys_resyncs = 0;   ///< times the replica was read whole from Redis and became complete
  std::uint64_t known_keys_overflows = 0; ///< times it outgrew `known_keys_capacity` (and emptied)
};

/// Reusable tickets keyed by organisation, viewer_ref, union_info, film, episode and intent (key_layout.hpp).
///
/// A lookup of any number of tickets is one `MGET` for those not found in the near cache (below); a store of any
/// number is one script (`EVALSHA`, the longer-lived ticket wins when two processes store for the same identity),
/// with `PX` = until `reuse_margin` before `expires_at`; an erase is one script that deletes the key and publishes
/// it on the organisation's erase channel. A ticket is returned only when the identity stored with it equals the one
/// asked for and it is still reusable: never for another device or viewer, whatever the key holds.
///
/// @par Near cache
/// With `ticket_cache_options::near_cache` (the default), the tickets this process stores or reads from Redis are
/// kept locally and answer later lookups without a round trip, while the cache's subscription to the erase
/// channel is live (it is opened at the first store or hit, on a second connection, and reopened by itself after
/// the backoff when lost; local copies kept before it was last confirmed are not served from the near cache). An
/// erase anywhere in the fleet drops every process's copy when its notification arrives: until then (one network
/// delay) another process may still serve the erased ticket, which was valid when it was stored. A ticket this
/// process is storing is served near until its store's script has ended, whatever the subscription's state (Redis
/// would answer it once the script ran). A lookup whose Redis reply races an erase notification does not keep what
/// it read. A near hit is a lookup by the identity's
/// fields (no key hashing, no Redis key) under one mutex, and a copy of the ticket.
///
/// @par Keys known absent
/// A near miss need not ask Redis either: with the near cache on, each process keeps a replica of which ticket
/// keys of the organisation exist (a 64-bit id and expiry per key, at most `known_keys_capacity`). Every store
/// script publishes the keys it stored and their `PX` on the erase channel (one message per script: `+`, then a
/// line `<key> <px>` per ticket); every erase publishes its key; and whenever the subscription (re)starts, the
/// replica is read whole from Redis (a script of one `SCAN` page and each key's `PTTL` per round trip, 200 keys a
/// page: under a millisecond of Redis's time each) while the messages keep coming. Once that read has ended, a lookup
/// of a key the replica lacks is answered absent at once (`known_absent`): one network delay after another process
/// stored it, as asking Redis a moment earlier would have. Keys written by anything but this cache's store script are
/// not announced and are answered absent until the replica is next read whole; a key without an expiry (`PTTL` -1:
/// never written by the store script, which always sets one) is left out of the replica and so answered absent.
/// Whenever the replica may be wrong it errs on the side of asking: with the subscription down, before the read ends,
/// after a message it cannot read (then it is read again, at most every 2 s, so that a message anyone can publish does
/// not make the fleet read every key back to back), past its capacity, or where the read fails (behind a cluster proxy
/// that refuses `SCAN`: then, after a backoff of 1 s doubling to 5 min, it is tried again, from the page that failed
/// while the subscription is the same one), every near miss asks Redis
/// as without the replica; a key it holds that Redis no longer has costs an `MGET` that drops it. A wrong answer can
/// cost a reuse, never serve a ticket to anyone else: a ticket is only ever served as read, with its identity checked.
///
/// @par Degrade, never block
/// When Redis is slow (command timeout), down or answers errors, the operation answers from a local cache of the
/// tickets this process stored or read, with the same rule; see `fallback_options`. Stores always go to the local
/// cache too, so that what this process issued is still reused while Redis is away. Besides an operation's probe,
/// a completed read of every ticket key (the replica's, "Keys known absent" above) ends an outage that a read
/// opened: once the replica is complete, lookups of keys no process stored ask Redis nothing that could.
///
/// @par Thread safety
/// As `redis_client`: use an object from the client's executor only, except `find_near`, `near_hits`, `known_absent`,
/// `erasures_heard` and `near_cache_live` (any thread, while the executor runs the cache's operations).
/// @par Lifetime
/// The cache may be destroyed while operations it started are in flight: they keep what they use and complete as
/// they would have (the `redis_client` must still outlive them; destroying it completes them with
/// `operation_aborted`).
class shared_ticket_cache {
public:
  /// @param redis must outlive the cache. @param org the organisation (hash tag), 1-64 of [A-Za-z0-9._-]; copied.
  /// @param options the reuse margin, the local fallback's capacity and the fallback rules; copied.
  /// @throws wandura::error with `errc::invalid_argument` for a bad `org`.
  shared_ticket_cache(redis_client& redis, std::string_view org, ticket_cache_options options = {});
  ~shared_ticket_cache();
  shared_ticket_cache(shared_ticket_cache const&) = delete;
  shared_ticket_cache& operator=(shared_ticket_cache const&) = delete;

  /// The reusable ticket for `who` at `now`, if any process of the fleet stored one.
  /// Never fails for Redis: falls back to the local cache. Takes at most the client's command timeout.
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  /// @par Cancellation
  /// Through the awaiting coroutine's cancellation slot: completes by throwing `operation_aborted`.
  [[nodiscard]] asio::awaitable<std::optional<cached_ticket>>
  get(ticket_identity who, std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// The reusable ticket of each of `who` at `now`, in order: the near cache first, then one `MGET` for the
  /// rest. Same rules, errors and cancellation as `get`.
  [[nodiscard]] asio::awaitable<std::vector<std::optional<cached_ticket>>>
  get_many(std::vector<ticket_identity> who,
           std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// The near cache's ticket for `who` at `now`, without a round trip and without waiting: what `get` would
  /// answer locally (see Near cache), or nothing (ask `get`). For a caller's fast path.
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  /// @par Thread safety
  /// Any thread, concurrently with the cache's other operations on its executor.
  [[nodiscard]] std::optional<cached_ticket>
  find_near(ticket_identity const& who,
            std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;

  /// Stores `ticket` for `who` unless it is reusable for less than a millisecond at `now`. One round trip (two
  /// the first time after Redis restarted: NOSCRIPT, then EVAL). Never fails for Redis (see above).
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  [[nodiscard]] asio::awaitable<void> put(ticket_identity who, cached_ticket ticket,
                                          std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// Stores each of `tickets` (who it is for, the ticket) as `put` does, in one script: one round trip for all.
  /// Same errors as `put`.
  [[nodiscard]] asio::awaitable<void>
  put_many(std::vector<std::pair<ticket_identity, cached_ticket>> tickets,
           std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// Forgets the ticket of `who` in Redis and locally (e.g. after the player reported it rejected), and tells the
  /// fleet: one script (`DEL`, then `PUBLISH` of the key on the erase channel). If Redis cannot be reached the Redis
  /// entry stays until it expires (a fallback is counted) and no other process hears of the erase.
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  [[nodiscard]] asio::awaitable<void> erase(ticket_identity who);

  [[nodiscard]] ticket_cache_stats stats() const noexcept;
  /// `stats().near_hits`, readable from any thread (`find_near` counts there).
  [[nodiscard]] std::uint64_t near_hits() const noexcept;
  /// `stats().known_absent`, readable from any thread (the fleet's ticket store answers there).
  [[nodiscard]] std::uint64_t known_absent() const noexcept;
  /// `stats().erasures_heard`, readable from any thread (notifications arrive between operations).
  [[nodiscard]] std::uint64_t erasures_heard() const noexcept;
  /// `stats().near_cache_live`, readable from any thread (the subscription changes state on its own).
  [[nodiscard]] bool near_cache_live() const noexcept;

private:
  friend struct detail::ticket_cache_access; // the fleet's ticket store: its payloads decoded once, not per hit
  struct impl;
  std::shared_ptr<impl> impl_; ///< shared with the operations in flight: they may outlive the cache
};

} // namespace wandura
