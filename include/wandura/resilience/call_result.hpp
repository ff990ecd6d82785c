// The final outcome of one logical call through the retry loop, and its conversion to an exception.
//
// The loop returns the final outcome instead of throwing (docs/adr/0004-error-model.md): a final 429 or 503 batch
// still carries per-item outcomes that the playback layer reads. Callers that want an exception use `to_error` /
// `throw_if_failed`.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>

#include "wandura/error.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura {

/// Why the retry loop stopped.
enum class stop_reason {
  success,           ///< A 2xx response.
  not_retryable,     ///< The last failure is final (see classify.hpp), or it was a write without a key.
  retries_exhausted, ///< `max_retries` retries were made and the last attempt failed.
  budget_exhausted,  ///< The client's retry budget refused the next retry.
  deadline_exceeded, ///< The deadline passed (also while queued at the admission gate), or the next wait (backoff
                     ///< or 429 hold-off) would have ended past it.
  cancelled,         ///< The call was cancelled (in an attempt, a backoff sleep or a wait at the admission gate).
  invalid_request,   ///< Nothing was sent: an invalid caller idempotency key, or no key could be made.
  shed, ///< Nothing more was sent: the admission gate dropped a prefetch-only request while its counter is under its
        ///< reserve (the server would have refused it); the caller answers its items `shed`.
};

/// The short name of a stop reason, e.g. "budget_exhausted".
[[nodiscard]] std::string_view to_string(stop_reason r) noexcept;

struct call_result {
  stop_reason stopped = stop_reason::success;
  /// The last real error when the last attempt produced no response: a transport code (`connect_failed`,
  /// `connection_reset`, ...). Also: `operation_aborted` when cancelled; `errc::invalid_idempotency_key` when
  /// refused before sending; `errc::deadline_exceeded` when the deadline passed before any attempt, and
  /// `errc::rate_limited` when the admission gate held the request back until past it (queued behind the counter's
  /// pace, or a 429 hold-off that outlasts it); `errc::invalid_response`, next to the 2xx `response`,
  /// when that response's body could not be read. Empty when `response` is the outcome.
  std::error_code error;
  /// What went wrong in the last attempt, in words: the transport's text for `error` (libcurl's error text, e.g.
  /// "SSL certificate problem: self-signed certificate"), or why a 2xx body could not be read (with `error` set to
  /// `errc::invalid_response`). Empty when there is nothing to add. Never holds a header value (an API key).
  /// One line of printable ASCII, bounded where it was made: the transport escapes libcurl's text (at most 256 of
  /// its bytes, see `attempt_result::detail`), the loop the reader's words (their first 400 bytes) and whatever
  /// else a sender returned (a sender of one's own: its first 2,048 bytes), each byte outside 0x20-0x7E as `\xHH`.
  /// `to_error` quotes it as it is.
  std::string detail;
  /// The last response (status 0 when the last attempt produced none). On failure it is still complete: headers
  /// and body of a final 429/503 batch are there for per-item outcomes.
  http_response response;
  /// `error_code` and `reason` of the last response's body (numeric codes as decimal text); empty when none.
  std::string error_code;
  std::string reason;
  /// The text for humans of the last non-2xx response's body (its `error` field), as sent; empty when none.
  std::string server_message;
  /// The request id of the last non-2xx response: its `X-Request-Id` header, else its body's `request_id`; empty
  /// when it had neither, and after a 2xx (whose id is read from `response` when needed).
  std::string request_id;
  /// Attempts made, the first included; 0 when nothing was sent.
  int attempts = 0;
  /// Retries made (attempts - 1 when attempts > 0).
  int retries = 0;
  /// The last response carried `Idempotency-Replayed: true`: the server returned a stored first result.
  bool replayed = false;
  /// The key sent on every attempt (automatic or the caller's); empty for reads and unkeyed writes.
  std::string idempotency_key;
  /// The call's total deadline, for messages.
  std::chrono::milliseconds total_timeout{0};
  /// A note on why a retryable failure was not retried ("not retried: write without idempotency key"); empty
  /// otherwise.
  std::string note;
  /// What was sent, "POST /v1/playback/tickets on api.wandura.example": method, path and host, never the query
  /// or user information. Error messages and WARN lines end with it in parentheses. Filled only when a message may
  /// need it: when the call did not succeed, or once it was retried; empty after a success at the first attempt
  /// (naming it costs an allocation per call).
  std::string target;

  [[nodiscard]] bool ok() const noexcept { return stopped == stop_reason::success; }
  [[nodiscard]] bool has_response() const noexcept { return response.status != 0; }
};

/// The exception for a failed call. Its code: `operation_aborted` (cancelled), `errc::deadline_exceeded`,
/// `errc::budget_exhausted`, `errc::rate_limited` (final 429, a request the admission gate shed, or one it held back
/// until past the deadline, nothing sent),
/// `errc::unauthorized` (401), `errc::unavailable` (a status the policy retries, with no retry left: retries used,
/// or a write without a key), `errc::http_error` (other statuses), `errc::invalid_response` (a 2xx whose body could
/// not be read), or the transport code / the refusal code.
/// `what()` is "<operation>: <where and why it stopped>: <last real error>[: <detail>] (<target>)", e.g. (targets
/// left out)
/// "issue_tickets: retry budget exhausted after 2 attempts: HTTP 503 code=50200",
/// "issue_tickets: deadline of 15000 ms reached after 3 attempts: connection reset",
/// "issue_tickets: not retried: write without idempotency key: connection reset",
/// "issue_tickets: deadline of 15000 ms reached before any attempt (queued behind the playback counter's limit for
/// 15000 ms)" (code `errc::rate_limited`),
/// "get_config: failed after 1 attempt: TLS failure: <what the transport said> (libcurl's error text)".
/// The server's `error_code` goes into `what()` as printable ASCII, each byte outside 0x20-0x7E as `\xHH`, and
/// bounded (its first 200 bytes, `...` marking a cut); the detail is already so (see `call_result::detail`) and
/// goes in as it is, escaped once. `what()` is one line of bounded length whatever the server sent.
/// The `error_info` carries the last status, server code, reason, request id, attempts and the server's text for
/// humans, as the server sent them (`what()` leaves that text out: the code says the same, and the text can be long).
/// @pre `!result.ok()`.
[[nodiscard]] error to_error(call_result const& result, std::string_view operation);

/// The code of `to_error(result, ...)`, without building its message (no allocation); empty when `result.ok()`.
/// It is the `call_end::error` the retry engine reports to an `attempt_observer`.
[[nodiscard]] std::error_code error_code_of(call_result const& result) noexcept;

/// Throws `to_error(result, operation)` unless `result.ok()`.
void throw_if_failed(call_result const& result, std::string_view operation);

} // namespace wandura
