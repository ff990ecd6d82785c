// How hard one logical call tries: the number of retries, which failures are worth retrying, how long to wait
// between attempts, and the time limits. Three presets from the source documents (docs/protocol.md §3):
//
// | preset        | retries | backoff                               | attempt timeout | total |
// |---------------|---------|---------------------------------------|-----------------|-------|
// | interactive() | 3       | full jitter, base 500 ms, cap 8 s     | 8 s             | 15 s  |
// | background()  | 5       | full jitter, base 1 s, cap 30 s       | 15 s            | 120 s |
// | standard()    | 2       | 200 ms x2 up to 4 s, +/-30 % jitter   | 30 s            | 300 s |
// | none()        | 0       | (never waits)                         | 8 s             | 15 s  |
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <optional>

namespace wandura {

/// How the wait before a retry is computed.
enum class backoff_kind {
  /// docs/protocol.md §3 `backoffMs`: `Retry-After` (> 0) plus up to 1 s of jitter wins; otherwise a uniform draw in
  /// `[0, min(max_delay, initial_delay * 2^(retry-1)))` ("full jitter under the cap"). `Retry-After: 0` falls back
  /// to full jitter.
  full_jitter,
  /// docs/protocol.md §3 `delay(n) = min(max_delay, initial_delay * multiplier^(n-1)) * (1 + U(-jitter, +jitter))`;
  /// with a `Retry-After`, `max(delay, min(retry_after, max_retry_after))`.
  exponential,
};

/// Which failures are worth retrying (the decision table is `wandura::classify_attempt`, classify.hpp).
enum class retry_classifier {
  /// docs/protocol.md §3 `isRetryable`: network errors, 429, 500, 502, and 503 unless the body's code is `not_ready`.
  seed_default,
  /// docs/protocol.md §3 standard list: the above plus 408, 425, 504 and the retryable numeric codes 42900, 42901,
  /// 50000 and 50200. A 409 `idempotency_in_progress` (40901) is retried under both classifiers (classify.hpp).
  standard,
};

/// One retry policy. Every field has a unit in its name or its comment; fields are independent.
///
/// The retry engine applies the wait below (`compute_backoff`) to every retry but one kind: after a 429 with a
/// `Retry-After` (or an item's `retry_after`) for which the admission gate holds the counter, every request to that
/// counter, this retry included, waits out the server's whole value (up to `wandura::max_holdoff`,
/// one hour; `respect_retry_after` and `max_retry_after` do not shorten it), and is then released in its turn at
/// the counter's pace, plays first, which spreads the retries in place of jitter (docs/adr/0006-admission-gate.md).
/// A 429 without a wait named, a 503 and network errors keep this policy's backoff.
struct retry_policy {
  /// Retries after the first attempt (so `max_retries + 1` attempts at most). 0 turns retries off.
  int max_retries = 3;
  backoff_kind backoff = backoff_kind::full_jitter;
  retry_classifier classifier = retry_classifier::seed_default;
  /// First backoff step: docs/protocol.md §3 `baseMs`, docs/protocol.md §3 `initialDelayMs`.
  std::chrono::milliseconds initial_delay{500};
  /// Growth per retry for `backoff_kind::exponential` (docs/protocol.md §3 `multiplier`); full jitter always doubles.
  double multiplier = 2.0;
  /// Largest backoff step before jitter: docs/protocol.md §3 `capMs`, docs/protocol.md §3 `maxDelayMs`.
  std::chrono::milliseconds max_delay{8000};
  /// Proportional jitter for `backoff_kind::exponential`, in [0, 1): 0.3 means a factor drawn from [0.7, 1.3).
  double jitter = 0.3;
  /// Whether a `Retry-After` header changes the wait (docs/protocol.md §3 `respectRetryAfter`).
  bool respect_retry_after = true;
  /// Largest `Retry-After` honoured; larger values are capped to it (docs/protocol.md §3 `maxRetryAfterMs`).
  /// 24 h by default and in `interactive()`, `background()` and `none()` (docs/protocol.md §3 names no cap for
  /// them), so that in practice the deadline decides; `standard()` caps it at 30 s.
  std::chrono::milliseconds max_retry_after{std::chrono::hours(24)};
  /// Limit of one attempt (connect, send, full response). docs/protocol.md §3 `timeoutMs`. 0 or less: none of its
  /// own, the deadline bounds each attempt (see `call_options::attempt_timeout`).
  std::chrono::milliseconds attempt_timeout{8000};
  /// Limit of the whole logical call, waits and retries included. docs/protocol.md §3 `deadlineMs`, docs/protocol.md §3
  /// `totalTimeoutMs`. 0 or less: the call ends with `errc::deadline_exceeded` before any attempt.
  std::chrono::milliseconds total_timeout{15000};

