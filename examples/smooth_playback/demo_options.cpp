#include "demo_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cli/style.hpp"
#include "wandura/emulator/emulator.hpp"

#ifdef WANDURA_DEMO_HAS_FLEET
#include "wandura/error.hpp"
#include "wandura/fleet/redis_url.hpp"
#endif

namespace demo {
namespace {

using wandura::cli::usage_error;

/// The fraction of the playback limit to leave before the first viewer so that the counter, refilled while demand
/// is still under the limit, is back at the shed line (20 % left, SPEC §2) plus `margin` when demand first crosses
/// the limit. Without a warm-up an idle organisation could spend a whole minute's limit at once (seed 001 "Nạp
/// lại"), and a 30-second peak would never reach the shed line.
double warmup_level(demand_curve const& demand, double limit_per_min, double margin = 0.02) {
  double const rate = limit_per_min / 60.0;
  double slack = 0;
  for (double const d : demand.tickets_per_s) {
    if (d >= rate) {
      break;
    }
    slack += rate - d;
  }
  return std::clamp(0.20 + margin - slack / limit_per_min, 0.0, 1.0);
}

} // namespace

void add_options(CLI::App& app, demo_options& o) {
  using wandura::cli::number_in;
  app.add_option("--viewers", o.viewers, "viewers arriving over the run (default 2000)")
      ->type_name("N")
      ->transform(number_in<std::uint32_t>(1, 1'000'000));
  app.add_option("--duration", o.duration_s, "seconds over which they arrive, peaking in the middle (default 30)")
      ->type_name("S")
      ->transform(number_in<double>(1, 3600));
  app.add_option("--seed", o.seed, "seed of the audience plan and of the emulator (default 20261130)")
      ->type_name("N")
      ->transform(number_in<std::uint64_t>(0, UINT64_MAX));
  app.add_option("--playback-limit", o.playback_limit,
                 "the emulator's playback limit in tickets per minute\n(default: half the plan's peak demand)")
      ->type_name("N")
      ->transform(number_in<std::uint32_t>(60, 100'000'000));
  app.add_option("--warmup-left", o.warmup_left,
                 "before the first viewer, spend the playback counter down to this\nfraction of its limit, as for "
                 "an organisation already busy when its\npeak begins (1 = start idle; default: the level that "
                 "reaches the\n20 % shed line when demand first crosses the limit).\nIn-process emulator only.")
      ->type_name("F")
      ->transform(number_in<double>(0, 1));
  app.add_option("--unavailable", o.unavailable,
                 "fraction of ticket requests the emulator answers 503\nservice_unavailable with Retry-After: 1, "
                 "\"could not issue in time\"\n(default 0.01). In-process emulator only.")
      ->type_name("P")
      ->transform(number_in<double>(0, 0.5));
  app.add_option("--catalogue", o.catalogue_file,
                 "films to choose from, as JSON\n{\"films\":[{\"film_ref\":\"...\",\"episodes\":N},...]} "
                 "(default: the emulator's\ndemo catalogue)")
      ->type_name("FILE");
  app.add_option("--base-url", o.base_url,
                 "run against this API instead of the in-process emulator; the key\ncomes from --api-key or "
                 "WANDURA_API_KEY")
      ->type_name("URL");
  app.add_option("--api-key", o.api_key, "API key for --base-url")->type_name("KEY");
  app.add_option("--report-dir", o.report_dir,
                 "where report.json and report.svg are written (default: the current\ndirectory)")
      ->type_name("DIR");
  app.add_option("--plan-out", o.plan_out,
                 "also write the plan's plays, the limit and the tickets left at the start\nas JSON")
      ->type_name("FILE");
  app.add_option("--client-threads", o.client_threads, "threads running the client (default 2, in each process)")
      ->type_name("N")
      ->transform(number_in<unsigned>(1, 64));
  app.add_option("--processes", o.processes,
                 "client processes, each with its own client against the one emulator;\nevery viewer action (a "
                 "start, a restart, a binge step) goes to one of\nthem as a load balancer without affinity would "
                 "(default 1: the client\nruns in this process)")
      ->type_name("N")
      ->transform(number_in<unsigned>(1, 64));
  app.add_option("--shared-state", o.shared_state,
                 "redis://[user:password@]host[:port][/db]: the processes share tickets,\nthe per-viewer limit and the "
                 "counter's pace through this Redis\n(wandura::fleet; the password is never shown); auto: a private\n"
                 "redis-server for the run")
      ->type_name("URL");
  app.add_option("--kill-shared-state-after", o.kill_shared_state_after_s,
                 "kill the private Redis of --shared-state auto this many seconds after\nthe first viewer: the "
                 "processes go on from local state")
      ->type_name("S")
      ->transform(number_in<double>(0, 3600));
  app.add_option("--worker", o.worker, "")->group("")->transform(number_in<unsigned>(0, 63));
  app.add_flag("--verbose", o.verbose,
               "print every WARN line of the SDK (default: the first 5, the rest are\ncounted)");
}

void complete_options(demo_options& o) {
  if (o.base_url && !o.api_key) {
    if (char const* key = std::getenv("WANDURA_API_KEY"); key != nullptr && *key != '\0') {
      o.api_key = key;
    } else {
      throw usage_error("--base-url needs an API key: --api-key KEY or WANDURA_API_KEY");
    }
  }
  if (o.worker) {
    if (!o.base_url || *o.worker >= o.processes) {
      throw usage_error("--worker is started by smooth_playback itself, with --base-url and --processes");
    }
    if (char const* url = std::getenv(worker_shared_state_env); url != nullptr && *url != '\0') {
      o.shared_state = url;
    }
    return;
  }
  if (o.base_url && (o.processes > 1 || o.shared_state)) {
    throw usage_error("--processes and --shared-state run against the in-process emulator, not --base-url");
  }
  if (o.shared_state) {
#ifndef WANDURA_DEMO_HAS_FLEET
    throw usage_error("--shared-state is unavailable: this build has no fleet layer (wandura::fleet is built when "
                      "hiredis is found, e.g. libhiredis-dev)");
#else
    // The fleet's own parser, now rather than in each worker once the run has started (docs/adr/0007: a value the
    // SDK refuses before sending anything is a usage error). Its message never holds the password.
    if (*o.shared_state != "auto") {
      try {
        (void)wandura::redis_url::parse(*o.shared_state);
      } catch (wandura::error const& e) {
        throw usage_error("--shared-state: " + std::string(e.what()) +
                          " (expected redis://[user:password@]host[:port][/db] or auto)");
      }
    }
#endif
  }
  if (o.kill_shared_state_after_s && o.shared_state != "auto") {
    throw usage_error("--kill-shared-state-after needs --shared-state auto (the demo kills only a Redis it started)");
  }
}

std::vector<catalogue_film> load_catalogue(demo_options const& o) {
  std::vector<catalogue_film> films;
  if (o.catalogue_file) {
    // The emulator's configuration format, so the same file can be given to `wandura emulator --config`.
    wandura::emulator::config cfg;
    try {
      cfg = wandura::emulator::load_config_file(*o.catalogue_file);
    } catch (wandura::emulator::config_error const& e) {
      throw usage_error("--catalogue: " + std::string(e.what()));
    }
    if (cfg.films.empty()) {
      throw usage_error("--catalogue: no \"films\" in " + *o.catalogue_file);
    }
    for (auto const& f : cfg.films) {
      films.push_back({f.film_ref, static_cast<std::int32_t>(f.episodes)});
    }
  } else {
    for (auto const& f : wandura::emulator::demo_catalogue()) {
      films.push_back({f.film_ref, static_cast<std::int32_t>(f.episodes)});
    }
  }
  return films;
}

run_plan make_run_plan(demo_options const& o) {
  run_plan out;
  arrival_profile const profile{o.duration_s, 0.5};
  audience_mix const mix;
  out.plan = plan_audience(load_catalogue(o), o.viewers, profile, mix, o.seed);
  out.demand = out.plan.demand(o.duration_s);
  // Seed 001: playback refills limit/60 per second. Default: the plan's peak demand (3-s window) is twice that.
  out.peak_demand = out.demand.peak_tickets_per_s(3);
  out.limit = o.playback_limit.value_or(
      static_cast<std::uint32_t>(std::max(60.0, std::round(out.peak_demand / 2.0 * 60.0 / 100.0) * 100.0)));
  out.warmup_left = o.warmup_left.value_or(warmup_level(out.demand, out.limit));
  return out;
}

} // namespace demo
