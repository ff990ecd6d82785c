// The end of a run, one process or a fleet: the summary from what the clients did and what the server counted,
// the bound of the plan, report.json and report.svg, the summary table, and the exit status.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "client_session.hpp"
#include "demo_options.hpp"
#include "report.hpp"
#include "wandura/emulator/emulator.hpp"

namespace demo {

/// What the server side of a run was and counted.
struct server_side {
  std::string target;                    ///< "in-process emulator at http://..." or the base URL.
  wandura::emulator::server* emulator{}; ///< The in-process emulator, still running; null against an API.
  std::chrono::steady_clock::time_point emulator_started;
  std::uint64_t counted_before = 0; ///< The emulator's `tickets_counted` when the viewers began (the warm-up's).
  std::uint64_t held_before = 0;    ///< Its `held_play` then.
  std::uint64_t warmup_tickets = 0; ///< Fresh tickets the warm-up received.
  double warmup_left = 1;           ///< The fraction of the limit it left (1: no warm-up).
  /// Against a server with the emulator's admin API: the tickets it counted during the run.
  std::optional<std::uint64_t> external_counted;
  double playback_limit_per_min = 0; ///< For the chart (and the bound, in-process).
};

/// The two lines before the run: the plan, then the emulator at `emulator_url` (its limit, warm-up and scripted
/// faults) or the target API.
void print_run_header(demo_options const& o, run_plan const& plan, std::optional<std::string> const& emulator_url);

/// Fills the summary from `total` (the clients' run, `combine_runs` of a fleet) and `server` (stopping the
/// in-process emulator), writes `--plan-out`, report.json (with `fleet`'s fields when given) and report.svg, and
/// prints the summary table. Returns the exit status: 0 when every play was granted and the counts match, else 1.
/// @throws std::runtime_error when a report file cannot be written.
[[nodiscard]] int finish_run(demo_options const& o, run_plan const& plan, client_run const& total, server_side server,
                             fleet_summary const* fleet, std::chrono::milliseconds play_deadline);

} // namespace demo
