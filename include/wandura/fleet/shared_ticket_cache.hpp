// wandura::shared_ticket_cache: ticket reuse shared by every process of a fleet, through Redis.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/redis_client.hpp"

namespace wandura {

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
  /// The most tickets the local fallback keeps, as `memory_ticket_store_options::max_entries` (expired ones are
  /// dropped first; beyond it new ones are not kept locally, they are still stored in Redis).
  std::size_t local_capacity = 10'000;
  fallback_options fallback{};
};

/// Counters of one cache. A snapshot.
struct ticket_cache_stats {
  std::uint64_t hits = 0;      ///< lookups that returned a ticket (from Redis or, in fallback, locally)
  std::uint64_t misses = 0;    ///< lookups that returned nothing
  std::uint64_t rejected = 0;  ///< stored values refused: another identity under the key, corrupt, or expiring
  std::uint64_t fallbacks = 0; ///< operations answered from local state because Redis was slow, down or failing
  bool degraded = false;       ///< answering locally right now
};

/// Reusable tickets keyed by organisation, viewer_ref, union_info, film, episode and intent (key_layout.hpp).
///
/// A lookup is one `GET`; a store is one script (`EVALSHA`, the longer-lived ticket wins when two processes store
/// for the same identity), with `PX` = until `reuse_margin` before `expires_at`. A ticket is returned only when
/// the identity stored with it equals the one asked for and it is still reusable: never for another device or
/// viewer, whatever the key holds.
///
/// @par Degrade, never block
/// When Redis is slow (command timeout), down or answers errors, the operation answers from a local cache of the
/// tickets this process stored, with the same rule; see `fallback_options`. Stores always go to the local cache
/// too, so that what this process issued is still reused while Redis is away.
///
/// @par Thread safety
/// As `redis_client`: use an object from the client's executor only.
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

  /// Stores `ticket` for `who` unless it is reusable for less than a millisecond at `now`. One round trip (two
  /// the first time after Redis restarted: NOSCRIPT, then EVAL). Never fails for Redis (see above).
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  [[nodiscard]] asio::awaitable<void> put(ticket_identity who, cached_ticket ticket,
                                          std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  /// Forgets the ticket of `who` in Redis and locally (e.g. after the player reported it rejected): one `DEL`.
  /// If Redis cannot be reached the Redis entry stays until it expires (a fallback is counted).
  /// @throws wandura::error with `errc::invalid_argument` when `who.viewer_ref` or `who.union_info` is empty.
  [[nodiscard]] asio::awaitable<void> erase(ticket_identity who);

  [[nodiscard]] ticket_cache_stats stats() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace wandura
