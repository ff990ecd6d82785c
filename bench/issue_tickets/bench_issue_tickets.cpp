// issue_tickets_vs_raw_curl: logical ticket calls per second of `wandura::client::issue_tickets` against the plain
// libcurl-multi loop (curl_multi_perform + curl_multi_poll) posting the same ~250-byte batch to the same nginx on
// loopback, which answers every request with a realistic ~2.3 KB batch (two tickets and a shed prefetch,
// tests/support/nginx/response.json).
//
// The client does everything a real call does: validates and writes the body, makes an idempotency key
// (RAND_bytes), runs the retry engine (budget, hold-off check, attempt timeout), sends through its transport and
// reads every item with simdjson into typed values. Ticket reuse and coalescing are off, so every call is a request.
// Both sides run alternately, `rounds` times, `duration` seconds each, one client thread; the ratio is
// median(client) / median(raw) (higher is better).
//
//   bench_issue_tickets [--quick] [--rounds N] [--duration S] [--only client|raw --concurrency C]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "../common/loopback_bench.hpp"
#include "playback/request_writer.hpp"
#include "wandura/playback/client.hpp"

namespace {

using wandura::bench::run_result;

wandura::ticket_batch bench_batch() {
  // The same bytes as wandura::bench::request_body (checked in main).
  wandura::ticket_batch batch;
  batch.episodes = {{"the-heiress-returns", 4, wandura::intent::play},
                    {"the-heiress-returns", 5, wandura::intent::prefetch},
                    {"the-heiress-returns", 6, wandura::intent::prefetch}};
  batch.union_info = "dev_0a1b2c3d4e5f";
  batch.drm_kek = "kek_3b9d0e5a7c1f";
  return batch;
}

run_result run_client(wandura::client& api, asio::io_context& io, int concurrency,
                      std::chrono::duration<double> duration) {
  auto const batch = bench_batch();
  return wandura::bench::run_coroutines(io, concurrency, duration, [&]() -> asio::awaitable<bool> {
    try {
      auto r = co_await api.issue_tickets(batch);
      co_return r.items.size() == 3 &&
          r.items[0].outcome == wandura::item_outcome::granted&& r.items[2].outcome == wandura::item_outcome::shed;
    } catch (wandura::error const&) {
      co_return false;
    }
  });
}

} // namespace

int main(int argc, char** argv) {
  auto const args = wandura::bench::read_args(argc, argv, "client");
  if (!args) {
    return 2;
  }
  try {
    std::string written;
    if (wandura::detail::write_ticket_batch(bench_batch(), written) || written != wandura::bench::request_body) {
      std::fprintf(stderr, "bench_issue_tickets: the client would not post the baseline's bytes:\n%s\n",
                   written.c_str());
      return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    wandura::bench::nginx_server nginx;
    asio::io_context io;
    wandura::client_options options;
    options.base_url = nginx.base_url();
    options.api_key = "bench-key";
    options.reuse_tickets = false;
    options.coalesce = false;
    options.transport.max_connections_per_host = 64; // the raw loop uses the same limit
    // Every call is counted in the retry budget; none fails, so the budget never decides anything here.
    wandura::client api(io.get_executor(), options);
    // The client sends Accept, an Idempotency-Key (32 hex characters) and its transport's User-Agent besides
    // Authorization and Content-Type: the raw loop sends the same lines (with one fixed key of the same length:
    // making keys is client work), so that libcurl and nginx handle the same bytes on both sides.
    std::vector<std::string> const raw_headers = {"Accept: application/json",
                                                  "Idempotency-Key: 0123456789abcdef0123456789abcdef",
                                                  "User-Agent: " + options.transport.user_agent};

    int const status = wandura::bench::compare_with_raw(
        "issue_tickets_vs_raw_curl", "issue_tickets", "calls", *args,
        [&](int c, auto d) { return run_client(api, io, c, d); },
        [&](int c, auto d) { return wandura::bench::run_raw_curl(nginx.url(), c, d, raw_headers); });
    if (!args->only.empty()) {
      return status;
    }
    auto const st = api.stats();
    std::printf("issue_tickets: %llu calls, %llu attempts, %llu retries\n",
                static_cast<unsigned long long>(st.metrics.calls), static_cast<unsigned long long>(st.metrics.attempts),
                static_cast<unsigned long long>(st.metrics.retries));
    return status;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_issue_tickets: %s\n", e.what());
    return 1;
  }
}