  /// docs/protocol.md §3 INTERACTIVE: a viewer is waiting. `{3, 500 ms, cap 8 s, attempt 8 s, total 15 s}`, full
  /// jitter.
  [[nodiscard]] static retry_policy interactive() noexcept;
  /// docs/protocol.md §3 BACKGROUND: a sync job. `{5, 1 s, cap 30 s, attempt 15 s, total 120 s}`, full jitter.
  [[nodiscard]] static retry_policy background() noexcept;
  /// docs/protocol.md §3 defaults: `{2, 200 ms, x2, max 4 s, jitter 0.3, Retry-After capped at 30 s, total 300 s}`, the
  /// standard classifier, attempt timeout 30 s.
  [[nodiscard]] static retry_policy standard() noexcept;
  /// No retries: one attempt, INTERACTIVE's time limits.
  [[nodiscard]] static retry_policy none() noexcept;

  friend bool operator==(retry_policy const&, retry_policy const&) = default;
};

/// Refuses a policy that would turn its own rule around or read as nonsense: a negative `max_retries`, a `backoff`
/// or `classifier` that is none of the enumerators, a negative `initial_delay`, `max_delay` or `max_retry_after`,
/// a `multiplier` under 1 or not finite (the steps would shrink), a `jitter` outside [0, 1) or NaN (these two
/// whatever the `backoff`, though `full_jitter` reads neither: a policy is valid as a whole). The time limits
/// take any value (0 or less has its documented meaning). The client's constructor and the retry engine's check
/// the client-wide policy; `merge_options` checks a per-call one, so such a call fails before anything is sent.
/// `compute_backoff` itself reads any policy leniently (below).
/// @throws wandura::error `errc::invalid_argument` naming the first field out of range ("retry policy: jitter must
///         be >= 0 and < 1").
void check_retry_policy(retry_policy const& policy);

/// Where a retry's wait came from.
enum class delay_source {
  backoff,     ///< The policy's formula alone.
  retry_after, ///< The server's `Retry-After` decided it (docs/protocol.md §3: it won; docs/protocol.md §3: it was the
               ///< larger term).
};

/// A computed wait, in fractional milliseconds so that results match the golden vectors to 1e-6 ms.
struct backoff_delay {
  std::chrono::duration<double, std::milli> delay{0};
  delay_source source = delay_source::backoff;
};

/// The wait before retry number `retry` (1-based: the first retry is 1) under `policy`.
///
/// Pure: the random draw is the explicit input `u` in [0, 1) (values outside are clamped), so the result is
/// reproducible. `retry_after` is the parsed header (`wandura::parse_retry_after`), nullopt when absent; it is capped
/// at `policy.max_retry_after` first and ignored when `policy.respect_retry_after` is false. Never overflows: the
/// result is at most `max(max_delay * (1 + jitter), max_retry_after + 1 s)`.
/// Implements docs/protocol.md §3 `backoffMs` (`backoff_kind::full_jitter`) and docs/protocol.md §3 `delay(n)`
/// (`backoff_kind::exponential`).
[[nodiscard]] backoff_delay compute_backoff(retry_policy const& policy, int retry,
                                            std::optional<std::chrono::milliseconds> retry_after, double u) noexcept;

} // namespace wandura
