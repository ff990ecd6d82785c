// What the retry loop tells the outside world about each retry: a structured `retry_event` to the `on_retry` hook
// and one WARN line to the logger (docs/protocol.md §3, "Visibility").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

#include "wandura/resilience/retry_policy.hpp"

namespace wandura {

enum class log_level { debug, info, warn, error };

/// A pluggable log sink. Called from whichever thread runs the call; must be thread-safe. The message has no
/// trailing newline.
using logger = std::function<void(log_level level, std::string_view message)>;

/// One retry about to happen (emitted after the budget granted it, before the wait).
/// The views are valid only during the hook call.
struct retry_event {
  int retry = 0;       ///< 1-based number of this retry.
  int max_retries = 0; ///< The policy's `max_retries`.
  /// The wait before the next attempt may start, rounded to the nearest ms: the backoff, or the counter's hold-off
  /// after a 429 when longer. A counter the admission gate paces may release the attempt later still, in its turn
  /// (its queue and rate are in `admission_gate::stats`).
  std::chrono::milliseconds delay{0};
  delay_source source = delay_source::backoff;
  int http_status = 0;              ///< Status of the failed attempt; 0 for a network error.
  std::error_code error;            ///< The network error; empty when a response arrived.
  std::string_view error_code;      ///< The body's `error_code` (string or number as text); empty when none.
  std::int64_t budget_left = 0;     ///< Retries the client's budget still allows after this one.
  std::string_view idempotency_key; ///< The key sent (and re-sent); empty for reads.
  std::string_view counter;         ///< The rate-limit counter of the request, e.g. `playback`.
  /// What was sent: "POST /v1/playback/tickets on api.wandura.example" (method, path, host; never the key or the
  /// query); empty when unknown.
  std::string_view target;
};

using retry_hook = std::function<void(retry_event const&)>;

/// The WARN line for `event`, exactly `retry 1/2 in 231 ms: HTTP 503 code=50200`, `retry 1/2 in 231 ms: HTTP 503`
/// (no body code) or `retry 1/3 in 412 ms: connection reset` (the network error's message); with a `target`, it
/// ends the line: `retry 1/2 in 231 ms: HTTP 503 (POST /v1/playback/tickets on api.wandura.example)`.
/// The server's `error_code` is written as printable ASCII, its first 200 bytes at most (`...` marks a longer
/// one), each byte outside 0x20-0x7E as `\xHH` (`code=a\x0ab` for "a", LF, "b"): whatever a server sends, the
/// line stays one line. `event.error_code` itself keeps the server's text unchanged.
[[nodiscard]] std::string format_retry_line(retry_event const& event);

} // namespace wandura
