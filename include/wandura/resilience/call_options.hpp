// Options of the retry loop at three levels, and how they merge (docs/adr/0003-options-precedence.md):
//
//   per-call `call_options`  >  client `retry_options`  >  preset defaults (`retry_policy` fields)
//
// For each of the total deadline and the attempt timeout, the first that is set wins among: the per-call explicit
// field, the per-call policy's field, the client's explicit field, the client policy's field. The idempotency key
// is per-call only; automatic keys are a client switch. `merge_options` runs once when a call starts; the result
// (`call_settings`, with the deadline made absolute) lives in the call's coroutine frame, never in thread-locals.
//
// Cancellation is not an option field: it is Asio's per-operation cancellation, through the cancellation slot bound
// to the completion token of the call (e.g. `asio::bind_cancellation_slot(signal.slot(), token)`).
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/attempt_observer.hpp"
#include "wandura/resilience/clock.hpp"
#include "wandura/resilience/retry_budget.hpp"
#include "wandura/resilience/retry_event.hpp"
#include "wandura/resilience/retry_policy.hpp"

namespace wandura {

/// Per-call overrides (docs/protocol.md §1 `RequestOptions`). Unset fields fall back to the client's options.
struct call_options {
  /// A caller-chosen idempotency key for a write (e.g. an order number), validated before sending: 1-200
  /// characters 0x21-0x7E, else the call fails with `errc::invalid_idempotency_key` (90010) and nothing is sent.
  /// Ignored for reads.
  std::optional<std::string> idempotency_key{};
  /// Replaces the client's policy for this call (its time limits included, unless set explicitly below). One that
  /// `check_retry_policy` refuses fails the call with `errc::invalid_argument`, nothing sent.
  std::optional<retry_policy> policy{};
  /// Turns retries off for this call (`max_retries = 0`) while keeping the effective time limits.
  bool disable_retries = false;
  /// Total deadline of this call, waits and retries included, measured from the start of the call (a viewer
  /// limit's decision, which the call awaits however long it takes, excepted: viewer_limit.hpp). 0 or less: the call
  /// ends with `errc::deadline_exceeded` before any attempt.
  std::optional<std::chrono::milliseconds> total_timeout{};
  /// Limit of each attempt of this call. 0 or less: none of its own, each attempt is bounded by what is left of the
  /// deadline. `issue_tickets` raises a limit under 5 s to 5 s (client.hpp).
  std::optional<std::chrono::milliseconds> attempt_timeout{};
};

/// Client-level options of the retry loop.
struct retry_options {
  /// Default policy of every call (docs/protocol.md §3 INTERACTIVE unless changed); refused when the engine (the
  /// client) is made if `check_retry_policy` refuses it.
  retry_policy policy = retry_policy::interactive();
  /// Client-wide total deadline; overrides `policy.total_timeout` when set. 0 or less as in `call_options`.
  std::optional<std::chrono::milliseconds> total_timeout{};
  /// Client-wide attempt timeout; overrides `policy.attempt_timeout` when set. 0 or less as in `call_options`.
  std::optional<std::chrono::milliseconds> attempt_timeout{};
  /// Whether writes get an automatic idempotency key. When false, a write without a caller key is never retried
  /// (only a `connect_failed`, which was never sent, is), while reads are retried as usual (docs/protocol.md §1);
  /// and no follow-up request is made (`follow_up`: the per-item retries of `client::issue_tickets`), since each
  /// needs an automatic key of its own.
  bool auto_idempotency_keys = true;
  /// The retry budget's parameters (docs/protocol.md §3: 10 %, at least 10, per 60 s). A negative `min_retries` or
  /// `percent`, or a `window` under 1 ms, is refused when the engine (the client) is made.
  retry_budget::config budget{};
  /// Tuning of the admission gate every attempt passes (admission_gate.hpp): how it paces a counter after a 429 or
  /// a shed, and the hook for long waits (`on_long_wait`). The defaults suit the Wandura API.
  admission_gate_options admission{};
  /// Receives one WARN line per retry (on the call's coroutine, before the backoff sleep) and one per failure of the
  /// client's ticket store that a call went on without (ticket_store.hpp, "Errors"); none when empty. Must be
  /// thread-safe. If it throws, the exception is caught and ignored: the retry goes ahead as if the line had
  /// been written (a throwing logger never ends, delays or loses a call), and `wandura_hook_errors_total` (the
  /// client's `metrics_text()`, `retry_engine_stats::hook_errors`) counts it.
  logger log{};
  /// Called once per retry with the structured event, before `log`; none when empty. Must be thread-safe. If it
  /// throws, as for `log`: caught, counted in `wandura_hook_errors_total`, and the retry (and `log`) goes ahead.
  retry_hook on_retry{};
  /// Told of every attempt's begin and end and, unless `report_call_end` is false, of the end of every call that
  /// `retry_engine::call` runs (tracing, `wandura::http_client_metrics`); none when null. Shared with every call of
  /// the client; must be thread-safe and must not throw (attempt_observer.hpp).
  std::shared_ptr<attempt_observer> observer{};
  /// Whether the engine tells `observer` of the end of each call it runs (`attempt_observer::on_call_end`, exactly
  /// once per `retry_engine::call` that completes, whatever its outcome). Set it to false when the caller reports
  /// the end of its own calls instead (a call of its own may span several engine calls, or none): the observer then
  /// hears of each call's end once, from the caller. `wandura::client` does so: it reports each of its calls' end
  /// itself, whatever this says.
  bool report_call_end = true;
  /// Uniform random numbers in [0, 1) for jitter; must be thread-safe. Empty: a per-thread `std::mt19937_64`
  /// seeded from `std::random_device`.
  std::function<double()> random{};
  /// The time source; empty: a shared `wandura::real_clock`.
  std::shared_ptr<wandura::clock> time_source{};
};

/// The settings of one logical call after merging; made once at the call's start.
struct call_settings {
  retry_policy policy;
  /// The caller's key, when one was given (not yet validated).
  std::optional<std::string> idempotency_key;
  bool auto_idempotency_keys = true;
  std::chrono::milliseconds attempt_timeout{0};
  /// The total deadline as a duration, for messages ("deadline of 15000 ms reached").
  std::chrono::milliseconds total_timeout{0};
  /// The absolute deadline on the client's clock, shared by every request of the logical call (follow-ups too).
  clock::time_point deadline{};
};

/// Merges per-call and client options (precedence in the file comment); `deadline = now + total_timeout`,
/// saturating instead of overflowing.
/// @throws wandura::error `errc::invalid_argument` for a `per_call.policy` that `check_retry_policy` refuses (the
///         client's policy is checked once, when its engine is made).
[[nodiscard]] call_settings merge_options(call_options const& per_call, retry_options const& client,
                                          clock::time_point now);

} // namespace wandura
