// Degrade, never block: the shared-state classes with Redis paused (SIGSTOP), down at start, and killed.
#include <chrono>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "fleet_test_support.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/fleet/shared_viewer_limit.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::elapsed_ms;

namespace {

wandura::ticket_identity viewer_on(std::string device) {
  return {"viewer:ref", std::move(device), "the-heiress-returns", 4, "play"};
}

void wait(asio::io_context& io, std::chrono::milliseconds d) {
  test_support::run(io, [](std::chrono::milliseconds wait_for) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor, wait_for);
    co_await timer.async_wait(asio::use_awaitable);
  }(d));
}

std::size_t count_starting(std::vector<std::string> const& lines, std::string_view prefix) {
  std::size_t n = 0;
  for (auto const& line : lines) {
    n += line.starts_with(prefix) ? 1U : 0U;
  }
  return n;
}

} // namespace

TEST_CASE("fallback: with redis paused the ticket cache answers locally within its timeout, one WARN, then "
          "shares again after SIGCONT") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client_a(io.get_executor(), {.url = redis->url()}); // the default few-ms timeout
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  std::vector<std::string> lines;
  wandura::ticket_cache_options options;
  options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); }, .probe_interval = 100ms};
  wandura::shared_ticket_cache cache_a(client_a, "org_demo", options);
  wandura::shared_ticket_cache cache_b(client_b, "org_demo");
  auto const now = system_clock::now();
  test_support::run(io, cache_a.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));

  redis->pause();
  auto const start = std::chrono::steady_clock::now();
  int hits = 0;
  for (int i = 0; i < 20; ++i) {
    hits += test_support::run(io, cache_a.get(viewer_on("device-7"), now)) ? 1 : 0;
    CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-8"), now))); // never across devices
  }
  auto const took = elapsed_ms(start);
  redis->resume();
  CHECK(hits == 20); // what this process stored is still reused
  CHECK(took < 400); // one timeout, then local answers: never blocked
  CHECK(cache_a.stats().fallbacks == 40);
  CHECK(cache_a.stats().degraded);
  CHECK(count_starting(lines, "WARN fleet ticket_cache: redis 127.0.0.1:") == 1);
  CHECK(lines.size() == 1);

  // Back by itself: after the probe interval the next lookup goes to Redis and sees another process's ticket.
  test_support::run(io, cache_b.put(viewer_on("device-9"), {"tkt_9", now + 30min}, now));
  wait(io, 150ms);
  auto const shared = test_support::run(io, cache_a.get(viewer_on("device-9"), now));
  REQUIRE(shared);
  CHECK(shared->payload == "tkt_9");
  CHECK_FALSE(cache_a.stats().degraded);
  CHECK(count_starting(lines, "INFO fleet ticket_cache: redis 127.0.0.1:") == 1);
}

TEST_CASE("fallback: with redis down at start the viewer limit answers locally, then shares once redis is up") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  redis->kill();
  asio::io_context io;
  wandura::redis_client client_a(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  std::vector<std::string> lines;
  wandura::viewer_limit_options options{.tickets_per_minute = 10};
  options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); }, .probe_interval = 50ms};
  wandura::shared_viewer_limit limit_a(client_a, "org_demo", options);
  wandura::shared_viewer_limit limit_b(client_b, "org_demo", {.tickets_per_minute = 10});
  auto const t0 = system_clock::time_point(std::chrono::milliseconds(1'764'590'400'000));

  auto const start = std::chrono::steady_clock::now();
  CHECK(test_support::run(io, limit_a.try_acquire("v", 8, t0)).granted);
  CHECK_FALSE(test_support::run(io, limit_a.try_acquire("v", 3, t0)).granted); // the local limit holds
  CHECK(elapsed_ms(start) < 300);
  CHECK(limit_a.stats().fallbacks == 2);
  CHECK(count_starting(lines, "WARN fleet viewer_limit: ") == 1);

  redis->start();
  wait(io, 100ms);
  // Redis decides again: its bucket for "v" is fresh (the local spending stayed local), and is shared.
  CHECK(test_support::run(io, limit_a.try_acquire("v", 7, t0)).granted);
  CHECK_FALSE(test_support::run(io, limit_b.try_acquire("v", 4, t0)).granted);
  CHECK(limit_a.stats().fallbacks == 2);
  CHECK_FALSE(limit_a.stats().degraded);
  CHECK(count_starting(lines, "INFO fleet viewer_limit: ") == 1);
}

TEST_CASE("fallback: with redis killed the counter pace goes on locally at its share, keeping the last hold") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  std::vector<std::string> lines;
  wandura::counter_pace_options options{.limit_per_minute = 600, .burst = 10, .local_share = 0.5};
  options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); }, .probe_interval = 1s};
  wandura::shared_counter_pace pace(client, "org_demo", options);
  auto const t0 = system_clock::time_point(std::chrono::milliseconds(1'764'590'400'000));
  test_support::run(io, pace.hold_until(t0 + 1s, t0));
  CHECK(pace.stats().fallbacks == 0);

  redis->kill();
  auto const held = test_support::run(io, pace.try_acquire(1, t0 + 500ms));
  CHECK_FALSE(held.go); // the hold set while Redis was up binds the local pace too
  CHECK(held.wait_until == t0 + 1s);
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    admitted += test_support::run(io, pace.try_acquire(1, t0 + 1s)).go ? 1 : 0;
  }
  CHECK(admitted == 5); // half of the burst of 10: this process's share
  CHECK(pace.stats().fallbacks == 11);
  CHECK(count_starting(lines, "WARN fleet counter_pace playback: ") == 1);
  CHECK(lines.size() == 1);
}
