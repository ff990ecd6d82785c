// The waits between reconnects of the fleet's Redis connections (src/fleet/reconnect_backoff.hpp).
#include "fleet/reconnect_backoff.hpp"

#include <chrono>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <catch2/catch.hpp>

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

std::vector<long long> waits(milliseconds first, milliseconds longest, int n) {
  wandura::redis_options options;
  options.reconnect_backoff = first;
  options.max_reconnect_backoff = longest;
  wandura::detail::reconnect_backoff backoff(options);
  std::vector<long long> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(backoff.next().count());
  }
  return out;
}

} // namespace

TEST_CASE("reconnect backoff: the first wait, doubled after each failure up to the longest, again after reset") {
  CHECK(waits(50ms, 2000ms, 8) == std::vector<long long>{50, 100, 200, 400, 800, 1600, 2000, 2000});
  CHECK(waits(50ms, 120ms, 4) == std::vector<long long>{50, 100, 120, 120});
  wandura::redis_options options;
  wandura::detail::reconnect_backoff backoff(options); // 50 ms, 2 s
  (void)backoff.next();
  (void)backoff.next();
  backoff.reset();
  CHECK(backoff.next() == 50ms);
  CHECK(backoff.longest() == 2000ms);
}

TEST_CASE("reconnect backoff: zero or negative waits are 1 ms, so that a reconnect loop never spins") {
  // A new-user trial: with both set to 0 and Redis down, the erase subscription reconnected ~23,000 times a second.
  CHECK(waits(0ms, 0ms, 3) == std::vector<long long>{1, 1, 1});
  CHECK(waits(-5ms, -1ms, 3) == std::vector<long long>{1, 1, 1});
  CHECK(waits(0ms, 4ms, 5) == std::vector<long long>{1, 2, 4, 4, 4});
  CHECK(waits(100ms, 10ms, 2) == std::vector<long long>{100, 100}); // the longest is never shorter than the first
}

TEST_CASE("reconnect backoff: milliseconds::max() saturates instead of overflowing") {
  auto const most = milliseconds::max();
  CHECK(waits(most, most, 3) == std::vector<long long>{most.count(), most.count(), most.count()});
  auto const w = waits(most / 2 + 1ms, most, 3);
  CHECK(w[1] == most.count());
  asio::io_context io;
  asio::steady_timer timer(io);
  wandura::detail::expire_after(timer, most);
  CHECK(timer.expiry() == std::chrono::steady_clock::time_point::max());
  wandura::detail::expire_after(timer, 5ms);
  CHECK(timer.expiry() > std::chrono::steady_clock::now());
}
