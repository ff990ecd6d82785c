// transport_vs_raw_curl: requests per second of wandura::transport (one CURLM driven by Asio through
// curl_multi_socket_action, completions posted to coroutines) against the plainest libcurl loop there is
// (curl_multi_perform + curl_multi_poll, re-adding each easy handle as it finishes), both posting the same ~250-byte
// JSON body to the same nginx on loopback that answers with a ~2.3 KB JSON body: over HTTP/1.1 keep-alive (plain
// and TLS) and over HTTP/2 with TLS, with the certificate verified on both sides.
//
// For each protocol and concurrency the two run alternately, `rounds` times each, `duration` seconds a run, one
// client thread each; the ratio is median(transport) / median(raw) throughput (higher is better, 1.0 = parity).
// wrk or h2load against the same nginx gives the loopback ceiling beside them. Afterwards the peak RSS growth of
// the transport with 1,000 requests in flight is reported per request.
//
//   bench_transport [--quick] [--rounds N] [--duration S] [--protocol plain|tls-h1|tls-h2]
//                   [--only transport|raw|ceiling --concurrency C]
// (--only runs one side for one concurrency, for profiling: perf, strace -c, callgrind.)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "../common/compare_with_raw.hpp"
#include "wandura/error.hpp"
#include "wandura/transport/transport.hpp"

namespace {

using wandura::bench::nginx_server;
using wandura::bench::outcome;
using wandura::bench::protocol;
using wandura::bench::request_body;
using wandura::bench::run_result;

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

/// The POST both sides send (the raw loop adds the transport's User-Agent line itself). `Accept` is libcurl's default,
/// which the raw loop would add by itself and the transport does not add.
wandura::http_request ticket_request(std::string url) {
  wandura::http_request request;
  request.method = wandura::http_method::post;
  request.url = std::move(url);
  request.headers = {{"Authorization", "Bearer bench-key"}, {"Content-Type", "application/json"}, {"Accept", "*/*"}};
  request.body = request_body;
  return request;
}

/// One request through `tr`: good when it answered 200 with the whole batch, then counted by its HTTP version in
/// `seen`; a failure's words go to `out.first_failure` (the first one of the run).
asio::awaitable<outcome> send_one(wandura::transport& tr, wandura::http_request const& request,
                                  wandura::bench::wire_seen& seen, run_result& out) {
  auto r = co_await tr.send_attempt(request, {});
  if (!r.error && r.response.status == 200 && r.response.body.size() > 2000) {
    seen.count_version(r.response.http_version);
    co_return outcome::good;
  }
  if (r.error == wandura::errc::connection_reset && r.detail.find("HTTP/2") != std::string::npos) {
    co_return outcome::stream_reset; // libcurl 7.x's HTTP/2 stream error, as the transport reports it
  }
  if (out.first_failure.empty()) {
    out.first_failure = r.error ? r.error.message() + " (" + r.detail + ")"
                                : "HTTP " + std::to_string(r.response.status) + ", " +
                                      std::to_string(r.response.body.size()) + " bytes";
  }
  co_return outcome::failed;
}

/// Runs `concurrency` coroutines sending `request` through `tr`; counts the good answers by HTTP version and the
/// connections the transport opened meanwhile.
run_result run_transport(wandura::transport& tr, asio::io_context& io, wandura::http_request const& request,
                         int concurrency, std::chrono::duration<double> duration) {
  wandura::bench::wire_seen seen;
  auto const connections_before = tr.stats().connections_opened;
  auto result = wandura::bench::run_coroutines(io, concurrency, duration,
                                               [&](run_result& out) { return send_one(tr, request, seen, out); });
  seen.connections_opened = tr.stats().connections_opened - connections_before;
  result.wire = seen;
  return result;
}

} // namespace

int main(int argc, char** argv) {
  auto const args = wandura::bench::read_args(argc, argv, "transport");
  if (!args) {
    return 2;
  }
  wandura::bench::ignore_sigpipe();
  try {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    nginx_server nginx;
    asio::io_context io(wandura::bench::io_concurrency_hint()); // run by this thread alone, and made so
    wandura::transport_options options;
    options.max_connections_per_host = 64; // the raw loop uses the same limit
    options.ca_bundle = nginx.ca_file();   // verification stays on, as on the raw side
    // The transport sends its User-Agent with every request; the raw loop and the load generator send the same
    // lines, so that libcurl and nginx handle the same bytes on every side.
    wandura::bench::comparison const what{
        "transport_vs_raw_curl", "transport", "req/s", {"Accept: */*", "User-Agent: " + options.user_agent}};
    // One transport per protocol, kept for that protocol's rows (its connections stay open between runs, as the
    // raw loop's do).
    int const status = wandura::bench::compare_with_raw(what, *args, nginx, [&](protocol p) {
      auto tr = std::make_shared<wandura::transport>(io.get_executor(), options);
      auto request = std::make_shared<wandura::http_request const>(ticket_request(nginx.url(p)));
      return wandura::bench::side_runner([&io, tr, request](int c, std::chrono::duration<double> d) {
        return run_transport(*tr, io, *request, c, d);
      });
    });
    if (!args->only.empty() || args->only_protocol) {
      return status;
    }
    auto const request = ticket_request(nginx.url());

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
