// The Redis key layout of the fleet's shared state (docs/adr/0008-fleet-shared-state.md).
//
// Every key starts with `wandura:{<org>}:`; the braces are a Redis Cluster hash tag, so all keys of one
// organisation live in one slot and the scripts (which touch one key each) work unchanged behind a cluster proxy:
//
// | key                                              | type   | what                                       |
// |--------------------------------------------------|--------|--------------------------------------------|
// | `wandura:{org}:ticket:<32 hex>`                  | string | one reusable ticket, PX = until 5 min before
// `expires_at` | | `wandura:{org}:viewer:<viewer_ref>`              | hash   | a viewer's token bucket: `t` tokens,
// `ts` ms | | `wandura:{org}:pace:<counter>`                   | hash   | a counter's GCRA: `tat`, `hold` (ms since the
// epoch), `em` (ms per unit), `burst` (units) |
//
// The ticket key's hex is the first 16 bytes of SHA-256 over the length-prefixed viewer_ref, union_info, film_ref,
// episode_no and intent: bounded in size, no device id in clear text, and a collision cannot serve a ticket to
// another viewer because the stored value repeats the identity and is checked on every read.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace wandura {

/// Who a ticket is for: the reuse rule of docs/protocol.md §3 (same viewer, device, film, episode and intent).
struct ticket_identity {
  std::string viewer_ref; ///< stable per viewer and device (docs/protocol.md §1 viewer_ref); must not be empty
  std::string union_info; ///< the device id the ticket is bound to; must not be empty
  std::string film_ref;
  int episode_no = 0;
  std::string intent; ///< "play" or "prefetch" (any text: a ticket is reused only for the same one)

  friend bool operator==(ticket_identity const&, ticket_identity const&) = default;
};

namespace fleet_keys {

/// @throws wandura::error with `errc::invalid_argument` unless `org` is 1-64 characters of [A-Za-z0-9._-]
///         (no braces: it is the hash tag).
void check_org(std::string_view org);
/// `wandura:{org}:ticket:<hex>` for `who`.
[[nodiscard]] std::string ticket(std::string_view org, ticket_identity const& who);
/// `wandura:{org}:ticket-erased`: the Pub/Sub channel on which an erase publishes the erased ticket's key.
[[nodiscard]] std::string ticket_erasures(std::string_view org);
/// `wandura:{org}:viewer:<viewer_ref>`.
[[nodiscard]] std::string viewer(std::string_view org, std::string_view viewer_ref);
/// `wandura:{org}:pace:<counter>`, e.g. counter "playback".
[[nodiscard]] std::string pace(std::string_view org, std::string_view counter);

} // namespace fleet_keys
} // namespace wandura
