// The Redis key layout of the fleet's shared state (docs/adr/0008-fleet-shared-state.md).
//
// Every key starts with `wandura:{<org>}:`; the braces are a Redis Cluster hash tag, so all keys of one
// organisation live in one slot and the scripts (which touch one key each) work unchanged behind a cluster proxy:
//
// - `wandura:{org}:ticket:<32 hex>`, a string: one reusable ticket, PX = until 5 min before `expires_at`.
// - `wandura:{org}:viewer:<N>pm-b<B>:<viewer_ref>`, a hash: a viewer's token bucket for the limit of N tickets a
//   minute and burst B, `t` tokens and `ts` ms since the epoch (`device:<union_info>` in place of the viewer_ref
//   for a batch without one, as the client names it).
// - `wandura:{org}:pace:<counter>`, a hash: a counter's GCRA, `tat` and `hold` (ms since the epoch), `em` (ms per
//   unit) and `burst` (units).
//
// The ticket key's hex is the first 16 bytes of SHA-256 over the length-prefixed viewer_ref, union_info, film_ref,
// episode_no and intent: bounded in size, no device id in clear text, and a collision cannot serve a ticket to
// another viewer because the stored value repeats the identity and is checked on every read.
//
// The viewer key names the limit's rate and burst (`30pm-b30`): limits of different rates in one organisation
// (clients of one fleet may differ) each keep their own bucket, and the same limit in every process shares one.
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

/// The limit a per-viewer bucket belongs to, as its key names it (`fleet_keys::viewer`).
struct viewer_rate {
  double tickets_per_minute = 30; ///< tickets a viewer may get per minute, refilled continuously
  double burst = 30;              ///< the bucket's capacity in tickets (the most at once from idle)

  friend bool operator==(viewer_rate const&, viewer_rate const&) = default;
};

namespace fleet_keys {

/// @throws wandura::error with `errc::invalid_argument` unless `org` is 1-64 characters of [A-Za-z0-9._-]
///         (no braces: it is the hash tag).
void check_org(std::string_view org);
/// `wandura:{org}:ticket:<hex>` for `who`.
[[nodiscard]] std::string ticket(std::string_view org, ticket_identity const& who);
/// `wandura:{org}:ticket-erased`: the Pub/Sub channel on which an erase publishes the erased ticket's key, and a
/// store script what it stored (`+`, then a line `<key> <px>` per ticket; see `shared_ticket_cache`), for the keys
/// of database 0; `wandura:{org}:ticket-erased@<db>` for those of another database (`redis://host:port/<db>`).
/// Pub/Sub channels are not per database, keys are: two fleets of one organisation in two databases of one server
/// (staging in /1, production in /0) would otherwise hear each other's erases and stores, and drop tickets that
/// exist in their own database, or take them for known absent.
[[nodiscard]] std::string ticket_erasures(std::string_view org, int db = 0);
/// `wandura:{org}:viewer:<N>pm-b<B>:<viewer_ref>` for the limit `rate`, with N and B as the shortest decimal text
/// that reads back as the same double (`30pm-b30`, `0.5pm-b2`): one bucket per viewer and limit.
/// @throws wandura::error with `errc::invalid_argument` unless both numbers of `rate` are finite and > 0.
[[nodiscard]] std::string viewer(std::string_view org, viewer_rate rate, std::string_view viewer_ref);
/// `wandura:{org}:pace:<counter>`, e.g. counter "playback".
[[nodiscard]] std::string pace(std::string_view org, std::string_view counter);

} // namespace fleet_keys
} // namespace wandura
