// Ticket reuse on the SDK's side (docs/protocol.md §3): a ticket is reused only for the same
// viewer, device, film, episode and intent, and only until 5 minutes before `expires_at`; never across devices.
//
// `ticket_store` is the small interface the client talks to, so that another store (a shared cache, a database)
// can plug in; `memory_ticket_store` is the default: in memory, bounded in entries (LRU) and by time (TTL).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "wandura/playback/ticket.hpp"
#include "wandura/resilience/clock.hpp"

namespace wandura {

/// What a reusable ticket is keyed by. Two keys are equal only when every field is: a ticket for another device
/// (`union_info`) or another viewer is never found.
struct ticket_key {
  std::string
      viewer_ref; ///< Required for caching: without it nothing is stored (as on the server, docs/protocol.md §4).
  std::string union_info; ///< The device the ticket is bound to. Required for caching.
  std::string film_ref;
  std::int32_t episode_no = 0;
  wandura::intent intent = wandura::intent::play;

  friend bool operator==(ticket_key const&, ticket_key const&) = default;
};

/// Hash of every field of a `ticket_key`.
struct ticket_key_hash {
  [[nodiscard]] std::size_t operator()(ticket_key const& key) const noexcept;
};

/// Where reusable tickets are kept: the client's only way to reuse a ticket.
///
/// The operations are awaitable so that a store may live out of process (the fleet's Redis store answers a
/// batch's lookups in one round trip). The client uses the store only when it reuses tickets (`reuse_tickets` and
/// a `viewer_ref`): once per call to look up every episode of the batch, and once per call to store the tickets the
/// server granted it (fresh, or reused by the server because the store lacked them). Each time it first offers the work
/// to be done at once (`try_find`, `try_insert_many`), which costs the call nothing more than the work; only when the
/// store declines does it await the operation (`find`, `insert_many`), as it awaits a request (see Cancellation). A
/// store that can often answer without suspending (from memory, from a local copy) overrides the two `try_` functions;
/// the defaults decline.
///
/// Implementations must never return a ticket for a key other than the one asked for, nor one that is no longer
/// reusable (see `memory_ticket_store` for the rule).
///
/// @par Errors
/// A store answers "nothing stored" rather than fail when its backing service is away (degrade, never block); it
/// throws only `wandura::error` with `asio::error::operation_aborted` when the awaiting coroutine is cancelled
/// (the client's call then fails the same way, being cancelled itself). Anything a store throws while the call is
/// not cancelled (an `operation_aborted` of its own included), from any operation, the client's call goes on
/// without: a lookup that threw answers nothing (every episode is asked of the server), tickets whose store threw
/// are returned unstored. Each such failure is counted (`metrics_snapshot::store_errors`,
/// `wandura_store_errors_total`) and written as a WARN line to `retry_options::log`, with the exception's `what()`.
/// @par Cancellation
/// The client awaits each operation as it awaits a request: when the call is cancelled, or the client is destroyed
/// or shut down, the operation's coroutine gets a terminal cancellation through its cancellation slot, the call
/// ends at once with `operation_aborted` without waiting for it, and `client::shutdown()` completes only once the
/// operation has ended. An operation that ignores cancellation runs on, holding the store, until it ends by itself.
/// `try_find` and `try_insert_many` never wait, so nothing can be waiting on them when the client ends.
/// @par Thread safety
/// Implementations must be safe to call from many threads at once, and from coroutines on any executor.
class ticket_store {
public:
  ticket_store() = default;
  ticket_store(ticket_store const&) = delete;
  ticket_store& operator=(ticket_store const&) = delete;
  virtual ~ticket_store() = default;

  /// The reusable tickets of a batch: element `i` of the result is the ticket stored for exactly `keys[i]` if it
  /// may still be reused, nullopt otherwise. The result has `keys.size()` elements.
  /// @param keys the episodes of one batch (at most `ticket_batch::max_episodes`); owned by the operation.
  [[nodiscard]] virtual asio::awaitable<std::vector<std::optional<ticket>>> find(std::vector<ticket_key> keys) = 0;
  /// Stores `t` for `key`, replacing any earlier one. Implementations may decline (a ticket too close to expiry or
  /// too large to keep, a key without viewer or device), in which case `find` returns nullopt for the key: a
  /// declined ticket still replaces the earlier one, by none.
  /// @param key what `t` is for; owned by the operation. @param t the ticket; owned by the operation.
  [[nodiscard]] virtual asio::awaitable<void> insert(ticket_key key, ticket t) = 0;
  /// Stores each of `tickets` as `insert` does. The client stores the tickets the server granted a call (fresh or
  /// reused) with one call to this, so that a store out of process may write them in one round trip; the default
  /// inserts them one at a time.
  /// @param tickets what each ticket is for, and the ticket; owned by the operation.
  [[nodiscard]] virtual asio::awaitable<void> insert_many(std::vector<std::pair<ticket_key, ticket>> tickets);
  /// Forgets the ticket of `key`, if any (for example after the player reported it rejected).
  /// @param key owned by the operation.
  [[nodiscard]] virtual asio::awaitable<void> erase(ticket_key key) = 0;

