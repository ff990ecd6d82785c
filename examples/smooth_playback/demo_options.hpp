// The demo's command line and what follows from it before any server is involved: the catalogue, the audience plan
// and the playback limit it is sized against. The parent of a fleet run and each of its worker processes parse the
// same options and so build the same plan (docs/demo.md "A fleet of processes").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "audience.hpp"

namespace demo {

struct demo_options {
  std::uint32_t viewers = 2000;
  double duration_s = 30;
  std::uint64_t seed = 20261130;
  std::optional<std::uint32_t> playback_limit;
  std::optional<double> warmup_left;
  double unavailable = 0.01;
  std::optional<std::string> catalogue_file;
  std::optional<std::string> base_url;
  std::optional<std::string> api_key;
  std::string report_dir = ".";
  std::optional<std::string> plan_out;
  unsigned client_threads = 2;
  bool verbose = false;
  /// Client processes; 1 runs the client in this process, as without the option.
  unsigned processes = 1;
  /// `redis://[user:password@]host[:port][/db]`, or `auto` for a private redis-server of the run; empty: no shared
  /// state. A worker reads it from `worker_shared_state_env`.
  std::optional<std::string> shared_state;
  /// Seconds after the first viewer at which the private Redis of `--shared-state auto` is killed.
  std::optional<double> kill_shared_state_after_s;
  /// Set in a worker process (hidden `--worker K`): this process runs the actions routed to worker K.
  std::optional<unsigned> worker;
};

/// The environment variable that gives a worker process the shared state's URL (`--shared-state` of the parent,
/// or the private Redis's): not on its command line, which other users can read, since the URL may hold a password.
inline constexpr char const* worker_shared_state_env = "SMOOTH_PLAYBACK_SHARED_STATE";

/// Adds the demo's options to `app`, parsed into `o` (which must outlive the parsing). Every option keeps its
/// default when left out; the worker's own options are hidden from `--help`.
void add_options(CLI::App& app, demo_options& o);

/// What the options need of each other and of the environment, once parsed. @throws wandura::cli::usage_error.
void complete_options(demo_options& o);

/// The films to choose from: `--catalogue`, or the emulator's demo catalogue. @throws usage_error for a file that
/// cannot be read or has no film.
[[nodiscard]] std::vector<catalogue_film> load_catalogue(demo_options const& o);

/// The run's plan, identical in every process that parses the same options.
struct run_plan {
  audience plan;
  demand_curve demand;
  double peak_demand = 0;  ///< Tickets per second in the plan's busiest 3 seconds.
  std::uint32_t limit = 0; ///< The playback limit, tickets per minute.
  double warmup_left = 1;  ///< The fraction of the limit the warm-up leaves (in-process emulator only).
};

/// @throws usage_error as `load_catalogue`.
[[nodiscard]] run_plan make_run_plan(demo_options const& o);

} // namespace demo
