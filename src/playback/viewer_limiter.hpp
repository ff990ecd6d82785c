// An optional per-viewer ticket limit enforced by the client before anything is sent (docs/protocol.md §2: anyone
// who can drive *your* ticket endpoint can spend your organisation's limit, so limit tickets per viewer on your
// side). Not public API: the client builds one from `client_options::viewer_tickets_per_minute` when no
// `client_options::viewer_limit` is given, and uses it through the public `wandura::viewer_limit` interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "wandura/playback/viewer_limit.hpp"
#include "wandura/resilience/clock.hpp"

namespace wandura::detail {

/// Options of `viewer_limiter`.
struct viewer_limiter_options {
  /// Tickets one viewer may obtain per minute, refilled continuously (limit/60 per second); a viewer idle for a
  /// minute may take the whole minute's allowance at once. Must be > 0.
  double tickets_per_minute = 60;
  /// The most viewers tracked; beyond it the least recently seen viewer is forgotten (and starts again with a full
  /// allowance). Viewers whose allowance has refilled completely are equivalent to untracked ones.
  std::size_t max_viewers = 100'000;
  /// Independent locks, each with its own LRU. Clamped to [1, max_viewers].
  std::size_t shards = 16;
  /// The monotonic clock (`now`) the allowance refills on. Null: a `wandura::real_clock`. A client gives its limiter
  /// its `retry.time_source`; tests inject `wandura::testing::manual_clock`.
  std::shared_ptr<wandura::clock> time_source{};
};

/// A continuous token bucket per viewer (capacity `tickets_per_minute`, refill `tickets_per_minute / 60` per
/// second), keyed by `viewer_ref`. Its operations never suspend: awaiting `acquire` costs a coroutine frame, no hop
/// to another executor, and `release` is done when it returns.
///
/// @par Thread safety
/// All member functions may be called from any thread at once (sharded mutexes, held for O(1) work).
class viewer_limiter final : public viewer_limit {
public:
  /// @throws wandura::error with `errc::invalid_argument` when `tickets_per_minute` is not > 0.
  explicit viewer_limiter(viewer_limiter_options options);
  ~viewer_limiter() override;
  viewer_limiter(viewer_limiter const&) = delete;
  viewer_limiter& operator=(viewer_limiter const&) = delete;

  /// Takes `tickets` from `viewer_ref`'s allowance if all of them fit; takes nothing otherwise (all or nothing, so
  /// a batch is either sent whole or refused whole). A request for 0 tickets is always allowed. A request for more
  /// than `tickets_per_minute` is always refused.
  [[nodiscard]] asio::awaitable<decision> acquire(std::string viewer_ref, std::uint32_t tickets) override;

  /// Gives back tickets taken but not used (items the cache answered, prefetches the server shed, items never
  /// sent), before it returns. The allowance never exceeds its capacity. Unknown viewers are ignored. One account:
  /// every take is `account::primary`.
  void release(std::string_view viewer_ref, std::uint32_t tickets, account taken_from) noexcept override;

  /// Viewers currently tracked (at most `max_viewers` rounded up to a multiple of the shard count).
  [[nodiscard]] std::size_t tracked_viewers() const;

private:
  struct storage;

  [[nodiscard]] decision take(std::string_view viewer_ref, std::uint32_t tickets);

  viewer_limiter_options options_;
  double per_second_ = 1;
  std::unique_ptr<storage> viewers_;
};

} // namespace wandura::detail
