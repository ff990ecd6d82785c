// Nanoseconds per request of wandura::admission_gate (`admit` + `observe` of a success), on 1 and 2 threads that
// share one gate as every call of a client does, each thread awaiting in a loop on its own io_context:
// - uncongested: the path every request takes while no 429 or shed was seen (one atomic load), against the same
//   loop awaiting a bare `asio::awaitable` that does nothing (the floor of any awaitable call);
// - congested with room: the counter's lock on every request (a shed told of plenty of room), for contrast.
// Runs alternate and the median of each is compared, so machine noise hits all alike.
//
// Prints: admission_gate_uncongested threads=N: ratio=R (bare X ns, gate Y ns; congested with room Z ns)
//         (ratio = bare / gate; Y - X is what the gate adds to a request, to set against the tens of microseconds
//         of CPU a ticket request costs the client)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "wandura/resilience/admission_gate.hpp"

namespace {

using std::chrono::steady_clock;
constexpr int ops_per_thread = 2'000'000;

asio::awaitable<wandura::admission> bare() {
  co_return wandura::admission{};
}

enum class mode { bare, gate };

asio::awaitable<void> loop(wandura::admission_gate& gate, mode m, int n, int& admitted) {
  wandura::counter_feedback ok;
  ok.status = 200;
  ok.granted = 1;
  auto const deadline = wandura::clock::time_point::max();
  for (int i = 0; i < n; ++i) {
    if (m == mode::bare) {
      auto const a = co_await bare();
      admitted += a.admitted() ? 1 : 0;
    } else {
      auto const a = co_await gate.admit("playback", wandura::request_class::play, 1, deadline);
      admitted += a.admitted() ? 1 : 0;
      gate.observe("playback", ok);
    }
  }
}

/// Nanoseconds per request over `threads` threads, each running `ops_per_thread` requests.
double run_once(wandura::admission_gate& gate, mode m, int threads) {
  std::vector<std::thread> pool;
  std::vector<int> admitted(static_cast<std::size_t>(threads), 0);
  auto const start = steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      asio::io_context io;
      asio::co_spawn(io, loop(gate, m, ops_per_thread, admitted[static_cast<std::size_t>(t)]), asio::detached);
      io.run();
    });
  }
  for (auto& t : pool) {
    t.join();
  }
  auto const ns = std::chrono::duration<double, std::nano>(steady_clock::now() - start).count();
  for (int a : admitted) {
    if (a != ops_per_thread) {
      std::fprintf(stderr, "admission_gate bench: %d of %d admitted\n", a, ops_per_thread);
      std::exit(1);
    }
  }
  return ns / ops_per_thread; // per request of one thread: what one caller waits
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main() {
  for (int threads : {1, 2}) {
    wandura::admission_gate calm(nullptr);
    wandura::admission_gate busy(nullptr);
    busy.set_limit("playback", {2'000'000'000, std::chrono::seconds(60), wandura::refill_kind::continuous});
    wandura::counter_feedback shed;
    shed.status = 200;
    shed.shed = 1;
    shed.retry_after = std::chrono::seconds(0);
    std::vector<double> bare_ns, gate_ns, busy_ns;
    for (int round = 0; round < 5; ++round) {
      bare_ns.push_back(run_once(calm, mode::bare, threads));
      gate_ns.push_back(run_once(calm, mode::gate, threads));
      busy.observe("playback", shed); // congested, with room far beyond what a run takes
      busy_ns.push_back(run_once(busy, mode::gate, threads));
    }
    double const b = median(bare_ns);
    double const g = median(gate_ns);
    std::printf("admission_gate_uncongested threads=%d: ratio=%.2f (bare %.1f ns, gate %.1f ns; congested with room "
                "%.1f ns)\n",
                threads, b / g, b, g, median(busy_ns));
  }
  return 0;
}
