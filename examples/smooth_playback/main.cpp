// smooth_playback: viewers starting episodes at an evening peak, against the in-process emulator (default) or a
// Wandura API (`--base-url`, key from `WANDURA_API_KEY`). What it simulates and how to read the report:
// docs/demo.md.
//
// Exit status: 0 when every play was granted (no viewer saw an error) and, against the emulator, the server counted
// exactly the fresh tickets the demo received; 1 otherwise; 2 for a usage error.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include "audience.hpp"
#include "cli/style.hpp"
#include "counting_sender.hpp"
#include "play_plan.hpp"
#include "report.hpp"
#include "simulation.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/transport/transport.hpp"

#include <simdjson.h>

namespace demo {
namespace {

using wandura::cli::usage_error;

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
};

/// The demo's command line, parsed into `o` (which must outlive `app`'s parsing). Every option keeps its default
/// when left out.
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
  app.add_option("--client-threads", o.client_threads, "threads running the client (default 2)")
      ->type_name("N")
      ->transform(number_in<unsigned>(1, 64));
  app.add_flag("--verbose", o.verbose,
               "print every WARN line of the SDK (default: the first 5, the rest are\ncounted)");
}

/// What the options need of each other and of the environment, once parsed. @throws usage_error.
void complete_options(demo_options& o) {
  if (o.base_url && !o.api_key) {
    if (char const* key = std::getenv("WANDURA_API_KEY"); key != nullptr && *key != '\0') {
      o.api_key = key;
    } else {
      throw usage_error("--base-url needs an API key: --api-key KEY or WANDURA_API_KEY");
    }
  }
}

