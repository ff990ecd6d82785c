// What the fleet's ticket store asks of a `shared_ticket_cache` beyond its public operations: tickets in the store's
// own decoded form, so that a near hit parses nothing and a store encodes each ticket once. Not public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "local_ticket_cache.hpp"
#include "ticket_envelope.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/playback/ticket.hpp"

namespace wandura::detail {

/// Tickets ready for one store script: each one's Redis key and that key's id (`ticket_key_id_of`, read once
/// here for the local copy, the write's end and the replica), its envelope and PX (two arguments each), and the
/// token of the store that kept its local copy (0: none waits for the write).
struct prepared_stores {
  std::vector<std::string> keys;
  std::vector<ticket_key_id> ids;
  std::vector<std::string> args;
  std::vector<std::uint64_t> tokens;
};

/// A near hit as the ticket store serves it.
struct near_ticket {
  wandura::ticket value;
  bool from_another_process = false; ///< stored by a process whose id is not the one asked with
};

struct ticket_cache_access {
  /// The near copy of `who`'s ticket at `now`, decoded, as `shared_ticket_cache::find_near` decides (counted in
  /// `near_hits` when found). A near copy whose payload is not a ticket store's is no hit: it is dropped, and the
  /// store's lookup asks Redis. `process_id` is this process's id. Any thread. `who` must have a viewer_ref and a
  /// union_info (not checked).
  [[nodiscard]] static std::optional<near_ticket> find_near(shared_ticket_cache& cache, ticket_identity_view who,
                                                            std::chrono::system_clock::time_point now,
                                                            std::string_view process_id);

  /// Each of `who` (in order) answered without a round trip, but only if every one can be: its near copy, as
  /// `find_near` decides, or nothing when the fleet's replica of which keys exist knows its key is absent from
  /// Redis (known_keys.hpp). An identity without a viewer_ref or a union_info is answered nothing and not counted
  /// (nothing is ever stored for it). Answered: true, each copy's ticket in `out[i]` (`out` as long as `who`, its
  /// items empty), `near_hits` counting each copy, `known_absent` each absent key, and the result's
  /// `from_other_processes` the copies another process stored (`process_id` is this process's id). Otherwise
  /// false, `out` untouched and nothing counted (the caller asks again, for all of them). One lock for all. Any
  /// thread.
  [[nodiscard]] static bool find_near_all(shared_ticket_cache& cache, std::span<ticket_identity_view const> who,
                                          std::chrono::system_clock::time_point now, std::string_view process_id,
                                          std::span<std::optional<wandura::ticket>> out,
                                          std::size_t& from_other_processes);

  /// `get_many` without asking the near cache again (the caller just did): one `MGET` for every one of `who` the
  /// replica does not know to be absent, or the local fallback. A value whose payload is not a ticket store's is a miss
  /// (`rejected` too when read from Redis) and is not kept. Same errors and cancellation.
  [[nodiscard]] static asio::awaitable<std::vector<std::optional<stored_ticket>>>
  get_many_past_near(shared_ticket_cache& cache, std::vector<ticket_identity> who,
                     std::chrono::system_clock::time_point now);

  /// The first half of `put_many`, for tickets already decoded (each payload encoded once, and kept with its
  /// fields located): each kept locally at once and added to `into`, to be written by `write`. Any thread.
  /// `who` must have a viewer_ref and a union_info (`invalid_argument` otherwise).
  static void prepare(shared_ticket_cache& cache, std::vector<std::pair<ticket_identity, stored_ticket>> tickets,
                      std::chrono::system_clock::time_point now, prepared_stores& into);

  /// The second half: `stores` (prepared by `prepare`, by one caller or many) written in one script, or fallen
  /// back as `put_many` falls back. On the client's executor. Same cancellation as `put_many`.
  [[nodiscard]] static asio::awaitable<void> write(shared_ticket_cache& cache, prepared_stores stores);

  /// The local copies of `stores` wait for no write any more (it was dropped): served near only under their
  /// generation from now on. Any thread.
  static void end_unwritten(shared_ticket_cache& cache, prepared_stores const& stores);
  /// `done` runs on the client's executor after each command the cache sends on its own (not for an operation
  /// of its caller's: a page of its replica's read whole), answered or not. Set before the cache is used.
  static void after_own_commands(shared_ticket_cache& cache, std::function<void()> done);
  /// The replica of keys' fields of `into` (`known_keys`, `known_keys_complete`, `known_keys_resyncs`,
  /// `known_keys_overflows`) as of now. Any thread.
  static void known_keys_now(shared_ticket_cache const& cache, ticket_cache_stats& into);
  /// Drops the local copy kept under the Redis key `key`, if any. Any thread.
  static void forget(shared_ticket_cache& cache, std::string_view key);

  /// Ends the erase subscription for good (none is opened again once the cache's client is closed); the copies
  /// kept locally are served from then on as fallback copies, not near ones, and later stores are kept locally
  /// only (their copies wait for no write). On the client's executor.
  static void shut_down(shared_ticket_cache& cache);
};

} // namespace wandura::detail
