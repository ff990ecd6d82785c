#include "fleet_run.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "client_session.hpp"
#include "in_process_emulator.hpp"
#include "interrupt.hpp"
#include "log_line.hpp"
#include "private_redis.hpp"
#include "progress_printer.hpp"
#include "run_report.hpp"
#include "run_totals.hpp"
#include "worker_process.hpp"
#include "worker_report.hpp"

#ifdef WANDURA_DEMO_HAS_FLEET
#include "wandura/fleet/redis_url.hpp"
#endif

namespace demo {
namespace {

using clock_type = std::chrono::steady_clock;

/// The command line of worker `index`: the options that make the plan and the client, the emulator's URL. The API
/// key and the shared state's URL (which may hold a password) go in the environment (`worker_env`), not on a
/// command line others can read.
std::vector<std::string> worker_args(demo_options const& o, run_plan const& rp, std::string const& base_url,
                                     unsigned index) {
  std::vector<std::string> args{"--worker",         std::to_string(index),
                                "--processes",      std::to_string(o.processes),
                                "--base-url",       base_url,
                                "--viewers",        std::to_string(o.viewers),
                                "--duration",       std::to_string(o.duration_s),
                                "--seed",           std::to_string(o.seed),
                                "--playback-limit", std::to_string(rp.limit),
                                "--client-threads", std::to_string(o.client_threads)};
  if (o.catalogue_file) {
    args.insert(args.end(), {"--catalogue", *o.catalogue_file});
  }
  return args;
}

/// The environment a worker gets on top of the parent's: the API key and, with shared state, the Redis URL.
std::vector<std::string> worker_env(std::string const& api_key, std::string const& shared_state) {
  std::vector<std::string> env{"WANDURA_API_KEY=" + api_key};
  if (!shared_state.empty()) {
    env.push_back(std::string(worker_shared_state_env) + "=" + shared_state);
  }
  return env;
}

/// The shared state's URL as the run shows it (fleet line, summary, report.json): the password replaced by `***`
/// (redis_url.hpp: a password never appears).
std::string shown_url(std::string const& url) {
#ifdef WANDURA_DEMO_HAS_FLEET
  return url.empty() ? url : wandura::redis_url::parse(url).redacted_url();
#else
  return url; // empty: --shared-state is a usage error without the fleet layer
#endif
}

/// The parent's view of its workers: reads their lines, prints their log lines and the fleet's progress, keeps
/// their reports, and turns a worker's error or death into an exception.
class fleet_monitor {
public:
  fleet_monitor(std::vector<std::unique_ptr<worker_process>>& workers, progress_printer& printer, audience const& plan,
                bool verbose)
      : workers_(workers), printer_(printer), plan_(plan), warn_shown_(verbose ? UINT64_MAX : 5),
        ready_(workers.size(), false), progress_(workers.size()), reports_(workers.size()) {}

  /// Until every worker said `ready`. @throws std::runtime_error after `limit`.
  void wait_ready(std::chrono::milliseconds limit) {
    auto const until = clock_type::now() + limit;
    while (std::count(ready_.begin(), ready_.end(), true) < static_cast<long>(ready_.size())) {
      if (clock_type::now() >= until) {
        throw std::runtime_error("workers not ready after " + std::to_string(limit.count() / 1000) +
                                 " s (ready: " + std::to_string(std::count(ready_.begin(), ready_.end(), true)) +
                                 " of " + std::to_string(ready_.size()) + ")");
      }
      poll_once(std::chrono::milliseconds(250));
    }
  }

  /// Until every worker sent its report, printing progress from `start`; `tick` is called after each poll.
  /// @throws std::runtime_error at `until`.
  template <typename Tick>
  std::vector<client_run> wait_reports(clock_type::time_point start, clock_type::time_point until, Tick&& tick) {
    start_ = start;
    while (std::any_of(reports_.begin(), reports_.end(), [](auto const& r) { return !r; })) {
      if (clock_type::now() >= until) {
        throw std::runtime_error(
            "the workers did not finish within " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(until - start).count()) +
            " s of the first viewer");
      }
      poll_once(std::chrono::milliseconds(250));
      print_progress();
      tick();
    }
    printer_.finish();
    std::vector<client_run> out;
    for (auto& r : reports_) {
      out.push_back(std::move(*r));
    }
    return out;
  }

private:
  struct worker_progress {
    std::uint64_t plays_done = 0, play_failures = 0, retries = 0, shed = 0;
    double tickets_per_s = 0;
  };

  void poll_once(std::chrono::milliseconds timeout) {
    std::vector<pollfd> fds;
    for (auto const& w : workers_) {
      fds.push_back({w->report_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())); // EINTR on SIGINT, SIGTERM
    throw_if_interrupted();
    for (std::size_t k = 0; k < workers_.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) {
        continue;
      }
      std::vector<std::string> lines;
      bool const open = workers_[k]->read_lines(lines);
      for (auto const& line : lines) {
        handle(k, line);
      }
      if (!open && !reports_[k]) {
        auto const how = workers_[k]->reap(std::chrono::milliseconds(2000));
        throw_if_interrupted(); // Ctrl-C reaches the workers too: the run was interrupted, the worker did not fail
        throw std::runtime_error("worker " + std::to_string(k) + " (pid " + std::to_string(workers_[k]->pid()) +
                                 ") ended without a report: " + how);
      }
    }
  }