std::vector<catalogue_film> load_catalogue(demo_options const& o) {
  std::vector<catalogue_film> films;
  if (o.catalogue_file) {
    std::ifstream in(*o.catalogue_file, std::ios::binary);
    if (!in) {
      throw usage_error("--catalogue: cannot read " + *o.catalogue_file);
    }
    std::stringstream text;
    text << in.rdbuf();
    // The emulator's configuration format, so the same file can be given to `wandura emulator --config`.
    wandura::emulator::config cfg;
    try {
      cfg = wandura::emulator::parse_config(text.str());
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

/// The live progress line: redrawn in place on a terminal, one line every 5 s otherwise (CI logs).
class progress_printer {
public:
  explicit progress_printer(bool tty) : tty_(tty) {}

  void update(progress const& p) {
    std::lock_guard lock(mutex_);
    if (!tty_ && p.t_s < next_line_s_) {
      return;
    }
    next_line_s_ = p.t_s + 5;
    char line[200];
    std::snprintf(
        line, sizeof line, "t=%5.1fs  viewers %llu/%llu  plays ok %llu/%llu  tickets/s %5.0f  retries %llu  shed %llu",
        p.t_s, static_cast<unsigned long long>(p.viewers_started), static_cast<unsigned long long>(p.viewers),
        static_cast<unsigned long long>(p.plays_done - p.play_failures), static_cast<unsigned long long>(p.plays_done),
        p.tickets_per_s, static_cast<unsigned long long>(p.retries), static_cast<unsigned long long>(p.shed));
    if (tty_) {
      std::printf("\r\033[K%s", line);
    } else {
      std::printf("%s\n", line);
    }
    std::fflush(stdout);
    drawn_ = tty_;
  }

  /// Prints `text` as its own line, above the progress line on a terminal.
  void note(std::string const& text) {
    std::lock_guard lock(mutex_);
    if (drawn_) {
      std::printf("\r\033[K");
    }
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }

  void finish() {
    std::lock_guard lock(mutex_);
    if (drawn_) {
      std::printf("\n");
      drawn_ = false;
    }
  }

private:
  std::mutex mutex_;
  bool tty_;
  bool drawn_ = false;
  double next_line_s_ = 0;
};

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

/// Spends the in-process emulator's playback counter down to `left` of its limit with batches of three plays for
/// throw-away devices (no viewer_ref: nothing reused). Returns the tickets received.
/// @throws std::runtime_error when a batch gets no fresh ticket (the counter would never go down).
asio::awaitable<std::uint64_t> warm_up(wandura::client& api, wandura::emulator::server& emu, catalogue_film film,
                                       double limit_per_min, double left,
                                       std::chrono::steady_clock::time_point emulator_started) {
  double const rate = limit_per_min / 60.0;
  auto spent_enough = [&] {
    double const elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - emulator_started).count();
    double const counted = static_cast<double>(emu.stats().tickets_counted);
    return counted - rate * elapsed >= limit_per_min * (1.0 - left);
  };
  std::uint64_t received = 0;
  std::uint64_t batch_no = 0;
  wandura::call_options once;
  once.policy = wandura::retry_policy::none();
  while (!spent_enough()) {
    wandura::ticket_batch batch;
    batch.union_info = "warmup-device-" + std::to_string(batch_no);
    batch.drm_kek = "warmup-kek-" + std::to_string(batch_no);
    ++batch_no;
    for (std::int32_t ep = 1; ep <= std::min(3, film.episodes); ++ep) {
      batch.episodes.push_back({film.film_ref, ep, wandura::intent::play});
    }
    auto got = co_await api.issue_tickets(std::move(batch), once);
    std::uint64_t fresh = 0;
    for (auto const& item : got.items) {
      if (item.outcome == wandura::item_outcome::granted && !item.reused) {
        ++fresh;
      }
    }
    if (fresh == 0) {
      auto const& first = got.items.front();
      throw std::runtime_error("warm-up: no ticket granted for " + film.film_ref + ": " +
                               std::string(wandura::to_string(first.outcome)) + " (status " +
                               std::to_string(first.status) + " " + first.error_code + ")");
    }
    received += fresh;
  }
  co_return received;
}

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

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.1f ms" : "%.0f ms", ms);
  return buf;
}

void print_summary(summary const& s, simulation_result const& r, bool in_process, std::uint64_t calls,
                   std::uint64_t held_off, std::string const& target, std::string const& json_path,
                   std::string const& svg_path, std::uint64_t warn_lines) {
  auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("\nsummary (%s)\n", target.c_str());
  std::printf("  %-26s %llu over %.0f s\n", "viewers", u(s.viewers), s.duration_s);
  std::printf("  %-26s %llu, failed %llu, success rate %.4f%s\n", "plays (start_episode)", u(s.play_requests),
              u(s.play_failures), s.play_success_rate, bound_text(s).c_str());
  print_overload_lines(s);
  std::printf("  %-26s p50 %s  p95 %s  p99 %s  max %s\n", "play time-to-ticket", format_ms(s.p50_ms).c_str(),
              format_ms(s.p95_ms).c_str(), format_ms(s.p99_ms).c_str(), format_ms(s.max_ms).c_str());
  std::printf("  %-26s %llu: fresh %llu, reused %llu (client cache hits %llu, calls joined in flight %llu)\n",
              "tickets granted", u(s.tickets_granted), u(s.tickets_fresh), u(s.tickets_reused), u(s.cache_hits),
              u(s.coalesced));
  std::printf("  %-26s asked %llu, shed by the server %llu (not an error)\n", "prefetch", u(s.prefetch_requested),
              u(s.prefetch_shed));
  std::printf("  %-26s %llu (WARN lines %llu), budget denied %llu, waited for a 429 hold-off %llu\n", "retries",
              u(s.retries), u(warn_lines), u(s.budget_denied), u(held_off));
  std::printf("  %-26s %llu calls, %llu HTTP attempts (items all from the cache need none)\n", "issue_tickets",
              u(calls), u(s.requests));
  if (s.emulator_tickets_counted) {
    std::printf("  %-26s %llu tickets counted; fresh tickets received %llu: %s\n", "emulator",
                u(*s.emulator_tickets_counted), u(s.tickets_fresh),
                *s.emulator_tickets_counted == s.tickets_fresh ? "equal, nothing counted twice" : "MISMATCH");
  }
  if (in_process) {
    std::printf("  %-26s %llu plays held until room returned, %llu requests answered by the scripted 503\n", "",
                u(s.held_play), u(s.faults_injected));
  }
  if (s.warmup_tickets > 0) {
    std::printf("  %-26s %llu tickets before the first viewer (counter left at %.0f %% of %.0f/min)\n", "warm-up",
                u(s.warmup_tickets), s.warmup_left * 100, s.playback_limit_per_min);
  }
  std::printf("  %-26s", "outcomes");
  bool first = true;
  for (auto const& [kind, n] : r.outcomes_by_kind) {
    std::printf("%s%s %llu", first ? " " : ", ", kind.c_str(), u(n));
    first = false;
  }
  std::printf("\n  %-26s %s, %s\n", "report", json_path.c_str(), svg_path.c_str());
  for (auto const& f : r.failures) {
    std::printf("  FAILED play: viewer %u %s episode %d: %s\n", f.viewer, f.film_ref.c_str(), f.episode_no,
                f.what.c_str());
  }
  if (s.play_failures > r.failures.size()) {
    std::printf("  ... and %llu more failed plays\n", u(s.play_failures - r.failures.size()));
  }
}

int run(demo_options const& o) {
  bool const tty = isatty(fileno(stdout)) != 0;
  bool const in_process = !o.base_url;
  // Before the run, so that a bad --report-dir does not waste it.
  std::error_code dir_error;
  std::filesystem::create_directories(o.report_dir, dir_error);
  if (dir_error || !std::filesystem::is_directory(o.report_dir)) {
    throw usage_error("--report-dir: cannot create " + o.report_dir +
                      (dir_error ? ": " + dir_error.message() : std::string()));
  }
  auto catalogue = load_catalogue(o);

  arrival_profile const profile{o.duration_s, 0.5};
  audience_mix const mix;
  audience const plan = plan_audience(catalogue, o.viewers, profile, mix, o.seed);
  demand_curve const demand = plan.demand(o.duration_s);
  // Seed 001: playback refills limit/60 per second. Default: the plan's peak demand (3-s window) is twice that.
  double const peak_demand = demand.peak_tickets_per_s(3);
  auto const limit = o.playback_limit.value_or(
      static_cast<std::uint32_t>(std::max(60.0, std::round(peak_demand / 2.0 * 60.0 / 100.0) * 100.0)));

  double const warmup_left = o.warmup_left.value_or(warmup_level(demand, limit));

  std::unique_ptr<wandura::emulator::server> emu;
  std::string base_url;
  std::string api_key;
  std::string target;
  auto const emulator_started = std::chrono::steady_clock::now();
  if (in_process) {
    wandura::emulator::config cfg;
    cfg.orgs.front().limits.playback = limit;
    cfg.seed = o.seed;
    cfg.threads = 1;
    if (o.catalogue_file) {
      for (auto const& f : plan.catalogue) {
        cfg.films.push_back({f.film_ref, {}, static_cast<std::uint32_t>(f.episodes), true});
      }
    }
    emu = wandura::emulator::server::start(cfg);
    base_url = emu->base_url();
    api_key = cfg.orgs.front().keys.front();
    target = "in-process emulator at " + base_url;
  } else {
    base_url = *o.base_url;
    api_key = *o.api_key;
    target = base_url;
  }

  std::printf("smooth_playback: %u viewers over %.0f s, %zu films, %zu steps; peak demand %.0f tickets/s (plays "
              "%.0f/s)\n",
              o.viewers, o.duration_s, plan.catalogue.size(), plan.steps, peak_demand, demand.peak_plays_per_s(3));
  if (in_process) {
    std::string const faults_text = o.unavailable > 0 ? ", ~1 in " + std::to_string(std::lround(1 / o.unavailable)) +
                                                            " ticket requests answered 503 (could not issue in time)"
                                                      : std::string();
    std::printf("emulator: %s, playback limit %u tickets/min (%.0f/s), warm-up to %.0f %% left%s\n", base_url.c_str(),
                limit, limit / 60.0, warmup_left * 100, faults_text.c_str());
  } else {
    std::printf("target: %s\n", base_url.c_str());
  }
  std::fflush(stdout);

  progress_printer printer(tty);
  std::atomic<std::uint64_t> warn_lines{0};
  std::uint64_t const warn_lines_shown = o.verbose ? UINT64_MAX : 5;

  asio::io_context io;
  wandura::client_options copt;
  copt.base_url = base_url;
  copt.api_key = api_key;
  copt.retry.policy = wandura::retry_policy::interactive();
  std::atomic<std::uint64_t> retry_events{0};
  copt.retry.on_retry = [&retry_events](wandura::retry_event const&) { retry_events.fetch_add(1); };
  copt.retry.log = [&](wandura::log_level level, std::string_view message) {
    if (level != wandura::log_level::warn) {
      return;
    }
    auto const n = warn_lines.fetch_add(1) + 1;
    if (n <= warn_lines_shown) {
      printer.note("WARN " + std::string(message) +
                   (n == warn_lines_shown ? "  (further WARN lines counted only; --verbose shows them)" : ""));
    }
  };
  // The client sends through a counter of ticket items (play items sent, answered 429), not its own transport.
  auto sender = std::make_shared<counting_sender>(std::make_shared<wandura::transport>(io.get_executor()));
  auto api = std::make_unique<wandura::client>(sender, copt);

  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < o.client_threads; ++i) {
    threads.emplace_back([&io] { io.run(); });
  }
  auto stop_io = [&] {
    work.reset();
    io.stop();
    for (auto& t : threads) {
      t.join();
    }
    threads.clear();
  };

  summary s;
  simulation_result result;
  auto const sim_policy = wandura::retry_policy::interactive();
  std::uint64_t counted_before = 0;
  std::uint64_t held_before = 0;
  wandura::client_stats before{};
  std::uint64_t retries_before = 0;
  item_counts items_before;
  std::unique_ptr<wandura::transport> probe;
  std::optional<std::uint64_t> external_before;
  std::int64_t external_limit = 0;
  try {
    if (in_process && warmup_left < 1.0) {
      auto warm = asio::co_spawn(io, warm_up(*api, *emu, plan.catalogue.front(), limit, warmup_left, emulator_started),
                                 asio::use_future);
      s.warmup_tickets = warm.get();
      s.warmup_left = warmup_left;
    }
    if (in_process) {
      auto const st = emu->stats();
      counted_before = st.tickets_counted;
      held_before = st.held_play;
      s.warmup_counted = counted_before;
      if (o.unavailable > 0) {
        // SPEC §2 "a ticket cannot be issued in time": installed after the warm-up, so only viewers meet it.
        wandura::emulator::fault_rule rule;
        rule.path = "/v1/playback/tickets";
        rule.kind = wandura::emulator::fault_kind::status;
        rule.status = 503;
        rule.retry_after = 1;
        rule.probability = o.unavailable;
        emu->install_faults(std::vector<wandura::emulator::fault_rule>{rule});
      }
    }
    if (!in_process) {
      // Against `wandura emulator` (or any server with the admin API), compare its count too.
      probe = std::make_unique<wandura::transport>(io.get_executor());
      external_before = asio::co_spawn(io, emulator_tickets_counted(*probe, base_url), asio::use_future).get();
      // The organisation's playback limit, for the chart (seed 001: GET /config returns the limits in force).
      try {
        auto const limits = asio::co_spawn(io, api->get_config(), asio::use_future).get();
        external_limit = limits.limit("playback").value_or(0);
      } catch (wandura::error const& e) {
        printer.note(std::string("note: no playback limit for the chart: ") + e.what());
      }
    }
    before = api->stats();
    items_before = sender->counts();
    retries_before = retry_events.load();

    simulation_options sim;
    sim.call.policy = sim_policy;
    sim.on_progress = [&printer](progress const& p) { printer.update(p); };
    sim.retries_so_far = [&] { return retry_events.load() - retries_before; };
    sim.items_so_far = [&sender] { return sender->counts(); };
    if (in_process) {
      sim.server_tickets_counted = [&emu]() -> std::optional<std::uint64_t> { return emu->stats().tickets_counted; };
    }
    auto running = asio::co_spawn(io, run_audience(io.get_executor(), *api, plan, sim), asio::use_future);
    result = running.get();
  } catch (...) {
    printer.finish();
    stop_io();
    throw;
  }
  printer.finish();
  auto const after = api->stats();
  if (probe && external_before) {
    if (auto const external_after =
            asio::co_spawn(io, emulator_tickets_counted(*probe, base_url), asio::use_future).get()) {
      s.emulator_tickets_counted = *external_after - *external_before;
    }
  }
  probe.reset();
  stop_io();
  api.reset();

  s.viewers = result.totals.viewers;
  s.play_requests = result.totals.play_requests;
  s.play_failures = result.totals.play_failures;
  s.play_success_rate = result.totals.play_success_rate;
  s.p50_ms = result.totals.p50_ms;
  s.p95_ms = result.totals.p95_ms;
  s.p99_ms = result.totals.p99_ms;
  s.max_ms = result.totals.max_ms;
  s.tickets_granted = result.totals.tickets_granted;
  s.tickets_fresh = result.totals.tickets_fresh;
  s.tickets_reused = result.totals.tickets_reused;
  s.prefetch_requested = result.totals.prefetch_requested;
  s.prefetch_shed = result.totals.prefetch_shed;
  s.duration_s = result.totals.duration_s;
  s.playback_limit_per_min = in_process ? limit : static_cast<double>(external_limit);
  s.cache_hits = after.metrics.cache_hits - before.metrics.cache_hits;
  s.coalesced = after.metrics.coalesced - before.metrics.coalesced;
  s.retries = retry_events.load() - retries_before; // every retry fires on_retry once (SPEC §3)
  s.budget_denied = after.metrics.budget_denied - before.metrics.budget_denied;
  s.requests = after.metrics.attempts - before.metrics.attempts;
  s.failures_by_reason = result.failures_by_reason;
  s.play_items_sent = sender->counts().play_sent - items_before.play_sent;
  s.play_429 = sender->counts().play_429 - items_before.play_429;
  auto const plays = plan_of_run(plan, s.playback_limit_per_min, in_process, counted_before,
                                 result.started - emulator_started, sim_policy.total_timeout);
  if (in_process) {
    s.play_success_bound = play_success_bound(plays);
  }
  if (o.plan_out) {
    write_play_plan(*o.plan_out, plays);
  }
  bool counts_match = !s.emulator_tickets_counted || *s.emulator_tickets_counted == s.tickets_fresh;
  if (in_process) {
    auto const st = emu->stats();
    s.emulator_tickets_counted = st.tickets_counted - counted_before;
    s.held_play = st.held_play - held_before;
    s.faults_injected = st.faults_injected;
    counts_match = *s.emulator_tickets_counted == s.tickets_fresh && s.warmup_counted == s.warmup_tickets;
    emu->stop();
  }

  auto const json_path = (std::filesystem::path(o.report_dir) / "report.json").string();
  auto const svg_path = (std::filesystem::path(o.report_dir) / "report.svg").string();
  write_report_json(json_path, s, result.samples);
  write_report_svg(svg_path, s, result.samples);
  print_summary(s, result, in_process, after.metrics.calls - before.metrics.calls,
                after.metrics.held_off - before.metrics.held_off, target, json_path, svg_path, warn_lines.load());

  if (!counts_match) {
    std::printf("FAILED: the emulator counted %llu tickets (warm-up %llu) but the demo received %llu fresh (warm-up "
                "%llu)\n",
                static_cast<unsigned long long>(s.emulator_tickets_counted.value_or(0)),
                static_cast<unsigned long long>(s.warmup_counted), static_cast<unsigned long long>(s.tickets_fresh),
                static_cast<unsigned long long>(s.warmup_tickets));
    return 1;
  }
  if (s.play_failures > 0) {
    std::printf("FAILED: %llu of %llu plays would have shown the viewer an error\n",
                static_cast<unsigned long long>(s.play_failures), static_cast<unsigned long long>(s.play_requests));
    return 1;
  }
  std::printf("OK: every play was granted\n");
  return 0;
}

} // namespace
} // namespace demo

int main(int argc, char** argv) {
  CLI::App app("Simulates viewers starting episodes at an evening peak and shows how the SDK keeps playback smooth:\n"
               "prefetch is shed by the server first, plays are retried after Retry-After, repeated starts reuse\n"
               "tickets (docs/demo.md).",
               "smooth_playback");
  wandura::cli::apply_style(app, "Exit status: 0 when every play was granted and, against the emulator, the server "
                                 "counted exactly the fresh\ntickets the demo received; 1 otherwise; 2 for a usage "
                                 "error.");
  demo::demo_options options;
  demo::add_options(app, options);
  if (auto const done = wandura::cli::parse(app, {argv + 1, static_cast<std::size_t>(argc - 1)})) {
    return *done;
  }
  try {
    demo::complete_options(options);
    return demo::run(options);
  } catch (demo::usage_error const& e) {
    return wandura::cli::report_usage_error("smooth_playback", e.what());
  } catch (std::exception const& e) {
    std::fprintf(stderr, "smooth_playback: %s\n", e.what());
    return wandura::cli::exit_failed;
  }
}
