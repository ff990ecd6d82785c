// Plays an `audience` against a `wandura::client` in real time and records what every viewer saw.
//
// Each viewer is one coroutine on the client's executor: it waits until its step's time, calls
// `client::start_episode` (seed 000: N as play, N+1 and N+2 as prefetch when unlocked) and records the play's
// time-to-ticket and every item's outcome. A viewer's steps run one after the other, as a player's would.
//
// Counting rules (docs/demo.md):
// - a play succeeded when its outcome is `granted`; anything else, or an exception, is a failure the viewer saw;
// - a granted item is fresh when not `reused` (reused: from the client's cache, a joined request in flight, or the
//   server's `"reused": true`); the server must have counted exactly the fresh ones.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "audience.hpp"
#include "counting_sender.hpp"
#include "report.hpp"
#include "wandura/playback/client.hpp"

namespace demo {

/// What the run has done so far, for the progress line. Read while the run goes on.
struct progress {
  double t_s = 0;
  std::uint64_t viewers_started = 0;
  std::uint64_t viewers = 0;
  std::uint64_t plays_done = 0;
  std::uint64_t play_failures = 0;
  double tickets_per_s = 0; ///< Fresh tickets in the last sample interval, per second.
  std::uint64_t retries = 0;
  std::uint64_t shed = 0;
};

/// The simulation's knobs.
struct simulation_options {
  /// Where viewer refs come from: `make_viewer_ref(secret, "user-<id>", "install-<id>-<device>")`.
  std::string viewer_secret = "demo-viewer-secret";
  /// Per-call options of every start (the retry policy; seed 000 INTERACTIVE by default).
  wandura::call_options call;
  /// Interval of the samples of report.svg.
  std::chrono::milliseconds sample_interval{1000};
  /// How often `on_progress` is called.
  std::chrono::milliseconds progress_interval{250};
  /// Called from the executor every `progress_interval`; must be cheap.
  std::function<void(progress const&)> on_progress;
  /// Tickets the server has counted so far (e.g. the emulator's stats), for the chart; empty: the demo's own
  /// count of fresh tickets is used.
  std::function<std::optional<std::uint64_t>()> server_tickets_counted;
  /// Retries so far, for the progress line (e.g. a count of `on_retry` events); empty: the client's metrics.
  std::function<std::uint64_t()> retries_so_far;
  /// Ticket items sent and answered 429 so far (a `counting_sender`), for the chart; empty: not sampled.
  std::function<item_counts()> items_so_far;
  /// The run's time 0, the same in every process of a fleet (steady_clock is the system's monotonic clock); empty:
  /// when the run starts.
  std::optional<std::chrono::steady_clock::time_point> start_at;
  /// Whether this process runs step `step` (an index into `viewer.steps`) of `viewer`; empty: every step. A
  /// viewer's kept steps run in order, each at its planned time.
  std::function<bool(viewer_plan const& viewer, std::size_t step)> runs_step;
};

/// One failure a viewer would have seen.
struct play_failure {
  std::uint32_t viewer = 0;
  std::string film_ref;
  std::int32_t episode_no = 0;
  std::string what; ///< The outcome and status, or the exception's message.
};

/// Everything the run recorded.
struct simulation_result {
  /// Viewer-side totals (the caller fills in server and client fields); `viewers` counts the viewers with at least
  /// one step run here.
  summary totals;
  std::vector<sample> samples;
  std::vector<double> play_latencies_ms;                 ///< Every play's time-to-ticket, failures included.
  std::vector<double> play_done_s;                       ///< When each of them completed (s since time 0).
  std::vector<play_failure> failures;                    ///< At most the first 20.
  std::map<std::string, std::uint64_t> outcomes_by_kind; ///< "play granted", "prefetch shed", ...
  /// Failed plays by reason (failure_reason.hpp): "budget_exhausted", "deadline_exceeded", "rate_limited", ...
  std::map<std::string, std::uint64_t> failures_by_reason;
  std::uint64_t starts = 0;                      ///< start_episode calls.
  std::chrono::steady_clock::time_point started; ///< When the run started (its steps' time 0).
};

/// Runs `plan` against `api` on `executor` (the client's). Completes when every viewer has finished.
/// @throws only what allocation throws; SDK failures are recorded as play failures.
[[nodiscard]] asio::awaitable<simulation_result> run_audience(asio::any_io_executor executor, wandura::client& api,
                                                              audience const& plan, simulation_options options);

/// The p-th percentile (0-100) of `values` by nearest rank; 0 when empty. Sorts `values`.
[[nodiscard]] double percentile(std::vector<double>& values, double p);

} // namespace demo
