// What the fleet's ticket store asks of a `shared_ticket_cache` beyond its public operations: tickets in the store's
// own decoded form, so that a near hit parses nothing and a store encodes each ticket once. Not public API.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include "local_ticket_cache.hpp"
#include "ticket_envelope.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/playback/ticket.hpp"

namespace wandura::detail {

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

  /// `get_many` without asking the near cache again (the caller just did): one `MGET` for every one of `who`, or
  /// the local fallback. A value whose payload is not a ticket store's is a miss (`rejected` too when read from
  /// Redis) and is not kept. Same errors and cancellation.
  [[nodiscard]] static asio::awaitable<std::vector<std::optional<stored_ticket>>>
  get_many_past_near(shared_ticket_cache& cache, std::vector<ticket_identity> who,
                     std::chrono::system_clock::time_point now);

  /// `put_many` of tickets already decoded: each payload is encoded once, the local copy keeps the decoded form.
  [[nodiscard]] static asio::awaitable<void> put_many(shared_ticket_cache& cache,
                                                      std::vector<std::pair<ticket_identity, stored_ticket>> tickets,
                                                      std::chrono::system_clock::time_point now);

  /// Ends the erase subscription for good (none is opened again once the cache's client is closed); the copies
  /// kept locally are served from then on as fallback copies, not near ones. On the client's executor.
  static void shut_down(shared_ticket_cache& cache);
};

} // namespace wandura::detail
