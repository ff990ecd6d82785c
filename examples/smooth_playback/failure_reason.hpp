// Why a play failed, as the `wandura::errc` name report.json counts it under (`failures_by_reason`).
//
// A play that failed as a value (its item not granted) carries the server's last answer, not the reason the
// client stopped retrying. The reason follows from the retry loop's rules (SPEC §3): a retryable answer (429, 503)
// with retries left whose next retry (its Retry-After plus at most 1 s of jitter, or the policy's largest backoff)
// still fitted the deadline was stopped by the retry budget alone (`budget_exhausted`, whatever the item's status);
// with no retry left it is the last answer's code (`rate_limited` for a 429, `unavailable` otherwise); otherwise the
// deadline (`deadline_exceeded`).
#pragma once

#include <string>
#include <system_error>

#include "wandura/playback/client.hpp"

namespace demo {

/// The reason of a play that completed with `got.play.outcome != granted`, `latency_ms` after it was pressed.
[[nodiscard]] std::string failure_reason(wandura::episode_start const& got, double latency_ms,
                                         wandura::retry_policy const& policy);

/// The reason of a play whose call threw `code` (`wandura::error::code()`): the `errc` name, `cancelled` for
/// `operation_aborted`, else the code's category and value.
[[nodiscard]] std::string failure_reason(std::error_code const& code);

} // namespace demo
