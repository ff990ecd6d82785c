// transport_vs_raw_curl: requests per second of wandura::transport (one CURLM driven by Asio through
// curl_multi_socket_action, completions posted to coroutines) against the plainest libcurl loop there is
// (curl_multi_perform + curl_multi_poll, re-adding each easy handle as it finishes), both posting the same ~150-byte
// JSON body to the same nginx on loopback that answers with a ~2.3 KB JSON body, over HTTP/1.1 keep-alive.
//
// For each concurrency (1, 16, 64) the two run alternately, `rounds` times each, `duration` seconds a run, one
// client thread each; the ratio is median(transport) / median(raw) throughput (higher is better, 1.0 = parity).
// Afterwards the peak RSS growth of the transport with 1,000 requests in flight is reported per request.
//
//   bench_transport [--quick] [--rounds N] [--duration S] [--only transport|raw --concurrency C]
// (--only runs one side for one concurrency, for profiling: perf, strace -c.)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <curl/curl.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "wandura/transport/transport.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

std::string const request_body = R"({"viewer_ref":"vr_3b9d0e5a7c1f","device_id":"dev_0a1b2c3d4e5f",)"
                                 R"("items":[{"film_ref":"film_8f3a2c","episode":1,"intent":"play"}]})";

/// nginx started through the test script; stopped on destruction.
class nginx_server {
public:
  nginx_server() {
    std::string cmd = std::string(WANDURA_NGINX_SCRIPT) + " start " + WANDURA_BENCH_WORK_DIR + " 1 >/dev/null";
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
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + env_.at("WANDURA_NGINX_HTTP_PORT") + "/v1/playback/tickets";
  }

private:
  std::map<std::string, std::string> env_;
};

long status_kib(char const* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      return std::atol(line.c_str() + std::char_traits<char>::length(field));
    }
  }
  return 0;
}

void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5"; // resets VmHWM to the current RSS (Linux >= 4.0)
}

// --- the transport ---------------------------------------------------------------------------------------------

struct run_result {
  std::uint64_t ok = 0;
  std::uint64_t failed = 0;
  double seconds = 0;
  [[nodiscard]] double rate() const { return static_cast<double>(ok) / seconds; }
};

run_result run_transport(wandura::transport& tr, asio::io_context& io, wandura::http_request const& request,
                         int concurrency, std::chrono::duration<double> duration) {
  run_result result;
  auto const start = clock_type::now();
  auto const end = start + std::chrono::duration_cast<clock_type::duration>(duration);
  for (int i = 0; i < concurrency; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (clock_type::now() < end) {
            auto r = co_await tr.send_attempt(request, {});
            if (!r.error && r.response.status == 200 && r.response.body.size() > 2000) {
              ++result.ok;
            } else {
              ++result.failed;
            }
          }
        },
        asio::detached);
  }
  io.restart();
  io.run();
  result.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return result;
}

// --- the plain libcurl loop --------------------------------------------------------------------------------------

struct raw_transfer {
  CURL* easy = nullptr;
  std::string body;
};

std::size_t raw_write(char* data, std::size_t size, std::size_t count, void* userp) {
  static_cast<raw_transfer*>(userp)->body.append(data, size * count);
  return size * count;
}

