// The demo's report: the run's summary as JSON and a chart as SVG. No SDK types here, only numbers.
// Field meanings: docs/demo.md "Reading the report".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace demo {

/// One sample of the run, taken every `sample_interval_s`.
struct sample {
  double t_s = 0;                 ///< Seconds since the start of the run.
  double tickets_per_s = 0;       ///< Fresh tickets the server counted in this interval, per second.
  double demand_per_s = 0;        ///< Tickets asked for (play + prefetch items sent) in this interval, per second.
  double play_p50_ms = 0;         ///< Median time-to-ticket of the plays that completed in this interval.
  double play_p95_ms = 0;         ///< 95th percentile of the same.
  double play_sent_per_s = 0;     ///< Play items in ticket requests sent (every attempt), per second.
  double prefetch_sent_per_s = 0; ///< Prefetch items in the same, per second.
  double play_429_per_s = 0;      ///< Play items the server answered 429, per second.
  double prefetch_429_per_s = 0;  ///< Prefetch items the server answered 429 (shed), per second.
};

struct summary {
  std::uint64_t viewers = 0;
  std::uint64_t play_requests = 0;
  std::uint64_t play_failures = 0; ///< Plays a viewer would have seen fail.
  double play_success_rate = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
  std::uint64_t tickets_granted = 0; ///< Granted to the demo, fresh or reused.
  std::uint64_t tickets_fresh = 0;   ///< Granted and not reused (what the server must have counted).
  std::uint64_t tickets_reused = 0;  ///< Reused by the server (`"reused": true`) or from the client cache.
  std::uint64_t cache_hits = 0;      ///< Served from the client's own ticket cache (no request).
  std::uint64_t coalesced = 0;       ///< Joined an identical request already in flight.
  std::uint64_t prefetch_requested = 0;
  std::uint64_t prefetch_shed = 0;
  std::uint64_t retries = 0;
  std::uint64_t budget_denied = 0;
  std::uint64_t requests = 0;        ///< HTTP attempts sent.
  std::uint64_t held_play = 0;       ///< Plays the server held until room returned.
  std::uint64_t faults_injected = 0; ///< Ticket requests the emulator answered with a scripted 503.
  /// Tickets the emulator counted while the viewers ran (warm-up excluded); nullopt when not run against the
  /// emulator. Must equal `tickets_fresh`.
  std::optional<std::uint64_t> emulator_tickets_counted;
  std::uint64_t warmup_tickets = 0; ///< Fresh tickets the warm-up received before the first viewer.
  std::uint64_t warmup_counted = 0; ///< Tickets the emulator counted during the warm-up.
  double warmup_left = 1;           ///< Fraction of the playback limit the warm-up left.
  double playback_limit_per_min = 0;
  double duration_s = 0;
  /// The best possible play success of the run's plan (play_plan.hpp); nullopt when unknown (against an API).
  std::optional<double> play_success_bound;
  std::map<std::string, std::uint64_t> failures_by_reason; ///< Failed plays by `errc` name.
  std::uint64_t play_items_sent = 0; ///< Play items in ticket requests sent, each attempt counted.
  std::uint64_t play_429 = 0;        ///< Play items the server answered 429, each attempt counted.
};

/// One process of a fleet run (`--processes N`): what its client and the viewer actions routed to it did.
struct process_summary {
  std::uint32_t process = 0; ///< 0 to N-1.
  std::int64_t pid = 0;
  /// Its viewer and client fields (`viewers`: viewers with at least one action here); the server's fields (emulator,
  /// warm-up, limit, bound) are the run's, in the total.
  summary s;
  std::uint64_t cross_process_reuse = 0;    ///< Tickets it reused that another process had issued.
  std::uint64_t shared_state_fallbacks = 0; ///< Shared-state operations it answered from local state.
};

/// What a fleet run adds to the report.
struct fleet_summary {
  std::uint32_t processes = 1;
  std::string shared_state; ///< The Redis URL, its password shown as `***`; empty without shared state.
  std::optional<double> shared_state_killed_at_s; ///< When the private Redis was killed (s since the first viewer).
  std::uint64_t cross_process_reuse = 0;          ///< Sums over the processes.
  std::uint64_t shared_state_fallbacks = 0;
  std::vector<process_summary> per_process;
};

/// " (best possible 0.9612)" after the success rate in the summary table, or "" when the bound is unknown.
[[nodiscard]] std::string bound_text(summary const& s);

/// The summary table's lines about overload: failed plays by reason, and play items sent and answered 429.
void print_overload_lines(summary const& s);

/// Writes `summary` (and the samples) as JSON to `path`, with the fleet's fields and `per_process` when `fleet` is
/// given. Throws std::runtime_error when the file cannot be written.
void write_report_json(std::string const& path, summary const& s, std::vector<sample> const& samples,
                       fleet_summary const* fleet = nullptr);

/// Writes an SVG chart to `path`: tickets/s against the limit (top) and play time-to-ticket p50/p95 (bottom).
void write_report_svg(std::string const& path, summary const& s, std::vector<sample> const& samples);

} // namespace demo
