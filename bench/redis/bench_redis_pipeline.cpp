// redis_command_cpu: what one Redis command costs this process and the server when many are in flight, as in a busy
// client. 64 coroutines on one io_context share one `wandura::redis_client` (one pipelined connection) to a private
// redis-server on loopback, each awaiting its commands back to back, as the fleet's ticket store does:
//
//   - `MGET` of 3 ticket keys through `redis_client::async_command` (the command machinery alone: initiation,
//     hiredis formatting, the write, the reads, the reply copied out, the completion);
//   - `shared_ticket_cache::get_many` of 3 stored tickets with the near cache off (the machinery, plus keys built,
//     envelopes checked and decoded, the local copy kept);
//   - `shared_ticket_cache::put_many` of 2 fresh tickets (the store script: envelopes encoded, local copy kept, one
//     `EVALSHA` that runs PTTL + SET per ticket on the server).
//
// For each: this thread's CPU per operation (CLOCK_THREAD_CPUTIME_ID: the event loop, nothing else of the process
// runs) and redis-server's CPU per operation (/proc, 10 ms ticks over thousands of operations), medians of several
// runs. No target: the figures say where a Redis-backed call's cost is (docs/adr/0008-fleet-shared-state.md).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include "../common/cpu_time.hpp"
#include "bench_tickets.hpp"
#include "redis_server.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace {

using wandura::bench::identity;
using wandura::bench::process_cpu_seconds_of;
using wandura::bench::thread_cpu_seconds;
using wandura::bench::ticket_json;

constexpr int in_flight = 64;
constexpr int stored_tickets = 3000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// CPU per operation of one run, in microseconds.
struct timed {
  double us_per_op = 0;
  double server_us_per_op = 0;
};

/// Runs `in_flight` coroutines, each awaiting `op(i)` for its share of `ops`; stops `io` when the last ends (the
/// client's read wait keeps `run()` from returning by itself). Counts operations that reported a failure.
timed run(asio::io_context& io, pid_t server, int ops, std::function<asio::awaitable<bool>(int)> const& op,
          int& failures) {
  int running = in_flight;
  int next = 0;
  auto const cpu_start = thread_cpu_seconds();
  auto const server_start = process_cpu_seconds_of(server);
  for (int c = 0; c < in_flight; ++c) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (next < ops) {
            auto step = op(next++); // named: GCC 12 and co_await temporaries
            if (!co_await std::move(step)) {
              ++failures;
            }
          }
          if (--running == 0) {
            io.stop();
          }
        },
        asio::detached);
  }
  io.restart();
  io.run();
  return {1e6 * (thread_cpu_seconds() - cpu_start) / ops, 1e6 * (process_cpu_seconds_of(server) - server_start) / ops};
}

} // namespace

int main(int argc, char** argv) {
  bool const quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 2 || (argc == 2 && !quick)) {
    std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
    return 2;
  }
  int const runs = quick ? 3 : 7;
  int const ops = quick ? 10000 : 30000;
  auto binary = test_support::redis_server::find_binary();
  if (!binary) {
    std::fprintf(stderr, "bench_redis_pipeline: redis-server not found (scripts/install-deps.sh installs it)\n");
    return 1;
  }
  test_support::redis_server server(*binary);
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = server.url(), .command_timeout = std::chrono::seconds(1)});
  wandura::shared_ticket_cache cache(client, "org_demo", {.near_cache = false}); // every lookup asks Redis
  auto const expires_at = std::chrono::system_clock::now() + std::chrono::minutes(30);
  int failures = 0;

  // The tickets the lookups find.
  (void)run(
      io, server.pid(), stored_tickets,
      [&](int i) -> asio::awaitable<bool> {
        auto store = cache.put(identity(i), {ticket_json(i), expires_at}); // named: GCC 12 and co_await temporaries
        co_await std::move(store);
        co_return true;
      },
      failures);
  std::vector<std::string> keys;
  for (int i = 0; i < stored_tickets; ++i) {
    keys.push_back(wandura::fleet_keys::ticket("org_demo", identity(i)));
  }

  auto const mget = [&](int i) -> asio::awaitable<bool> {
    auto const at = static_cast<std::size_t>(i % (stored_tickets - 2));
    std::array<std::string_view, 4> const args{"MGET", keys[at], keys[at + 1], keys[at + 2]};
    auto [ec, reply] = co_await client.async_command(args, asio::experimental::as_tuple(asio::use_awaitable));
    co_return !ec && reply.elements.size() == 3 && !reply.elements[0].is_nil();
  };
  auto const get_many = [&](int i) -> asio::awaitable<bool> {
    auto const at = i % (stored_tickets - 2);
    std::vector<wandura::ticket_identity> who{identity(at), identity(at + 1), identity(at + 2)};
    auto lookup = cache.get_many(std::move(who)); // named: GCC 12 and co_await temporaries
    auto found = co_await std::move(lookup);
    co_return std::all_of(found.begin(), found.end(), [](auto const& f) { return f.has_value(); });
  };
  int fresh = stored_tickets;
  auto const put_many = [&](int) -> asio::awaitable<bool> {
    std::vector<std::pair<wandura::ticket_identity, wandura::cached_ticket>> two;
    for (int k = 0; k < 2; ++k) {
      int const n = fresh++;
      two.emplace_back(identity(n), wandura::cached_ticket{ticket_json(n), expires_at});
    }
    auto store = cache.put_many(std::move(two)); // named: GCC 12 and co_await temporaries
    co_await std::move(store);
    co_return true;
  };

  struct row {
    char const* what;
    std::function<asio::awaitable<bool>(int)> op;
    std::vector<double> client_us;
    std::vector<double> server_us;
  };
  std::vector<row> rows{{"redis_client MGET of 3 tickets", mget, {}, {}},
                        {"shared_ticket_cache::get_many of 3 (near cache off: one MGET)", get_many, {}, {}},
                        {"shared_ticket_cache::put_many of 2 fresh (one EVALSHA)", put_many, {}, {}}};
  for (int r = 0; r < runs; ++r) {
    for (auto& x : rows) {
      auto const t = run(io, server.pid(), ops, x.op, failures);
      x.client_us.push_back(t.us_per_op);
      x.server_us.push_back(t.server_us_per_op);
    }
  }
  std::printf("redis_command_cpu: CPU per operation with %d in flight on one connection (medians of %d runs of %d; "
              "this process's event loop thread / redis-server)\n",
              in_flight, runs, ops);
  for (auto const& x : rows) {
    auto const [lo, hi] = std::minmax_element(x.client_us.begin(), x.client_us.end());
    std::printf("  %-62s %5.2f us (%.2f-%.2f) / %5.2f us\n", x.what, median(x.client_us), *lo, *hi,
                median(x.server_us));
  }
  auto const stats = client.stats();
  if (failures != 0 || stats.timeouts != 0 || cache.stats().fallbacks != 0) {
    std::printf("  %d operations failed, %llu commands timed out, %llu answered locally\n", failures,
                static_cast<unsigned long long>(stats.timeouts),
                static_cast<unsigned long long>(cache.stats().fallbacks));
    return 1;
  }
  return 0;
}
