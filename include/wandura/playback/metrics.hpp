// Counters of the playback client, and their Prometheus text exposition. How long calls take is measured once, by
// the client's telemetry (`http_client_metrics`: `wandura_call_duration_seconds` by operation and outcome, failed
// calls included), which `client::metrics_text` writes beside these.
//
// `playback_metrics` is written by the client on its hot path (relaxed atomics, no lock, no allocation) and read by
// whoever exports it: `snapshot()` for code, `to_prometheus()` for a `/metrics` endpoint (text format 0.0.4).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "wandura/playback/ticket_result.hpp"

namespace wandura {

/// A copy of every value at one moment. Each value is read atomically, the set as a whole is not (a call that
/// completes while the snapshot is taken may be counted in one value and not yet in another).
struct metrics_snapshot {
  std::uint64_t calls = 0;    ///< Logical calls started (each `issue_tickets`, `config`, ... once).
  std::uint64_t attempts = 0; ///< HTTP attempts sent, first attempts and retries.
  /// Retries granted by the retry engine (its `on_retry` hook ran and the retry budget was spent): one per attempt
  /// after the first of a call, and one for a call that ended while it waited to make a granted retry (cancelled,
  /// the client shut down, or its deadline came at the admission gate).
  std::uint64_t retries = 0;
  std::uint64_t budget_denied = 0; ///< Retries the retry budget refused.
  std::uint64_t held_off = 0;      ///< Requests sent after queuing at the admission gate behind a counter's limit.
  std::uint64_t cache_hits = 0;    ///< Items answered from the ticket store without a request.
  std::uint64_t coalesced = 0;     ///< Calls that joined an identical call in flight instead of sending.
  std::uint64_t call_failures = 0; ///< Calls that ended with an exception (auth, deadline, cancellation, budget).
  std::uint64_t hook_errors = 0;   ///< Exceptions thrown by `retry_options::on_retry` or `log`, caught and ignored.
  /// Failures of the ticket store (an exception other than cancellation) that a call went on without: a lookup
  /// taken as "nothing stored", tickets left unstored (ticket_store.hpp, "Errors").
  std::uint64_t store_errors = 0;
  /// Ticket batch items by outcome, indexed by `item_outcome`.
  std::array<std::uint64_t, std::size(all_item_outcomes)> outcomes{};

  [[nodiscard]] std::uint64_t outcome(item_outcome o) const noexcept { return outcomes[static_cast<std::size_t>(o)]; }
};

/// Writes `snapshot` in the Prometheus text exposition format 0.0.4: for each metric a `# HELP` and a `# TYPE`
/// line, then samples named `<prefix>_calls_total`, ..., `<prefix>_item_outcomes_total{outcome="granted"}`.
/// @param snapshot the values to write.
/// @param prefix metric name prefix; must match `[a-zA-Z_:][a-zA-Z0-9_:]*` (not checked).
[[nodiscard]] std::string to_prometheus(metrics_snapshot const& snapshot, std::string_view prefix = "wandura");

} // namespace wandura