  /// `find` answered at once, without suspending, if the store can answer every key so: the same result `find`
  /// would give, or nullopt when the store would have to wait (the client then awaits `find` for the same keys).
  /// Declining must not change what the store counts or holds: the lookup is asked again by `find`.
  /// The default declines.
  /// @param keys the episodes of one batch (at most `ticket_batch::max_episodes`).
  [[nodiscard]] virtual std::optional<std::vector<std::optional<ticket>>> try_find(std::span<ticket_key const> keys);
  /// `insert_many` done at once, without suspending, if the store can: true when it took every ticket (it may have
  /// moved from `tickets`; a store out of process may write them out later, on its own), false with `tickets` left
  /// as given (the client then awaits `insert_many` with them). The default declines.
  /// @param tickets what each ticket is for, and the ticket.
  [[nodiscard]] virtual bool try_insert_many(std::vector<std::pair<ticket_key, ticket>>& tickets);
};

/// Options of `memory_ticket_store`.
struct memory_ticket_store_options {
  /// The most tickets kept, split evenly over the shards (rounded up to a multiple of their count): a shard that
  /// holds its `max_entries / shards` drops its own least recently used ticket for a new one, so a store whose keys
  /// fall unevenly over the shards drops tickets before it holds `max_entries` (1,000 random keys in 16 shards of
  /// 63: about 950 kept). For a strict bound and order over the whole store, one shard. 0 keeps none: every insert
  /// is declined.
  std::size_t max_entries = 10'000;
  /// The most bytes the tickets kept may take, roughly (their keys' and fields' characters, plus a fixed ~370 bytes
  /// per entry for the structures around them); the least recently used go first. Split evenly over the shards: a
  /// ticket larger than `max_bytes / shards` (4 MiB at the defaults) is not kept. 64 MiB holds the 10,000 entries
  /// of `max_entries` up to ~6 KiB each; without it, tickets carrying large `drm_payload`s (hundreds of KiB) would
  /// grow the store to gigabytes before `max_entries` bounds it.
  std::size_t max_bytes = 64 * 1024 * 1024;
  /// A ticket is reused only while `now < expires_at - reuse_margin` (docs/protocol.md §3: 5 minutes). A negative
  /// margin counts as none (never reused at or past `expires_at`); one longer than the clock can count (about 292
  /// years) reuses nothing.
  std::chrono::seconds reuse_margin{300};
  /// Independent locks, to spread contention; each shard has its own LRU and its share of `max_entries` and
  /// `max_bytes`. Clamped to [1, max_entries].
  std::size_t shards = 16;
  /// The clock whose wall time (`system_now`) is compared with `expires_at`. Null: a `wandura::real_clock`. A client
  /// gives its own store its `retry.time_source`; tests inject `wandura::testing::manual_clock`.
  std::shared_ptr<wandura::clock> time_source{};
};

/// The default `ticket_store`: an in-memory LRU in `shards` shards (each evicting its own least recently used)
/// whose entries also expire `reuse_margin` before the ticket's `expires_at`.
///
/// `insert` declines keys with an empty `viewer_ref` or `union_info`, tickets already inside the margin and tickets
/// over `max_bytes / shards` (forgetting the key's earlier ticket for the latter two). `find`
/// drops an entry it finds expired. Memory is bounded by `max_entries` tickets and by `max_bytes`, whichever binds
/// first.
///
/// Its operations never suspend: `try_find` and `try_insert_many` always answer, and awaiting the others costs a
/// coroutine frame, no hop to another executor.
///
/// @par Thread safety
/// All member functions may be called from any thread at once; each shard is guarded by its own mutex, held only
/// for the map and list operations (tickets are copied out under the lock).
class memory_ticket_store final : public ticket_store {
public:
  explicit memory_ticket_store(memory_ticket_store_options options = {});
  ~memory_ticket_store() override;

  /// Completes without suspending. @param keys the batch's episodes.
  [[nodiscard]] asio::awaitable<std::vector<std::optional<ticket>>> find(std::vector<ticket_key> keys) override;
  /// Completes without suspending. @param key what `t` is for. @param t the ticket.
  [[nodiscard]] asio::awaitable<void> insert(ticket_key key, ticket t) override;
  /// Completes without suspending. @param key what to forget.
  [[nodiscard]] asio::awaitable<void> erase(ticket_key key) override;
  /// Always answers. @param keys the batch's episodes.
  [[nodiscard]] std::optional<std::vector<std::optional<ticket>>> try_find(std::span<ticket_key const> keys) override;
  /// Always takes every ticket (as `insert` would, one at a time) and returns true. @param tickets moved from.
  [[nodiscard]] bool try_insert_many(std::vector<std::pair<ticket_key, ticket>>& tickets) override;

  /// Tickets currently held, expired ones not yet dropped included.
  [[nodiscard]] std::size_t size() const;
  /// Bytes they take, as `memory_ticket_store_options::max_bytes` counts them.
  [[nodiscard]] std::size_t bytes() const;
  /// Forgets every ticket.
  void clear();

private:
  struct storage;

  [[nodiscard]] std::optional<ticket> find_one(ticket_key const& key);
  void insert_now(ticket_key const& key, ticket&& value);

  memory_ticket_store_options options_;
  std::unique_ptr<storage> entries_;
};

} // namespace wandura