  void handle(std::size_t k, std::string const& line) {
    auto const space = line.find(' ');
    std::string const kind = line.substr(0, space);
    std::string const rest = space == std::string::npos ? std::string() : line.substr(space + 1);
    if (kind == "ready") {
      ready_[k] = true;
    } else if (kind == "progress") {
      auto& p = progress_[k];
      unsigned long long a = 0, b = 0, c = 0, d = 0;
      if (std::sscanf(rest.c_str(), "%llu %llu %llu %llu %lf", &a, &b, &c, &d, &p.tickets_per_s) == 5) {
        p.plays_done = a, p.play_failures = b, p.retries = c, p.shed = d;
      }
    } else if (kind == "log") {
      // Each line with its own level; WARN lines (retries, a part of the shared state failing) up to the limit.
      auto const [level, text] = split_level(rest, wandura::log_level::warn);
      std::string const shown =
          std::string(level_name(level)) + " worker " + std::to_string(k) + ": " + std::string(text);
      if (level != wandura::log_level::warn) {
        printer_.note(shown);
      } else if (auto const n = ++warn_lines_; n <= warn_shown_) {
        printer_.note(shown + (n == warn_shown_ ? "  (further WARN lines counted only; --verbose shows them)" : ""));
      }
    } else if (kind == "report") {
      reports_[k] = read_worker_report(rest);
    } else if (kind == "error") {
      throw std::runtime_error("worker " + std::to_string(k) + ": " + rest);
    }
  }

  void print_progress() {
    progress p;
    p.t_s = std::chrono::duration<double>(clock_type::now() - start_).count();
    p.viewers = plan_.viewers.size();
    for (auto const& v : plan_.viewers) {
      p.viewers_started += !v.steps.empty() && v.steps.front().at_s <= p.t_s ? 1U : 0U;
    }
    for (auto const& w : progress_) {
      p.plays_done += w.plays_done;
      p.play_failures += w.play_failures;
      p.retries += w.retries;
      p.shed += w.shed;
      p.tickets_per_s += w.tickets_per_s;
    }
    printer_.update(p);
  }

  std::vector<std::unique_ptr<worker_process>>& workers_;
  progress_printer& printer_;
  audience const& plan_;
  std::uint64_t warn_shown_;
  std::uint64_t warn_lines_ = 0;
  std::vector<bool> ready_;
  std::vector<worker_progress> progress_;
  std::vector<std::optional<client_run>> reports_;
  clock_type::time_point start_;
};

/// How long the workers may take after the first viewer: the last planned step, then each step of the longest
/// viewer's plan at its full play deadline, and a minute to spare.
std::chrono::seconds run_limit(audience const& plan, std::chrono::milliseconds play_deadline) {
  double last = 0;
  std::size_t longest = 1;
  for (auto const& v : plan.viewers) {
    for (auto const& s : v.steps) {
      last = std::max(last, s.at_s);
    }
    longest = std::max(longest, v.steps.size());
  }
  auto const deadline_s = std::chrono::duration<double>(play_deadline).count();
  return std::chrono::seconds(static_cast<long>(last + deadline_s * static_cast<double>(longest) + 60));
}

/// The header's fleet line: how many processes, the shared state, when it will be killed.
void print_fleet_header(demo_options const& o, std::string const& shared_state) {
  std::printf("fleet: %u client processes, each action to one of them (no affinity), shared state %s", o.processes,
              shared_state.empty() ? "none" : shared_state.c_str());
  if (o.kill_shared_state_after_s) {
    std::printf(", killed %g s after the first viewer", *o.kill_shared_state_after_s);
  }
  std::printf("\n");
  std::fflush(stdout);
}

/// Spends the emulator's counter with a client of the parent's, as the single-process run does, then notes the
/// emulator's counts before the viewers and installs the scripted 503s.
void prepare_emulator(demo_options const& o, run_plan const& rp, wandura::emulator::server& emu,
                      std::string const& api_key, server_side& server) {
  if (rp.warmup_left < 1.0) {
    client_session warm({emu.base_url(), api_key, 1, std::nullopt, {}, {}});
    server.warmup_tickets = warm.run(
        warm_up(warm.api(), emu, rp.plan.catalogue.front(), rp.limit, rp.warmup_left, server.emulator_started));
    server.warmup_left = rp.warmup_left;
  }
  auto const st = emu.stats();
  server.counted_before = st.tickets_counted;
  server.held_before = st.held_play;
  script_unavailable(emu, o.unavailable);
}

/// Sends every worker the run's time 0. @throws std::runtime_error naming a worker that is gone.
void send_start(std::vector<std::unique_ptr<worker_process>>& workers, clock_type::time_point start) {
  auto const ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  for (std::size_t k = 0; k < workers.size(); ++k) {
    try {
      workers[k]->send("start " + std::to_string(ns));
    } catch (std::system_error const& e) {
      throw std::runtime_error("worker " + std::to_string(k) + " (pid " + std::to_string(workers[k]->pid()) +
                               ") is gone before the start: " + e.what());
    }
  }
}

/// Reaps the workers (each must have exited 0 after its report) and lists what each did.
/// @throws std::runtime_error for a worker that did not exit 0.
fleet_summary summarise_fleet(demo_options const& o, std::string const& shared_state,
                              std::vector<std::unique_ptr<worker_process>>& workers,
                              std::vector<client_run> const& runs) {
  fleet_summary fleet;
  fleet.processes = o.processes;
  fleet.shared_state = shared_state;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    auto const& r = runs[k];
    auto const how = workers[k]->reap(std::chrono::milliseconds(5000));
    if (how != "exit status 0") {
      throw std::runtime_error("worker " + std::to_string(k) + " sent its report but ended with " + how);
    }
    fleet.per_process.push_back({static_cast<std::uint32_t>(k), workers[k]->pid(), r.sim.totals, r.cross_process_reuse,
                                 r.shared_state_fallbacks});
    fleet.cross_process_reuse += r.cross_process_reuse;
    fleet.shared_state_fallbacks += r.shared_state_fallbacks;
  }
  return fleet;
}

} // namespace

