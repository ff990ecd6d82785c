// What the loopback benchmarks share: the nginx they measure against, the plainest libcurl-multi loop as the
// baseline, and medians. Header-only; each benchmark defines WANDURA_NGINX_SCRIPT and WANDURA_BENCH_WORK_DIR.
#pragma once

#include <algorithm>
#include <chrono>
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
#include <curl/curl.h>

namespace wandura::bench {

using clock_type = std::chrono::steady_clock;

/// The ticket batch both sides post (SPEC §1 shape, ~250 bytes): episode 4 as play, 5 and 6 as prefetch.
inline std::string const request_body =
    R"({"episodes":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play"},)"
    R"({"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch"},)"
    R"({"film_ref":"the-heiress-returns","episode_no":6,"intent":"prefetch"}],"union_info":"dev_0a1b2c3d4e5f",)"
    R"("drm_kek":"kek_3b9d0e5a7c1f"})";

/// nginx on loopback started through tests/support/nginx/nginx.sh (it answers every path with the ~2.3 KB ticket
/// batch of tests/support/nginx/response.json); stopped on destruction.
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
  /// `http://127.0.0.1:PORT` (HTTP/1.1 keep-alive), no trailing slash.
  [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + env_.at("WANDURA_NGINX_HTTP_PORT"); }
  [[nodiscard]] std::string url() const { return base_url() + "/v1/playback/tickets"; }

private:
  std::map<std::string, std::string> env_;
};

/// CPU time this process (all its threads; not the server) has used so far, in seconds.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct run_result {
  std::uint64_t ok = 0;
  std::uint64_t failed = 0;
  double seconds = 0;
  double cpu_seconds = 0; ///< the client's CPU time during the run (less sensitive to other jobs than the rate)
  [[nodiscard]] double rate() const { return static_cast<double>(ok) / seconds; }
  /// Client CPU microseconds per good answer.
  [[nodiscard]] double cpu_us_per_request() const { return ok == 0 ? 0 : cpu_seconds * 1e6 / static_cast<double>(ok); }
};

/// Runs `concurrency` coroutines on `io` (one thread: this one), each awaiting `one_request()` (an
/// `asio::awaitable<bool>`, true when the answer was good) back to back until `duration` has passed.
template <class OneRequest>
run_result run_coroutines(asio::io_context& io, int concurrency, std::chrono::duration<double> duration,
                          OneRequest one_request) {
  run_result result;
  auto const cpu_start = process_cpu_seconds();
  auto const start = clock_type::now();
  auto const end = start + std::chrono::duration_cast<clock_type::duration>(duration);
  for (int i = 0; i < concurrency; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (clock_type::now() < end) {
            bool const good = co_await one_request();
            ++(good ? result.ok : result.failed);
          }
        },
        asio::detached);
  }
  io.restart();
  io.run();
  result.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  result.cpu_seconds = process_cpu_seconds() - cpu_start;
  return result;
}

namespace detail {
struct raw_transfer {
  CURL* easy = nullptr;
  std::string body;
};
inline std::size_t raw_write(char* data, std::size_t size, std::size_t count, void* userp) {
  static_cast<raw_transfer*>(userp)->body.append(data, size * count);
  return size * count;
}
} // namespace detail

