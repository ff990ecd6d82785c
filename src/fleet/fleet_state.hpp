// What the parts of one `wandura::fleet` share: the strand every Redis command runs on, the redis_client, the shared
// ticket cache and the per-viewer limits, this process's id, and the counters `fleet::stats` reports. Owned through
// `std::shared_ptr` by the fleet and by every ticket store and viewer limit it configured, so that it lives as long
// as any client uses it. Not public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "ticket_cache_access.hpp"
#include "wandura/fleet/fleet.hpp"

namespace wandura::detail {

/// @par Thread safety
/// `strand` and `options` are immutable. `viewer_limit_for`, `add_cross_process_reuse`, `add_pace_stats` and
/// `snapshot` may be called from any thread, and `store_behind`, `drop_staged` and the flushes'. `redis`, `tickets`,
/// the limits themselves and `publish` are used on `strand` only (the rule of `redis_client`).
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
  void add_cross_process_reuse(std::uint64_t n = 1) noexcept;

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

  /// Keeps `tickets` locally (`ticket_cache_access::prepare`) and hands them to the writer, which writes what it
  /// was handed, in that order, one script at a time (at most `max_tickets_per_write` tickets each), on `strand`:
  /// the ticket store's calls do not wait for Redis, and the stores of many calls share a round trip. Once shut
  /// down, what is handed over is dropped (it is kept locally only). Any thread.
  /// @throws wandura::error `invalid_argument` for an identity without viewer_ref or union_info.
  static void store_behind(std::shared_ptr<fleet_state> const& self,
                           std::vector<std::pair<ticket_identity, stored_ticket>> tickets,
                           std::chrono::system_clock::time_point now);
  /// The local copy of Redis key `key` forgotten, and a store of it not yet taken by a write not written: an
  /// erase of the ticket must not be overtaken by its store. (A store already taken goes out before the erase's
  /// command, on the same connection.) Any thread.
  void drop_staged(std::string_view key);

  /// A `flush` waiting for every store handed over before it to be written, fallen back or dropped.
  class flush_waiter {
  public:
    flush_waiter() = default;
    flush_waiter(flush_waiter const&) = delete;
    flush_waiter& operator=(flush_waiter const&) = delete;
    virtual ~flush_waiter() = default;
    /// Posts the flush's completion with `ec` to its handler's executor. Called once, by whoever removed it from
    /// the waiters (with the writes' lock held: it only posts).
    virtual void complete(std::error_code ec) = 0;
    std::uint64_t target = 0; ///< `written_` it waits for
  };
  /// Starts a flush: `token` completes with `void(std::error_code)`, no error once what was handed over before
  /// it was written, fallen back or dropped, `operation_aborted` when cancelled through its slot or when the fleet
  /// object goes (`abort_flushes`) or the state is gone already. Holds the state weakly. Any thread, any executor.
  template <class CompletionToken> static auto async_flush(std::weak_ptr<fleet_state> self, CompletionToken&& token);
  /// `async_flush` awaited: the error it completed with. Holds the state weakly. Any executor.
  static asio::awaitable<std::error_code> flush(std::weak_ptr<fleet_state> self);
  /// Registers `waiter`, or completes it at once when what it waits for is done.
  void add_flush(std::shared_ptr<flush_waiter> const& waiter);
  /// Removes `waiter` if it still waits: true when it did (its completion is the caller's to make).
  bool remove_flush(flush_waiter const* waiter);
  /// Completes every waiting flush with `operation_aborted`: the fleet object is going (`~fleet`).
  void abort_flushes();
  /// The most tickets one store script writes: a longer script would hold Redis, which runs one at a time.
  static constexpr std::size_t max_tickets_per_write = 128;

  /// A strand of the executor the fleet was given (of its io_context's executor when it holds one: see fleet.cpp).
  asio::any_io_executor const strand;
  /// As given, `process_id` filled in ("host:pid" when empty).
  fleet_options const options;
  redis_client redis;
  shared_ticket_cache tickets;

private:
  /// A store handed to the writer: the script's key and arguments, the token of its local copy, and whether an
  /// erase dropped it since.
  struct staged_store {
    std::string key;
    ticket_key_id id = 0;
    std::string envelope;
    std::string px;
    std::uint64_t token = 0;
    bool erased = false;
  };
  /// On `strand`: starts the next write if there is something to write and none is in flight.
  static void drain(std::shared_ptr<fleet_state> const& self);
  /// On `strand`: writes `stores`, the next `taken` handed over (erased ones included, not in `stores`).
  static asio::awaitable<void> write(std::shared_ptr<fleet_state> self, prepared_stores stores, std::size_t taken);
  /// Completes the flushes whose target `written_` reached. With `writes_mutex_` held.
  void wake_flushes();

  /// Guards the six below. Taken before the ticket cache's own lock, never after it.
  std::mutex writes_mutex_;
  std::deque<staged_store> staged_; ///< handed over, not yet taken by a write, in order
  bool drain_posted_ = false;
  bool writing_ = false;
  std::uint64_t handed_over_ = 0; ///< tickets handed to `store_behind` in all
  std::uint64_t written_ = 0;     ///< of those, the first ones written, fallen back or dropped
  std::vector<std::shared_ptr<flush_waiter>> flushes_;

  mutable std::mutex mutex_; // guards limits_ (not the limits themselves) and published_
  std::map<std::uint32_t, std::unique_ptr<shared_viewer_limit>> limits_;
  std::vector<std::function<counter_pace_stats()>> pace_stats_;
  fleet_stats published_{};
  std::atomic<std::uint64_t> cross_process_reuse_{0};
  std::atomic<bool> shut_down_{false};
};

} // namespace wandura::detail