int run_fleet(demo_options const& o) {
  std::signal(SIGPIPE, SIG_IGN); // a worker gone is an error on its pipe, not the parent's death
  catch_interrupts();            // from here on, SIGINT and SIGTERM leave through the destructors below
  run_plan const rp = make_run_plan(o);
  auto const play_deadline = wandura::retry_policy::interactive().total_timeout;

  std::optional<private_redis> redis; // declared before the workers: stopped after them, on error too
  std::string shared_state = o.shared_state.value_or("");
  if (shared_state == "auto") {
    redis.emplace();
    shared_state = redis->url();
  }
  throw_if_interrupted();
  server_side server;
  server.emulator_started = clock_type::now();
  auto emu = start_emulator(o, rp);
  throw_if_interrupted();
  // start_emulator configures the emulator's default organisation: its first key.
  std::string const api_key = wandura::emulator::config{}.orgs.front().keys.front();
  server.target =
      "in-process emulator at " + emu->base_url() + ", " + std::to_string(o.processes) + " client processes";
  server.emulator = emu.get();
  server.playback_limit_per_min = rp.limit;
  print_run_header(o, rp, emu->base_url());
  print_fleet_header(o, shown_url(shared_state));

  std::vector<std::unique_ptr<worker_process>> workers; // killed and reaped when left by an exception
  for (unsigned k = 0; k < o.processes; ++k) {
    workers.push_back(std::make_unique<worker_process>("/proc/self/exe", worker_args(o, rp, emu->base_url(), k),
                                                       worker_env(api_key, shared_state)));
  }
  progress_printer printer(isatty(fileno(stdout)) != 0);
  fleet_monitor monitor(workers, printer, rp.plan, o.verbose);
  monitor.wait_ready(std::chrono::seconds(60));
  prepare_emulator(o, rp, *emu, api_key, server);
  throw_if_interrupted();

  // Time 0 a little ahead, so that every worker has it before the first viewer arrives.
  auto const start = clock_type::now() + std::chrono::milliseconds(100);
  send_start(workers, start);
  std::optional<double> killed_at_s;
  std::optional<clock_type::time_point> kill_at;
  if (o.kill_shared_state_after_s) {
    kill_at = start + std::chrono::duration_cast<clock_type::duration>(
                          std::chrono::duration<double>(*o.kill_shared_state_after_s));
  }
  std::vector<client_run> runs;
  try {
    runs = monitor.wait_reports(start, start + run_limit(rp.plan, play_deadline), [&] {
      if (redis && kill_at && !redis->killed() && clock_type::now() >= *kill_at) {
        redis->kill();
        killed_at_s = std::chrono::duration<double>(clock_type::now() - start).count();
        printer.note("shared state: the private redis-server was killed (SIGKILL) " +
                     std::to_string(std::lround(*killed_at_s)) + " s after the first viewer");
      }
    });
  } catch (...) {
    printer.finish();
    throw;
  }
  for (auto& r : runs) {
    r.sim.started = start;
  }
  auto fleet = summarise_fleet(o, o.shared_state ? shown_url(shared_state) : std::string(), workers, runs);
  fleet.shared_state_killed_at_s = killed_at_s;
  return finish_run(o, rp, combine_runs(runs, rp.plan.viewers.size()), server, &fleet, play_deadline);
}

} // namespace demo