/// The baseline: `concurrency` easy handles posting `request_body` to `url` with curl_multi_perform +
/// curl_multi_poll, each re-added as it finishes, for `duration`. A transfer counts as ok when it answered 200 with
/// at least `min_body` bytes. Besides `Authorization` and `Content-Type` it sends `extra_headers` (whole lines,
/// "Name: value"), so that both sides of a comparison put the same bytes on the wire.
inline run_result run_raw_curl(std::string const& url, int concurrency, std::chrono::duration<double> duration,
                               std::vector<std::string> const& extra_headers = {}, std::size_t min_body = 2000) {
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Authorization: Bearer bench-key");
  headers = curl_slist_append(headers, "Content-Type: application/json");
  for (auto const& line : extra_headers) {
    headers = curl_slist_append(headers, line.c_str());
  }
  std::vector<detail::raw_transfer> transfers(static_cast<std::size_t>(concurrency));
  for (auto& t : transfers) {
    t.easy = curl_easy_init();
    curl_easy_setopt(t.easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDS, request_body.data());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request_body.size()));
    curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(t.easy, CURLOPT_WRITEFUNCTION, &detail::raw_write);
    curl_easy_setopt(t.easy, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(t.easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t.easy, CURLOPT_TIMEOUT_MS, 8000L);
    curl_multi_add_handle(multi, t.easy);
  }
  run_result result;
  auto const cpu_start = process_cpu_seconds();
  auto const start = clock_type::now();
  auto const end = start + std::chrono::duration_cast<clock_type::duration>(duration);
  int running = concurrency;
  while (running > 0) {
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) {
        continue;
      }
      detail::raw_transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      long status = 0;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
      if (msg->data.result == CURLE_OK && status == 200 && t->body.size() >= min_body) {
        ++result.ok;
      } else {
        ++result.failed;
      }
      curl_multi_remove_handle(multi, t->easy);
      t->body.clear();
      if (clock_type::now() < end) {
        curl_multi_add_handle(multi, t->easy);
        ++running;
      }
    }
    if (running > 0) {
      curl_multi_poll(multi, nullptr, 0, 100, nullptr);
    }
  }
  result.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  result.cpu_seconds = process_cpu_seconds() - cpu_start;
  for (auto& t : transfers) {
    curl_easy_cleanup(t.easy);
  }
  curl_slist_free_all(headers);
  curl_multi_cleanup(multi);
  return result;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto const n = v.size();
  return n == 0 ? 0 : (n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/// Medians of `rounds` runs of two sides measured alternately (which goes first alternates too, so that drift on
/// a shared machine hits both alike), after one short warm-up run of each.
struct side_by_side {
  double ours = 0;     ///< median rate of `run_ours`
  double baseline = 0; ///< median rate of `run_baseline`
  std::uint64_t failures = 0;
  [[nodiscard]] double ratio() const { return baseline > 0 ? ours / baseline : 0; }
};

/// @param run_ours, run_baseline callables `run_result(std::chrono::duration<double>)`.
template <class Ours, class Baseline>
side_by_side measure_alternately(int rounds, std::chrono::duration<double> duration, Ours run_ours,
                                 Baseline run_baseline) {
  run_ours(std::chrono::duration<double>(0.2)); // warm connections
  run_baseline(std::chrono::duration<double>(0.2));
  std::vector<double> ours;
  std::vector<double> baseline;
  side_by_side out;
  for (int r = 0; r < rounds; ++r) {
    run_result a;
    run_result b;
    if (r % 2 == 0) {
      a = run_ours(duration);
      b = run_baseline(duration);
    } else {
      b = run_baseline(duration);
      a = run_ours(duration);
    }
    ours.push_back(a.rate());
    baseline.push_back(b.rate());
    out.failures += a.failed + b.failed;
  }
  out.ours = median(ours);
  out.baseline = median(baseline);
  return out;
}

/// The command line both loopback benchmarks take.
struct bench_args {
  int rounds = 11;      ///< alternating runs per side (many short ones: drift on a shared machine is large)
  double seconds = 0.5; ///< length of one run
  std::string only;     ///< with `--only SIDE`: run that side alone, for profiling (perf, strace -c)
  int only_concurrency = 64;
};

/// Reads `[--quick] [--rounds N] [--duration S] [--only SIDE --concurrency C]`; prints the usage (naming `ours`,
/// e.g. "transport") and returns nullopt for anything else.
inline std::optional<bench_args> read_args(int argc, char** argv, char const* ours) {
  bench_args out;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--quick") {
      out.rounds = 5;
      out.seconds = 0.3;
    } else if (a == "--rounds" && i + 1 < argc) {
      out.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--duration" && i + 1 < argc) {
      out.seconds = std::max(0.1, std::atof(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      out.only = argv[++i];
    } else if (a == "--concurrency" && i + 1 < argc) {
      out.only_concurrency = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rounds N] [--duration S] [--only %s|raw --concurrency C]\n", argv[0],
                   ours);
      return std::nullopt;
    }
  }
  return out;
}

/// What both loopback benchmarks do with their two sides. With `only` set ("raw" or our side's name) runs that
/// side alone once at `only_concurrency` and prints its rate and CPU per request, for profiling. Otherwise, for
/// concurrency 1, 16 and 64, measures both alternately and prints one line each:
/// `NAME c=C: ratio=R (OURS N UNIT/s, raw N req/s, medians of ...)`. Returns the exit status: 1 if any request
/// failed.
/// @param run_ours, run_raw callables `run_result(int concurrency, std::chrono::duration<double>)`.
template <class Ours, class Raw>
int compare_with_raw(char const* name, char const* ours_label, char const* ours_unit, bench_args const& args,
                     Ours run_ours, Raw run_raw) {
  std::chrono::duration<double> const duration(args.seconds);
  if (!args.only.empty()) {
    auto const r =
        args.only == "raw" ? run_raw(args.only_concurrency, duration) : run_ours(args.only_concurrency, duration);
    std::printf("%s c=%d: %.0f req/s, %.2f us CPU per request (%llu failed)\n", args.only.c_str(),
                args.only_concurrency, r.rate(), r.cpu_us_per_request(), static_cast<unsigned long long>(r.failed));
    return 0;
  }
  int status = 0;
  for (int concurrency : {1, 16, 64}) {
    auto const m = measure_alternately(
        args.rounds, duration, [&](auto d) { return run_ours(concurrency, d); },
        [&](auto d) { return run_raw(concurrency, d); });
    std::printf("%s c=%d: ratio=%.2f (%s %.0f %s/s, raw %.0f req/s, medians of %d alternating %.1f s runs%s)\n", name,
                concurrency, m.ratio(), ours_label, m.ours, ours_unit, m.baseline, args.rounds, args.seconds,
                m.failures != 0 ? ", SOME REQUESTS FAILED" : "");
    std::fflush(stdout);
    if (m.failures != 0) {
      status = 1;
    }
  }
  return status;
}

} // namespace wandura::bench