run_result run_raw(std::string const& url, int concurrency, std::chrono::duration<double> duration) {
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Authorization: Bearer bench-key");
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  std::vector<raw_transfer> transfers(static_cast<std::size_t>(concurrency));
  for (auto& t : transfers) {
    t.easy = curl_easy_init();
    curl_easy_setopt(t.easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDS, request_body.data());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request_body.size()));
    curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(t.easy, CURLOPT_WRITEFUNCTION, &raw_write);
    curl_easy_setopt(t.easy, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(t.easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t.easy, CURLOPT_TIMEOUT_MS, 8000L);
    curl_multi_add_handle(multi, t.easy);
  }
  run_result result;
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
      raw_transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      long status = 0;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
      if (msg->data.result == CURLE_OK && status == 200 && t->body.size() > 2000) {
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
  for (auto& t : transfers) {
    curl_easy_cleanup(t.easy);
  }
  curl_slist_free_all(headers);
  curl_multi_cleanup(multi);
  return result;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto const n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

int main(int argc, char** argv) {
  // Many short alternating runs: the machine is shared, and drift over a few seconds is larger than the effect.
  int rounds = 11;
  double seconds = 0.5;
  std::string only;
  int only_concurrency = 16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      rounds = 5;
      seconds = 0.3;
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--concurrency" && i + 1 < argc) {
      only_concurrency = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--duration" && i + 1 < argc) {
      seconds = std::max(0.1, std::atof(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rounds N] [--duration S]\n", argv[0]);
      return 2;
    }
  }
  try {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    nginx_server nginx;
    wandura::http_request request;
    request.method = wandura::http_method::post;
    request.url = nginx.url();
    request.headers = {{"Authorization", "Bearer bench-key"}, {"Content-Type", "application/json"}};
    request.body = request_body;
    std::chrono::duration<double> const duration(seconds);

    asio::io_context io;
    wandura::transport_options options;
    options.max_connections_per_host = 64; // the raw loop uses the same limit
    wandura::transport tr(io.get_executor(), options);
    if (!only.empty()) {
      auto r = only == "raw" ? run_raw(request.url, only_concurrency, duration)
                             : run_transport(tr, io, request, only_concurrency, duration);
      std::printf("%s c=%d: %.0f req/s (%llu failed)\n", only.c_str(), only_concurrency, r.rate(),
                  static_cast<unsigned long long>(r.failed));
      return 0;
    }
    int status = 0;
    for (int concurrency : {1, 16, 64}) {
      run_transport(tr, io, request, concurrency, std::chrono::duration<double>(0.2)); // warm connections
      run_raw(request.url, concurrency, std::chrono::duration<double>(0.2));
      std::vector<double> transport_rates;
      std::vector<double> raw_rates;
      std::uint64_t failures = 0;
      for (int r = 0; r < rounds; ++r) {
        // Alternate which goes first, so that drift on the shared machine hits both alike.
        if (r % 2 == 0) {
          auto t = run_transport(tr, io, request, concurrency, duration);
          auto w = run_raw(request.url, concurrency, duration);
          transport_rates.push_back(t.rate());
          raw_rates.push_back(w.rate());
          failures += t.failed + w.failed;
        } else {
          auto w = run_raw(request.url, concurrency, duration);
          auto t = run_transport(tr, io, request, concurrency, duration);
          transport_rates.push_back(t.rate());
          raw_rates.push_back(w.rate());
          failures += t.failed + w.failed;
        }
      }
      double const t_med = median(transport_rates);
      double const w_med = median(raw_rates);
      std::printf("transport_vs_raw_curl c=%d: ratio=%.2f (transport %.0f req/s, raw %.0f req/s, medians of %d "
                  "alternating %.1f s runs%s)\n",
                  concurrency, t_med / w_med, t_med, w_med, rounds, seconds,
                  failures != 0 ? ", SOME REQUESTS FAILED" : "");
      std::fflush(stdout);
      if (failures != 0) {
        status = 1;
      }
    }

    // Peak RSS per in-flight request: 1,000 requests started at once (64 connections, the rest waiting inside
    // libcurl), against the RSS of the warmed-up process.
    {
      constexpr int in_flight = 1000;
      wandura::transport big(io.get_executor(), options);
      run_transport(big, io, request, 64, std::chrono::duration<double>(0.2));
      reset_peak_rss();
      long const before = status_kib("VmRSS:");
      std::atomic<int> done{0};
      for (int i = 0; i < in_flight; ++i) {
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
              co_await big.send_attempt(request, {});
              ++done;
            },
            asio::detached);
      }
      io.restart();
      io.run();
      long const peak = status_kib("VmHWM:");
      std::printf("transport_peak_rss c=%d: %.1f KiB per in-flight request (RSS %ld KiB before, peak %ld KiB, "
                  "%d completed)\n",
                  in_flight, static_cast<double>(peak - before) / in_flight, before, peak, done.load());
    }
    return status;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_transport: %s\n", e.what());
    return 1;
  }
}
