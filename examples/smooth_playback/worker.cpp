#include "worker.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include "client_session.hpp"
#include "fleet_route.hpp"
#include "log_line.hpp"
#include "worker_process.hpp"
#include "worker_report.hpp"

namespace demo {
namespace {

/// The lines to the parent, on fd 3. Writes of whole lines, from any thread.
class parent_channel {
public:
  /// Sends `kind`, a space and `text` (newlines replaced by spaces) as one line. False when the parent is gone.
  bool send(std::string_view kind, std::string_view text = {}) {
    std::string line(kind);
    if (!text.empty()) {
      line += ' ';
      for (char const c : text) {
        line += c == '\n' || c == '\r' ? ' ' : c;
      }
    }
    line += '\n';
    std::lock_guard lock(mutex_);
    std::size_t done = 0;
    while (done < line.size()) {
      auto const n = ::write(worker_report_fd, line.data() + done, line.size() - done);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

private:
  std::mutex mutex_;
};

/// The run's time 0 from the parent's `start <nanoseconds of steady_clock>` line. @throws std::runtime_error at
/// end of input (the parent gave up) or for another line.
std::chrono::steady_clock::time_point read_start() {
  std::string line;
  if (!std::getline(std::cin, line)) {
    throw std::runtime_error("the parent closed the pipe before the start");
  }
  std::string_view const prefix = "start ";
  if (!line.starts_with(prefix)) {
    throw std::runtime_error("expected a start line, got \"" + line + "\"");
  }
  auto const ns = std::stoll(line.substr(prefix.size()));
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

} // namespace

int run_worker(demo_options const& o) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::signal(SIGPIPE, SIG_IGN);
  if (::getppid() == 1) {
    return 1; // the parent died before the line above
  }
  unsigned const index = *o.worker;
  parent_channel parent;
  try {
    run_plan const rp = make_run_plan(o);
    client_session_options copt;
    copt.base_url = *o.base_url;
    copt.api_key = *o.api_key;
    copt.threads = o.client_threads;
    copt.shared_state = o.shared_state;
    copt.process_id = "worker-" + std::to_string(index);
    copt.on_log = [&parent](wandura::log_level level, std::string_view message) {
      parent.send("log", std::string(level_name(level)) + " " + std::string(message));
    };
    client_session session(std::move(copt));
    parent.send("ready");

    simulation_options sim;
    sim.call.policy = wandura::retry_policy::interactive();
    sim.start_at = read_start();
    sim.runs_step = [seed = o.seed, index, n = o.processes](viewer_plan const& v, std::size_t step) {
      return process_of_action(seed, v.id, step, n) == index;
    };
    sim.on_progress = [&parent](progress const& p) {
      char line[160];
      std::snprintf(line, sizeof line, "%llu %llu %llu %llu %.1f", static_cast<unsigned long long>(p.plays_done),
                    static_cast<unsigned long long>(p.play_failures), static_cast<unsigned long long>(p.retries),
                    static_cast<unsigned long long>(p.shed), p.tickets_per_s);
      parent.send("progress", line);
    };
    auto const run = session.play(rp.plan, std::move(sim));
    if (!parent.send("report", worker_report_json(run))) {
      std::fprintf(stderr, "smooth_playback worker %u: the parent is gone\n", index);
      return 1;
    }
    return 0;
  } catch (std::exception const& e) {
    if (!parent.send("error", e.what())) {
      std::fprintf(stderr, "smooth_playback worker %u: %s\n", index, e.what());
    }
    return 1;
  }
}

} // namespace demo
