// smooth_playback: viewers starting episodes at an evening peak, against the in-process emulator (default) or a
// Wandura API (`--base-url`, key from `WANDURA_API_KEY`), from one client or from a fleet of client processes
// (`--processes`, `--shared-state`). What it simulates and how to read the report: docs/demo.md.
//
// Exit status: 0 when every play was granted (no viewer saw an error) and, against the emulator, the server counted
// exactly the fresh tickets the demo received; 1 otherwise; 2 for a usage error; 130 or 143 when a fleet run is
// ended by SIGINT or SIGTERM.
#include <csignal>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/style.hpp"
#include "client_session.hpp"
#include "demo_options.hpp"
#include "fleet_run.hpp"
#include "in_process_emulator.hpp"
#include "interrupt.hpp"
#include "log_line.hpp"
#include "progress_printer.hpp"
#include "run_report.hpp"
#include "simulation.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/transport/transport.hpp"
#include "worker.hpp"

#include <simdjson.h>

namespace demo {
namespace {

using wandura::cli::usage_error;

/// `tickets_counted` of `GET <base_url>/_emulator/stats` when the server is an emulator (SPEC §4 admin API);
/// nullopt for a server without it (a real API answers 401 or 404) or when the body is not the stats object.
asio::awaitable<std::optional<std::uint64_t>> emulator_tickets_counted(wandura::http_sender& http,
                                                                       std::string base_url) {
  wandura::http_request request;
  request.url = std::move(base_url) + "/_emulator/stats";
  wandura::attempt_options const options{std::chrono::milliseconds(3000), std::chrono::milliseconds(1000)};
  auto const got = co_await http.send_attempt(request, options);
  if (got.error || got.response.status != 200) {
    co_return std::nullopt;
  }
  simdjson::dom::parser parser;
  simdjson::padded_string const body(got.response.body.view());
  std::uint64_t counted = 0;
  if (parser.parse(body)["tickets_counted"].get_uint64().get(counted) != simdjson::SUCCESS) {
    co_return std::nullopt;
  }
  co_return counted;
}

/// The run with one client in this process.
int run_one_process(demo_options const& o) {
  bool const tty = isatty(fileno(stdout)) != 0;
  bool const in_process = !o.base_url;
  run_plan const rp = make_run_plan(o);

  std::unique_ptr<wandura::emulator::server> emu;
  server_side server;
  std::string base_url;
  std::string api_key;
  server.emulator_started = std::chrono::steady_clock::now();
  if (in_process) {
    emu = start_emulator(o, rp);
    base_url = emu->base_url();
    api_key = wandura::emulator::config{}.orgs.front().keys.front();
    server.target = "in-process emulator at " + base_url;
    server.emulator = emu.get();
    server.playback_limit_per_min = rp.limit;
  } else {
    base_url = *o.base_url;
    api_key = *o.api_key;
    server.target = base_url;
  }
  print_run_header(o, rp, in_process ? std::optional<std::string>(base_url) : std::nullopt);

  progress_printer printer(tty);
  std::atomic<std::uint64_t> warn_lines{0};
  std::uint64_t const warn_lines_shown = o.verbose ? UINT64_MAX : 5;
  client_session session(
      {base_url, api_key, o.client_threads, std::nullopt, {}, [&](wandura::log_level level, std::string_view message) {
         std::string const shown = std::string(level_name(level)) + " " + std::string(message);
         if (level != wandura::log_level::warn) {
           printer.note(shown);
         } else if (auto const n = warn_lines.fetch_add(1) + 1; n <= warn_lines_shown) {
           printer.note(shown +
                        (n == warn_lines_shown ? "  (further WARN lines counted only; --verbose shows them)" : ""));
         }
       }});

  auto const sim_policy = wandura::retry_policy::interactive();
  client_run run;
  std::unique_ptr<wandura::transport> probe;
  std::optional<std::uint64_t> external_before;
  try {
    if (in_process && rp.warmup_left < 1.0) {
      server.warmup_tickets = session.run(
          warm_up(session.api(), *emu, rp.plan.catalogue.front(), rp.limit, rp.warmup_left, server.emulator_started));
      server.warmup_left = rp.warmup_left;
    }
    if (in_process) {
      auto const st = emu->stats();
      server.counted_before = st.tickets_counted;
      server.held_before = st.held_play;
      script_unavailable(*emu, o.unavailable);
    } else {
      // Against `wandura emulator` (or any server with the admin API), compare its count too.
      probe = std::make_unique<wandura::transport>(session.io().get_executor());
      external_before = session.run(emulator_tickets_counted(*probe, base_url));
      // The organisation's playback limit, for the chart (seed 001: GET /config returns the limits in force).
      try {
        auto const limits = session.run(session.api().get_config());
        server.playback_limit_per_min = static_cast<double>(limits.limit("playback").value_or(0));
      } catch (wandura::error const& e) {
        printer.note(std::string("note: no playback limit for the chart: ") + e.what());
      }
    }
    simulation_options sim;
    sim.call.policy = sim_policy;
    sim.on_progress = [&printer](progress const& p) { printer.update(p); };
    if (in_process) {
      sim.server_tickets_counted = [&emu]() -> std::optional<std::uint64_t> { return emu->stats().tickets_counted; };
    }
    run = session.play(rp.plan, std::move(sim));
  } catch (...) {
    printer.finish();
    throw;
  }
  printer.finish();
  if (probe && external_before) {
    if (auto const after = session.run(emulator_tickets_counted(*probe, base_url))) {
      server.external_counted = *after - *external_before;
    }
  }
  probe.reset();
  return finish_run(o, rp, run, server, nullptr, sim_policy.total_timeout);
}

int run(demo_options const& o) {
  if (o.worker) {
    return run_worker(o);
  }
  // Before the run, so that a bad --report-dir does not waste it.
  std::error_code dir_error;
  std::filesystem::create_directories(o.report_dir, dir_error);
  if (dir_error || !std::filesystem::is_directory(o.report_dir)) {
    throw usage_error("--report-dir: cannot create " + o.report_dir +
                      (dir_error ? ": " + dir_error.message() : std::string()));
  }
  if (o.processes > 1 || o.shared_state) {
    return run_fleet(o);
  }
  return run_one_process(o);
}

} // namespace
} // namespace demo

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN); // a write to a closed connection fails with EPIPE instead (transport.hpp, Signals)
  CLI::App app("Simulates viewers starting episodes at an evening peak and shows how the SDK keeps playback smooth:\n"
               "prefetch is shed by the server first, plays are retried after Retry-After, repeated starts reuse\n"
               "tickets (docs/demo.md).",
               "smooth_playback");
  wandura::cli::apply_style(app, "Exit status: 0 when every play was granted and, against the emulator, the server "
                                 "counted exactly the fresh\ntickets the demo received; 1 otherwise; 2 for a usage "
                                 "error; 130 or 143 when SIGINT or\nSIGTERM ends a fleet run.");
  demo::demo_options options;
  demo::add_options(app, options);
  if (auto const done = wandura::cli::parse(app, {argv + 1, static_cast<std::size_t>(argc - 1)})) {
    return *done;
  }
  try {
    demo::complete_options(options);
    return demo::run(options);
  } catch (wandura::cli::usage_error const& e) {
    return wandura::cli::report_usage_error("smooth_playback", e.what());
  } catch (demo::interrupted const& e) {
    // The workers were killed and reaped and the private Redis stopped on the way here.
    std::fprintf(stderr, "smooth_playback: %s; no report written\n", e.what());
    return 128 + e.signal();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "smooth_playback: %s\n", e.what());
    return wandura::cli::exit_failed;
  }
}
