// issue_tickets_vs_raw_curl: logical ticket calls per second of `wandura::client::issue_tickets` against the plain
// libcurl-multi loop (curl_multi_perform + curl_multi_poll) posting the same ~250-byte batch to the same nginx on
// loopback, which answers every request with a realistic ~2.3 KB batch (two tickets, then a prefetch past the film's
// last released episode: 404 not_ready; tests/support/nginx/response.json).
//
// The client does everything a real call does: validates and writes the body, makes an idempotency key
// (RAND_bytes), runs the retry engine (budget, hold-off check, attempt timeout), sends through its transport and
// reads every item with simdjson into typed values. Ticket reuse and coalescing are off, so every call is a request.
// Both sides run alternately, `rounds` times, `duration` seconds each, one client thread; the ratio is
// median(client) / median(raw) (higher is better). Over HTTP/1.1 keep-alive (plain and TLS) and HTTP/2 with TLS,
// the certificate verified on both sides; wrk or h2load against the same nginx gives the loopback ceiling.
//
//   bench_issue_tickets [--quick] [--rounds N] [--duration S] [--protocol plain|tls-h1|tls-h2]
//                       [--only client|raw|ceiling --concurrency C]
//
// The client's io_context is made for the one thread that runs it (concurrency hint 1); with
// WANDURA_BENCH_DEFAULT_HINT set in the environment, with Asio's default (every call's work then runs on a strand of
// its own).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "../common/compare_with_raw.hpp"
#include "playback/request_writer.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/transport/transport.hpp"

namespace {

using wandura::bench::outcome;
using wandura::bench::protocol;
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

/// A client over a transport of its own for one protocol; the transport is held here too, to count the
/// connections it opens and to ask which HTTP version its connections speak.
struct client_side {
  protocol wire;
  std::shared_ptr<wandura::transport> transport;
  wandura::client api;
  wandura::http_request probe; ///< a request to the same endpoint, sent through the same transport after each run
};

/// One call: good when its three items were read as the server answered them (granted, granted, not_ready); a
/// failure's words go to `out.first_failure` (the first one of the run). The answer moves no admission gate (no 429,
/// no shed), so every call sends all three episodes, the raw loop's body: an item the client did not send comes back
/// `shed` or `deferred`, never `not_ready`, and fails the call. A libcurl 7.x HTTP/2 stream error is retried by the
/// client: it shows in the client's retry count, not here.
asio::awaitable<outcome> call_one(wandura::client& api, wandura::ticket_batch const& batch, run_result& out) {
  std::string failure;
  try {
    auto r = co_await api.issue_tickets(batch);
    if (r.items.size() == 3 && r.items[0].outcome == wandura::item_outcome::granted &&
        r.items[1].outcome == wandura::item_outcome::granted &&
        r.items[2].outcome == wandura::item_outcome::not_ready && r.items[2].status == 404) {
      co_return outcome::good;
    }
    failure = "the answer was read as";
    for (auto const& item : r.items) {
      failure.append(" ").append(wandura::to_string(item.outcome)).append(" ").append(std::to_string(item.status));
    }
    failure += ", not granted 200, granted 200, not_ready 404";
  } catch (wandura::error const& e) {
    failure = e.what();
  }
  if (out.first_failure.empty()) {
    out.first_failure = failure;
  }
  co_return outcome::failed;
}

/// Runs `concurrency` coroutines calling `issue_tickets`. The client does not show a call's HTTP version: after the
/// run (untimed), one request through the same transport, reusing the connections of the run, reports it; the
/// connections opened are the transport's.
run_result run_client(client_side& side, asio::io_context& io, int concurrency,
                      std::chrono::duration<double> duration) {
  auto const batch = bench_batch();
  auto const connections_before = side.transport->stats().connections_opened;
  auto result = wandura::bench::run_coroutines(io, concurrency, duration,
                                               [&](run_result& out) { return call_one(side.api, batch, out); });
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto r = co_await side.transport->send_attempt(side.probe, {});
        if (!r.error && r.response.status == 200) {
          result.wire.count_version(r.response.http_version);
        }
      },
      asio::detached);
  io.restart();
  io.run();
  result.wire.connections_opened = side.transport->stats().connections_opened - connections_before;
  return result;
}

} // namespace

int main(int argc, char** argv) {
  auto const args = wandura::bench::read_args(argc, argv, "issue_tickets");
  if (!args) {
    return 2;
  }
  wandura::bench::ignore_sigpipe();
  try {
    std::string written;
    if (wandura::detail::write_ticket_batch(bench_batch(), written) || written != wandura::bench::request_body) {
      std::fprintf(stderr, "bench_issue_tickets: the client would not post the baseline's bytes:\n%s\n",
                   written.c_str());
      return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    wandura::bench::nginx_server nginx;
    // Run by this thread alone, and made so (bench/README.md, "One thread, or several").
    asio::io_context io(wandura::bench::io_concurrency_hint());
    wandura::transport_options transport_options;
    transport_options.max_connections_per_host = 64; // the raw loop uses the same limit
    transport_options.ca_bundle = nginx.ca_file();   // verification stays on, as on the raw side
    // The client sends Accept, an Idempotency-Key (32 hex characters) and its transport's User-Agent besides
    // Authorization and Content-Type: the raw loop and the load generator send the same lines, so that libcurl and
    // nginx handle the same bytes on every side. The raw loop gives each request a key of its own of the same
    // length (a counter: making random keys is client work), so that over HTTP/2 its keys are not sent as an
    // index into HPACK's table while the client's are sent in full; the load generator sends the one below.
    wandura::bench::comparison const what{"issue_tickets_vs_raw_curl",
                                          "issue_tickets",
                                          "calls/s",
                                          {"Accept: application/json",
                                           "Idempotency-Key: 0123456789abcdef0123456789abcdef",
                                           "User-Agent: " + transport_options.user_agent}};
    std::vector<std::shared_ptr<client_side>> sides;
    // One client per protocol, over a transport built with the options the client would give its own (the
    // client's constructor taking a sender runs the same code), kept for that protocol's rows.
    int const status = wandura::bench::compare_with_raw(what, *args, nginx, [&](protocol p) {
      wandura::client_options options;
      options.base_url = nginx.base_url(p);
      options.api_key = "bench-key";
      options.reuse_tickets = false;
      options.coalesce = false;
      // Every call is counted in the retry budget; none fails, so the budget never decides anything here.
      auto tr = std::make_shared<wandura::transport>(io.get_executor(), transport_options);
      wandura::http_request probe;
      probe.method = wandura::http_method::post;
      probe.url = nginx.url(p);
      probe.body = wandura::bench::request_body;
      auto side = std::shared_ptr<client_side>(new client_side{p, tr, wandura::client(tr, options), std::move(probe)});
      sides.push_back(side);
      return wandura::bench::side_runner(
          [&io, side](int c, std::chrono::duration<double> d) { return run_client(*side, io, c, d); });
    });
    // Retried calls count as good (the caller got its tickets), but each retry is a failed attempt: say how many.
    for (auto const& side : sides) {
      auto const st = side->api.stats();
      auto const word = wandura::bench::row_word(side->wire);
      std::printf("issue_tickets%s%s: %llu calls, %llu attempts, %llu retries\n", word.empty() ? "" : " ",
                  std::string(word).c_str(), static_cast<unsigned long long>(st.metrics.calls),
                  static_cast<unsigned long long>(st.metrics.attempts),
                  static_cast<unsigned long long>(st.metrics.retries));
    }
    return status;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_issue_tickets: %s\n", e.what());
    return 1;
  }
}
