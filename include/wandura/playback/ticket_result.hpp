// What came back for a ticket batch: one `ticket_item_result` per episode, each with its own `item_outcome`, and
// the `ticket_batch_result` around them (docs/protocol.md §1 response; docs/protocol.md §3).
//
// A caller decides on `outcome` and never has to look at raw statuses; they are kept for logs and for cases this
// SDK does not know yet.
//
// Thread safety: plain values; distinct objects may be used from distinct threads, one object from one thread at a
// time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "wandura/playback/ticket.hpp"

namespace wandura {

/// The outcome of one episode of a batch. Only `failed` is an error; the others are situations a player handles
/// without showing the viewer anything (docs/protocol.md §3).
enum class item_outcome : std::uint8_t {
  /// A ticket was issued, or an earlier one returned (`ticket_item_result::reused`). HTTP 2xx.
  granted = 0,
  /// A prefetch was refused because the organisation is close to its playback limit (429 with reason
  /// `prefetch_shed`, or any 429 on a prefetch). Not an error: ask again with `intent::play` when the viewer gets
  /// there (docs/protocol.md §2). The client also answers a prefetch `shed` without sending it, as the server would
  /// have, while the playback counter is known to be under its reserve or held off after a 429: `status` 0,
  /// `error_code` "rate_limited", `reason` "prefetch_shed".
  shed = 1,
  /// The episode is past the film's last released one (`not_ready`, usually 404). Never retryable (docs/protocol.md
  /// §3).
  not_ready = 2,
  /// A play item was refused for rate (429). Retryable after `retry_after`.
  rate_limited = 3,
  /// The ticket could not be issued in time or the server failed (503 `service_unavailable`, or any other 5xx).
  /// Retryable after `retry_after` when present.
  unavailable = 4,
  /// The organisation may not serve this episode (403, or `error_code` "not_entitled"). Never retryable.
  not_entitled = 5,
  /// Anything else (400, 401, 404 `not_found`, 409, other 4xx, 1xx/3xx): `ticket_item_result::error` says which.
  failed = 6,
  /// Never from the server: the client's per-viewer ticket limit refused this item before sending.
  viewer_limited = 7,
  /// Never from the server: the client did not send this item. A prefetch of a batch whose play was answered from
  /// the ticket store, while the playback counter is congested, or whose request the admission gate held back past
  /// the deadline (`client::issue_tickets`). Ask again later.
  deferred = 8,
};

/// The stable name of an outcome, e.g. "granted", "shed"; "unknown" outside the enum. Used as the Prometheus label.
[[nodiscard]] std::string_view to_string(item_outcome o) noexcept;

/// Every outcome, in enum order: for iterating (metrics, tests).
inline constexpr item_outcome all_item_outcomes[] = {
    item_outcome::granted,      item_outcome::shed,           item_outcome::not_ready,
    item_outcome::rate_limited, item_outcome::unavailable,    item_outcome::not_entitled,
    item_outcome::failed,       item_outcome::viewer_limited, item_outcome::deferred};

/// The outcome and, for `failed`, the error that one item's server answer means. Rules, first match wins
/// (tolerant reader, docs/protocol.md §3: known codes first, unknown codes by status group):
///
/// | status / error_code / reason                                  | outcome       | error                 |
/// |---------------------------------------------------------------|---------------|-----------------------|
/// | 2xx                                                           | granted       | -                     |
/// | error_code "not_ready" (any non-2xx status)                   | not_ready     | -                     |
/// | 429, or error_code "rate_limited": reason "prefetch_shed" or intent prefetch | shed | -              |
/// | 429, or error_code "rate_limited", otherwise                  | rate_limited  | -                     |
/// | error_code "not_entitled", or 403                             | not_entitled  | -                     |
/// | error_code "service_unavailable", or 5xx                      | unavailable   | -                     |
/// | 401, or error_code "unauthorized"                             | failed        | `errc::unauthorized`  |
/// | anything else (400, 404 not_found, 409, other 4xx, 1xx, 3xx)  | failed        | `errc::http_error`    |
struct item_classification {
  item_outcome outcome = item_outcome::failed;
  std::error_code error; ///< Set only when `outcome == item_outcome::failed`.
};

/// Applies the table above. Pure; never throws.
/// @param status the item's own HTTP-like status (100-599).
/// @param error_code the item's `error_code` text (numeric codes as their decimal text), empty when absent.
/// @param reason the item's `reason`, empty when absent.
/// @param what the item's intent.
[[nodiscard]] item_classification classify_item(int status, std::string_view error_code, std::string_view reason,
                                                intent what) noexcept;

/// `ticket_item_result::error_code` of an item failed by this SDK rather than by the server: the answer had no item
/// for the episode (matched by film, episode and intent, or an unreadable item in the episode's place). Its `error`
/// is `errc::invalid_response`.
inline constexpr std::string_view missing_item_code = "missing_item";
/// `ticket_item_result::error_code` of an item failed by this SDK rather than by the server: the answer's item for
/// the episode could not be read (a field of the wrong type or out of range, a required field missing, a granted
/// item without a readable ticket). Its `error` is `errc::invalid_response` and its `detail` says what was wrong;
/// its film and episode are the request's, its other fields as far as they could be read, its ticket is dropped.
/// The batch's other items are read as usual. Such an item is not asked for again within the call (the same answer
/// would read the same way). Unless its own status read as a refusal (outside 2xx), the ticket it may stand for
/// stays counted against a viewer limit (`client_options::viewer_tickets_per_minute`), as one of an answer lost on
/// the way does.
inline constexpr std::string_view unreadable_item_code = "unreadable_item";

/// One episode's result. Items are values: one failed item never throws the others away, an unreadable one
/// included (`unreadable_item_code`); of a 2xx, only a body that is not a JSON object with an `items` array is
/// unreadable as a whole.
struct ticket_item_result {
  std::string film_ref;        ///< As the server echoed it.
  std::int32_t episode_no = 0; ///< As the server echoed it, >= 1.
  wandura::intent intent = wandura::intent::play;
  std::string intent_text; ///< The raw `intent` text when `intent == intent::other`, else empty.
  item_outcome outcome = item_outcome::failed;
  int status = 0; ///< The item's own status; 0 when never sent (viewer_limited, deferred) or never answered.
  /// The server (or the SDK's cache) returned an earlier ticket, or this call joined an identical request in flight
  /// and another of its callers reports the ticket as fresh (each fresh ticket is reported fresh once).
  bool reused = false;
  std::optional<wandura::ticket> ticket; ///< Present exactly when `outcome == item_outcome::granted`.
  /// The server's `error_code` (numbers as decimal text); may be empty. `missing_item_code` or
  /// `unreadable_item_code` for an item this SDK failed itself.
  std::string error_code;
  std::string reason;                              ///< The server's `reason`, e.g. "prefetch_shed"; may be empty.
  std::optional<std::chrono::seconds> retry_after; ///< The item's `retry_after` in whole seconds (rounded up).
  std::error_code error;                           ///< Set only for `item_outcome::failed` (see `classify_item`).
  /// For an item this SDK failed itself, what was wrong, naming the place in the answer ("items[1].retry_after:
  /// expected a number of seconds"; a field's text is not quoted); for one that took the failure of a request as a
  /// whole (a retry of it, or a request of prefetches alone, that ended without an answer for it), that failure's
  /// message. Empty otherwise.
  std::string detail;

  friend bool operator==(ticket_item_result const&, ticket_item_result const&) = default;
};

/// The result of one `POST /v1/playback/tickets` call.
struct ticket_batch_result {
  std::string request_id;                ///< The server's `request_id`; empty when it sent none.
  std::vector<ticket_item_result> items; ///< In the server's order, normally the request's order.
  /// The status of the last response read: after a retry of some items, that retry's (the server answers 200 when
  /// it granted anything in it); 0 when none arrived. The items' own outcomes say what was granted.
  int http_status = 0;
  /// HTTP attempts this call sent, the first included: 0 when it sent none (every item answered before sending, or
  /// the call joined an identical request in flight, `client_options::coalesce`, whose attempts are its starter's,
  /// even when the starter left it early). A joiner's failure, thrown as `wandura::error`, carries the shared
  /// request's attempts (`error::attempts()`), as its message says them.
  int attempts = 0;
  bool replayed = false; ///< `Idempotency-Replayed: true`: a stored earlier result (docs/protocol.md §1).

  friend bool operator==(ticket_batch_result const&, ticket_batch_result const&) = default;
};

} // namespace wandura
