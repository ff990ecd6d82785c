// What the loopback benchmarks share: the request they post, the nginx they measure against, runs of coroutines
// timed in wall-clock and CPU time, medians and the command line. Header-only; each benchmark defines
// WANDURA_NGINX_SCRIPT and WANDURA_BENCH_WORK_DIR. The baseline is in raw_curl_loop.hpp, the ceiling in
// load_ceiling.hpp, and what the benchmarks do with the three in compare_with_raw.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "cpu_time.hpp"
#include "protocol.hpp"

namespace wandura::bench {

using clock_type = std::chrono::steady_clock;

/// The ticket batch both sides post (SPEC §1 shape, ~250 bytes): episode 4 as play, 5 and 6 as prefetch.
inline std::string const request_body =
    R"({"episodes":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play"},)"
    R"({"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch"},)"
    R"({"film_ref":"the-heiress-returns","episode_no":6,"intent":"prefetch"}],"union_info":"dev_0a1b2c3d4e5f",)"
    R"("drm_kek":"kek_3b9d0e5a7c1f"})";

/// nginx on loopback started through tests/support/nginx/nginx.sh (it answers every path with the ~2.3 KB ticket
/// batch of tests/support/nginx/response.json); stopped on destruction. One port per `protocol`: plain HTTP/1.1,
/// TLS offering only HTTP/1.1 by ALPN, TLS offering HTTP/2 (and HTTP/1.1) by ALPN; a self-signed certificate for
/// 127.0.0.1.
class nginx_server {
public:
  explicit nginx_server(int workers = 1) {
    std::string cmd = std::string(WANDURA_NGINX_SCRIPT) + " start " + WANDURA_BENCH_WORK_DIR + " " +
                      std::to_string(workers) + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("could not start nginx via " WANDURA_NGINX_SCRIPT);
    }
    std::ifstream in(std::string(WANDURA_BENCH_WORK_DIR) + "/nginx.env");
    std::string line;
    while (std::getline(in, line)) {
      if (auto eq = line.find('='); eq != std::string::npos) {
        env_[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
  }
  nginx_server(nginx_server const&) = delete;
  nginx_server& operator=(nginx_server const&) = delete;
  ~nginx_server() {
    std::string cmd = std::string(WANDURA_NGINX_SCRIPT) + " stop " + WANDURA_BENCH_WORK_DIR;
    [[maybe_unused]] int rc = std::system(cmd.c_str());
  }
  /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`, no trailing slash, for a server speaking `p`.
  [[nodiscard]] std::string base_url(protocol p = protocol::plain) const {
    switch (p) {
    case protocol::plain: return "http://127.0.0.1:" + env_.at("WANDURA_NGINX_HTTP_PORT");
    case protocol::tls_h1: return "https://127.0.0.1:" + env_.at("WANDURA_NGINX_HTTPS1_PORT");
    case protocol::tls_h2: return "https://127.0.0.1:" + env_.at("WANDURA_NGINX_HTTPS_PORT");
    }
    throw std::logic_error("unknown protocol");
  }
  /// The ticket endpoint at `base_url(p)`.
  [[nodiscard]] std::string url(protocol p = protocol::plain) const { return base_url(p) + "/v1/playback/tickets"; }
  /// PEM file of the CA to verify the TLS ports with (the self-signed certificate itself).
  [[nodiscard]] std::string const& ca_file() const { return env_.at("WANDURA_NGINX_CA"); }

private:
  std::map<std::string, std::string> env_;
};

/// The concurrency hint of the io_context a benchmark runs its side on: 1, made for the one thread that runs it (as
/// client.hpp advises a service run by one thread: a call's work then needs no strand of its own); Asio's default
/// when WANDURA_BENCH_DEFAULT_HINT is set in the environment, as for a context several threads may run.
inline int io_concurrency_hint() {
  return std::getenv("WANDURA_BENCH_DEFAULT_HINT") != nullptr ? ASIO_CONCURRENCY_HINT_DEFAULT : 1;
}

/// Makes a write to a connection the server has closed fail with EPIPE instead of killing the benchmark: libcurl
/// with CURLOPT_NOSIGNAL (both sides set it) does not ignore SIGPIPE around TLS writes itself. A request that
/// fails so is counted and named like any other failure.
inline void ignore_sigpipe() {
  std::signal(SIGPIPE, SIG_IGN);
}

/// CPU time this process (all its threads; not the server) has used so far, in seconds.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// How one request of a run ended.
enum class outcome {
  good,
  stream_reset, ///< libcurl 7.x's HTTP/2 stream error (see `tolerated_stream_resets`), counted apart
  failed,
};

/// A run's measuring window: from its start until `duration` has passed. Requests still in flight when it closes
/// (the drain) finish untimed and uncounted as answers, on both sides alike: a call retried after a libcurl 7.x HTTP/2
/// stream error waits its policy's backoff (up to 500 ms for `issue_tickets`), and timing the drain made a 0.5 s
/// run's rate depend on whether one of 64 calls was waiting to retry as it ended. Their failures still count.
struct run_window {
  explicit run_window(std::chrono::duration<double> duration)
      : end(start + std::chrono::duration_cast<clock_type::duration>(duration)) {}
  [[nodiscard]] bool open() const { return clock_type::now() < end; }

  clock_type::time_point start = clock_type::now();
  clock_type::time_point end;
  double cpu_start = process_cpu_seconds();
  double thread_cpu_start = thread_cpu_seconds(); ///< of the thread that runs the requests (the event loop's)
};

struct run_result {
  std::uint64_t ok = 0;      ///< good answers that ended inside the window
  std::uint64_t drained = 0; ///< good answers that ended after it (not timed)
  std::uint64_t failed = 0;  ///< failures, the drain's too
  std::uint64_t stream_resets =
      0;                  ///< requests that ended in `outcome::stream_reset` (not in `failed`), the drain's too
  double seconds = 0;     ///< from the window's start to the first request that ended after it closed
  double cpu_seconds = 0; ///< the client's CPU time over the same span (less sensitive to other jobs than the rate)
  double thread_cpu_seconds = 0; ///< the event loop thread's alone over the same span
  wire_seen wire;            ///< what the side was seen doing on the wire: versions of its answers, connections opened
  std::string first_failure; ///< what the first failed request said (empty when none failed)
  bool timed = false;        ///< the window has closed: `seconds` and `cpu_seconds` are set, `ok` counts no more
  [[nodiscard]] double rate() const { return static_cast<double>(ok) / seconds; }
  /// Client CPU microseconds per good answer.
  [[nodiscard]] double cpu_us_per_request() const { return ok == 0 ? 0 : cpu_seconds * 1e6 / static_cast<double>(ok); }

  /// Counts one request that just ended. The first to end after the window closed is counted and closes the timing.
  void count(outcome o, run_window const& w) {
    if (o == outcome::stream_reset) {
      ++stream_resets;
    } else if (o != outcome::good) {
      ++failed;
    } else {
      ++(timed ? drained : ok);
    }
    if (!timed && !w.open()) {
      close(w);
    }
  }
  /// Closes the timing now, if no request ended after the window did (a run that ended early, every side failing).
  void close(run_window const& w) {
    if (!timed) {
      timed = true;
      seconds = std::chrono::duration<double>(clock_type::now() - w.start).count();
      cpu_seconds = process_cpu_seconds() - w.cpu_start;
      thread_cpu_seconds = bench::thread_cpu_seconds() - w.thread_cpu_start;
    }
  }
};

/// Runs `concurrency` coroutines on `io` (one thread: this one), each awaiting `one_request(result)` (an
/// `asio::awaitable<outcome>`; it may note `result.first_failure`) back to back until `duration` has passed, and
/// stops `io` when the last has ended (shared state such as a fleet's Redis connection keeps a read waiting, so
/// `run()` would not return by itself; what is left runs at the next `run()`).
template <class OneRequest>
run_result run_coroutines(asio::io_context& io, int concurrency, std::chrono::duration<double> duration,
                          OneRequest one_request) {
  run_result result;
  run_window const window(duration);
  int running = concurrency;
  for (int i = 0; i < concurrency; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (window.open()) {
            result.count(co_await one_request(result), window);
          }
          if (--running == 0) {
            io.stop();
          }
        },
        asio::detached);
  }
  io.restart();
  io.run();
  result.close(window);
  return result;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto const n = v.size();
  return n == 0 ? 0 : (n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/// The command line both loopback benchmarks take.
struct bench_args {
  int rounds = 11;      ///< alternating runs per side (many short ones: drift on a shared machine is large)
  double seconds = 0.5; ///< length of one run
  int ceiling_runs = 3; ///< runs of the load generator per row, spread over the rounds
  std::optional<protocol> only_protocol; ///< with `--protocol P`: only that protocol's rows (or `--only` run)
  std::string only;                      ///< with `--only SIDE`: run that side alone, for profiling
  int only_concurrency = 64;
};

/// Reads `[--quick] [--rounds N] [--duration S] [--protocol plain|tls-h1|tls-h2] [--only SIDE --concurrency C]`;
/// prints the usage (naming `ours`, e.g. "transport") and returns nullopt for anything else.
inline std::optional<bench_args> read_args(int argc, char** argv, char const* ours) {
  bench_args out;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    bool const has_value = i + 1 < argc;
    if (a == "--quick") {
      out.rounds = 5;
      out.seconds = 0.3;
      out.ceiling_runs = 1;
    } else if (a == "--rounds" && has_value) {
      out.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--duration" && has_value) {
      out.seconds = std::max(0.1, std::atof(argv[++i]));
    } else if (a == "--protocol" && has_value && protocol_from_word(argv[i + 1])) {
      out.only_protocol = protocol_from_word(argv[++i]);
    } else if (a == "--only" && has_value) {
      out.only = argv[++i];
    } else if (a == "--concurrency" && has_value) {
      out.only_concurrency = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--rounds N] [--duration S] [--protocol plain|tls-h1|tls-h2]\n"
                   "       [--only %s|raw|ceiling --concurrency C]\n",
                   argv[0], ours);
      return std::nullopt;
    }
  }
  return out;
}
} // namespace wandura::bench
