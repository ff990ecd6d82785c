// What the parts of one `wandura::fleet` share: the strand every Redis command runs on, the redis_client, the shared
// ticket cache and the per-viewer limits, this process's id, and the counters `fleet::stats` reports. Owned through
// `std::shared_ptr` by the fleet and by every ticket store and viewer limit it configured, so that it lives as long
// as any client uses it. Not public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include "ticket_cache_access.hpp"
#include "wandura/fleet/fleet.hpp"

namespace wandura::detail {

/// @par Thread safety
/// `strand` and `options` are immutable. `viewer_limit_for`, `add_cross_process_reuse`, `add_pace_stats` and
/// `snapshot` may be called from any thread, and `write_behind`. `redis`, `tickets`, the limits themselves and
/// `publish` are used on `strand` only (the rule of `redis_client`).
class fleet_state {
public:
  /// @throws wandura::error `errc::invalid_argument` for a bad `org` or Redis URL.
  fleet_state(asio::any_io_executor const& executor, fleet_options options);
  virtual ~fleet_state();
  fleet_state(fleet_state const&) = delete;
  fleet_state& operator=(fleet_state const&) = delete;

  /// The shared per-viewer limit at `per_minute` tickets a minute: one per rate, made on first use, kept as long
  /// as this state (clients of one fleet may set different rates). @throws as `shared_viewer_limit`.
  [[nodiscard]] shared_viewer_limit& viewer_limit_for(std::uint32_t per_minute);

  /// Counts a ticket this process reused that another process stored.
  void add_cross_process_reuse() noexcept;

  /// Adds a shared counter pace's counters to every later `snapshot`: `stats` is called from any thread, at each
  /// snapshot (a pace's own `stats` may be), and returns zeros once the pace is gone.
  void add_pace_stats(std::function<counter_pace_stats()> stats);
  /// This state as the owner of its Redis client (the aliasing constructor): for parts that share the connection
  /// and keep it alive, such as a shared counter pace.
  [[nodiscard]] static std::shared_ptr<redis_client> shared_redis(std::shared_ptr<fleet_state> const& self) noexcept {
    return {self, &self->redis};
  }

  /// Copies the parts' counters into the snapshot `snapshot` returns. On `strand`, after each operation: the
  /// parts' own counters are plain values of the strand, read nowhere else.
  void publish();
  /// The counters as of the last `publish`, with `cross_process_reuse` now.
  [[nodiscard]] fleet_stats snapshot() const;

  /// `fleet::shutdown`: the first call logs the INFO line and closes the Redis client and the erase subscription
  /// on `strand`; later calls do nothing. Any thread.
  static void shut_down(std::shared_ptr<fleet_state> const& self) noexcept;

  /// Hands `stores` (kept locally already: `ticket_cache_access::prepare`) to the writer, which writes what it was
  /// handed in one script per turn, one script at a time (at most `max_tickets_per_write` tickets each), on
  /// `strand`: the ticket store's calls do not wait for Redis, and the stores of many calls share a round trip.
  /// Once shut down, what is handed over is dropped (it is kept locally). Any thread.
  static void write_behind(std::shared_ptr<fleet_state> const& self, prepared_stores stores);
  /// Drops the store of Redis key `key` from what is handed over and not yet taken by a write: an erase of the
  /// ticket must not be overtaken by its store. (A store already taken goes out before the erase's command, on
  /// the same connection.) On `strand`.
  void drop_staged(std::string_view key);
  /// Completes once everything handed to `write_behind` before it was called has been written, fallen back or
  /// dropped. On `strand`. @throws wandura::error `operation_aborted` when cancelled (the writes go on).
  static asio::awaitable<void> flush(std::shared_ptr<fleet_state> self);
  /// The most tickets one store script writes: a longer script would hold Redis, which runs one at a time.
  static constexpr std::size_t max_tickets_per_write = 128;

  /// A strand of the executor the fleet was given (of its io_context's executor when it holds one: see fleet.cpp).
  asio::any_io_executor const strand;
  /// As given, `process_id` filled in ("host:pid" when empty).
  fleet_options const options;
  redis_client redis;
  shared_ticket_cache tickets;

private:
  /// On `strand`: starts the next write if there is something to write and none is in flight.
  static void drain(std::shared_ptr<fleet_state> const& self);
  static asio::awaitable<void> write(std::shared_ptr<fleet_state> self, prepared_stores stores);

  std::mutex writes_mutex_; // guards the five below
  prepared_stores staged_;  ///< handed over, not yet taken by a write
  bool drain_posted_ = false;
  bool writing_ = false;
  std::uint64_t handed_over_ = 0; ///< tickets handed to `write_behind` in all
  std::uint64_t written_ = 0;     ///< of those, written, fallen back or dropped
  /// Never expires: cancelled after each write, to wake `flush`es (on `strand`).
  asio::steady_timer wrote_;

  mutable std::mutex mutex_; // guards limits_ (not the limits themselves) and published_
  std::map<std::uint32_t, std::unique_ptr<shared_viewer_limit>> limits_;
  std::vector<std::function<counter_pace_stats()>> pace_stats_;
  fleet_stats published_{};
  std::atomic<std::uint64_t> cross_process_reuse_{0};
  std::atomic<bool> shut_down_{false};
};

} // namespace wandura::detail
