// The one decision table of the retry loop: given what an attempt produced, is the call done, worth another
// attempt, or finished with a failure? Every attempt of every endpoint goes through `classify_attempt`.
//
// | input                                                    | seed_default | standard |
// |----------------------------------------------------------|--------------|----------|
// | 2xx                                                      | success      | success  |
// | `connect_failed` (never sent), any request               | retry        | retry    |
// | other network errors (timeouts, resets), read/keyed write| retry        | retry    |
// | network error after sending, write WITHOUT a key         | final        | final    |
// | any HTTP status, write WITHOUT a key                     | final        | final    |
// | 429, 500, 502 (body code `not_ready` too)                | retry        | retry    |
// | 503 (except body code `not_ready`)                       | retry        | retry    |
// | 408, 425, 504 (body code `not_ready` too)                | final        | retry    |
// | body code 42900, 42901, 50000, 50200 (any non-2xx)       | final (*)    | retry    |
// | 409 `idempotency_in_progress` / 40901                    | retry        | retry    |
// | `idempotency_conflict` / 40903 anywhere; 503 `not_ready` | final        | final    |
// | anything else (400, 401, 403, 404, ...; TLS, too large)  | final        | final    |
// | `operation_aborted`                                      | cancelled    | cancelled|
//
// (*) unless the status itself is retryable. A body code `not_ready` makes a 503 final; on any other status the
// status decides (tests/vectors). Sources: docs/protocol.md §3 `isRetryable`; docs/protocol.md §1 "only
// retry retryable errors"; docs/protocol.md §1 idempotency. Network errors are the codes equal to
// `wandura::condition::retryable`: the transport's connect_failed, attempt_timeout, response_timeout and
// connection_reset (and rate_limited or unavailable, should an `http_sender` of the caller's report one as an
// error); TLS failures, oversized bodies, protocol errors and other transport failures would fail again and are
// final.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>
#include <system_error>

#include "wandura/resilience/retry_policy.hpp"

namespace wandura {

/// Whether re-sending the request could execute it twice.
enum class request_safety {
  read,          ///< GET: safe to repeat.
  keyed_write,   ///< POST with an `Idempotency-Key`: the server executes it once.
  unkeyed_write, ///< POST without a key: repeated only when it was certainly never sent (`connect_failed`).
};

/// What one attempt produced, as the classifier sees it.
struct attempt_facts {
  /// The transport error; empty when an HTTP response (any status) arrived.
  std::error_code transport_error;
  /// HTTP status; ignored when `transport_error` is set.
  int http_status = 0;
  /// The body's `error_code` (a string such as `not_ready`, or a numeric code as decimal text); empty when none.
  std::string_view error_code;
};

enum class attempt_verdict {
  success,   ///< 2xx: the call is done.
  retry,     ///< Worth another attempt (if the policy, budget and deadline allow).
  final,     ///< A failure that another attempt would not fix, or that must not be repeated.
  cancelled, ///< The attempt was cancelled (`operation_aborted`).
};

struct attempt_classification {
  attempt_verdict verdict = attempt_verdict::final;
  /// Why it is final when the cause is the request's safety rather than the failure itself:
  /// "not retried: write without idempotency key"; empty otherwise. Points to static storage.
  std::string_view note;
};

/// Classifies one attempt (see the table above).
[[nodiscard]] attempt_classification classify_attempt(attempt_facts const& facts, retry_classifier classifier,
                                                      request_safety safety) noexcept;

/// docs/protocol.md §3 `isRetryable(status, errorCode)` and its docs/protocol.md §3 extension, without the
/// request-safety rules: `status` 0 means "no response" (a network error). Exposed for the golden vectors and for
/// per-item retries of a batch (an item's own status and code).
[[nodiscard]] bool is_retryable_status(int status, std::string_view error_code, retry_classifier classifier) noexcept;

} // namespace wandura
