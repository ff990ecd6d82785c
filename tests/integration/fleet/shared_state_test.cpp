// The shared-state classes over a real redis-server, two clients standing for two processes of a fleet.
#include <array>
#include <chrono>
#include <string>
#include <vector>

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include "fleet/rate_math.hpp"
#include "fleet_test_support.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/fleet/shared_viewer_limit.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;

namespace {

wandura::ticket_identity viewer_on(std::string device) {
  return {"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", std::move(device), "the-heiress-returns", 4, "play"};
}

system_clock::time_point at_ms(std::int64_t ms) {
  return system_clock::time_point(std::chrono::milliseconds(ms));
}

// Two connections to one server, as two processes of a fleet have.
struct two_processes {
  explicit two_processes(std::string const& url)
      : a(io.get_executor(), {.url = url, .command_timeout = 500ms}),
        b(io.get_executor(), {.url = url, .command_timeout = 500ms}) {}
  asio::io_context io;
  wandura::redis_client a;
  wandura::redis_client b;
};

wandura::redis_reply raw(asio::io_context& io, wandura::redis_client& client, std::vector<std::string> args) {
  return test_support::run(io, client.command(std::move(args)));
}

} // namespace

TEST_CASE("shared ticket cache: a ticket stored by one process is reused by another, for that device only") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache_a(fleet.a, "org_demo");
  wandura::shared_ticket_cache cache_b(fleet.b, "org_demo");
  auto const now = system_clock::now();
  auto const expires_at = std::chrono::time_point_cast<std::chrono::milliseconds>(now + 30min);
  wandura::cached_ticket const ticket{R"({"ticket_id":"tkt_1"})", expires_at};

  test_support::run(fleet.io, cache_a.put(viewer_on("device-7"), ticket, now));
  auto const found = test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now));
  REQUIRE(found);
  CHECK(*found == ticket);
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-8"), now)));
  auto other_viewer = viewer_on("device-7");
  other_viewer.viewer_ref = "another:viewer";
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(other_viewer, now)));
  // Reusable until 5 min before expires_at, and the entry expires by itself then.
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), expires_at - 5min)));
  auto const pttl = raw(fleet.io, fleet.a, {"PTTL", wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"))});
  CHECK(pttl.integer > (25min - 5s) / 1ms);
  CHECK(pttl.integer <= 25min / 1ms);
  CHECK(cache_b.stats().hits == 1);
  CHECK(cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: a stored value for another identity under the key is never served") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache(fleet.a, "org_demo");
  auto const now = system_clock::now();
  // Another device's ticket copied under this device's key (a collision, a bug, a hostile writer).
  test_support::run(fleet.io, cache.put(viewer_on("device-8"), {"tkt_other", now + 30min}, now));
  auto const key8 = wandura::fleet_keys::ticket("org_demo", viewer_on("device-8"));
  auto const key7 = wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"));
  raw(fleet.io, fleet.a, {"COPY", key8, key7});
  CHECK_FALSE(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  raw(fleet.io, fleet.a, {"SET", key7, "not an envelope"});
  CHECK_FALSE(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  CHECK(cache.stats().rejected == 2);
}

TEST_CASE("shared ticket cache: when two processes store for one identity, the longer-lived ticket stays") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache_a(fleet.a, "org_demo");
  wandura::shared_ticket_cache cache_b(fleet.b, "org_demo");
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  test_support::run(fleet.io, cache_a.put(viewer_on("d"), {"long", now + 30min}, now));
  test_support::run(fleet.io, cache_b.put(viewer_on("d"), {"short", now + 20min}, now));
  CHECK(test_support::run(fleet.io, cache_b.get(viewer_on("d"), now))->payload == "long");
  test_support::run(fleet.io, cache_b.put(viewer_on("d"), {"longer", now + 40min}, now));
  CHECK(test_support::run(fleet.io, cache_a.get(viewer_on("d"), now))->payload == "longer");
}

TEST_CASE("shared viewer limit: one limit across two processes, all or nothing, with release") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit_a(fleet.a, "org_demo", {.tickets_per_minute = 10});
  wandura::shared_viewer_limit limit_b(fleet.b, "org_demo", {.tickets_per_minute = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  CHECK(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 6, t0)).granted);
  CHECK(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 4, t0)).granted);
  auto const refused = test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 2, t0));
  CHECK_FALSE(refused.granted);
  CHECK(refused.retry_after == 12000ms);                                              // two tickets at one per 6 s
  CHECK(test_support::run(fleet.io, limit_a.try_acquire("viewer:2", 3, t0)).granted); // another viewer
  test_support::run(fleet.io, limit_a.release("viewer:1", 2, t0));
  CHECK(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 2, t0)).granted);
  CHECK_FALSE(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 1, t0 + 5999ms)).granted);
  CHECK(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 1, t0 + 6000ms)).granted);
  CHECK(limit_a.stats().fallbacks + limit_b.stats().fallbacks == 0);
}

TEST_CASE("shared counter pace: two processes together are admitted at the counter's refill, not twice it") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::counter_pace_options const options{.counter = "playback", .limit_per_minute = 600, .burst = 10};
  wandura::shared_counter_pace pace_a(fleet.a, "org_demo", options);
  wandura::shared_counter_pace pace_b(fleet.b, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000);
  int admitted = 0;
  test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    for (int step = 0; step < 1000; ++step) { // 10 s in steps of 10 ms, both processes asking at every step
      auto const now = t0 + step * 10ms;
      admitted += (co_await pace_a.try_acquire(1, now)).go ? 1 : 0;
      admitted += (co_await pace_b.try_acquire(1, now)).go ? 1 : 0;
    }
    co_return 0;
  }());
  // 600/min is 10/s: the burst of 10 plus 10 s of refill, 110 (each alone would have had 110: 220 together).
  CHECK(admitted >= 109);
  CHECK(admitted <= 111);
  auto const refused = test_support::run(fleet.io, pace_a.try_acquire(1, t0 + 9990ms));
  CHECK_FALSE(refused.go);
  CHECK(refused.wait_until > t0 + 9990ms);
  CHECK(refused.wait_until <= t0 + 10100ms);
}

TEST_CASE("shared counter pace: a 429's hold and a new rate set by one process bind the other") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace_a(fleet.a, "org_demo", {.limit_per_minute = 6000});
  wandura::shared_counter_pace pace_b(fleet.b, "org_demo", {.limit_per_minute = 6000});
  auto const t0 = at_ms(1'764'590'400'000);
  test_support::run(fleet.io, pace_a.hold_until(t0 + 2s, t0));
  auto const held = test_support::run(fleet.io, pace_b.try_acquire(1, t0 + 1s));
  CHECK_FALSE(held.go);
  CHECK(held.wait_until == t0 + 2s);
  test_support::run(fleet.io, pace_a.hold_until(t0 + 1s, t0)); // an earlier hold never shortens it
  CHECK_FALSE(test_support::run(fleet.io, pace_b.try_acquire(1, t0 + 1500ms)).go);

  test_support::run(fleet.io, pace_a.set_rate(60, 2)); // one a second, two at once
  auto const t1 = t0 + 3s;
  CHECK(test_support::run(fleet.io, pace_b.try_acquire(1, t1)).go);
  CHECK(test_support::run(fleet.io, pace_b.try_acquire(1, t1)).go);
  auto const paced = test_support::run(fleet.io, pace_b.try_acquire(1, t1));
  CHECK_FALSE(paced.go);
  CHECK(paced.wait_until == t1 + 1s);
}

TEST_CASE("shared state scripts: after SCRIPT FLUSH (or a restart) the script is sent again and answers") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit(fleet.a, "org_demo", {.tickets_per_minute = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  CHECK(test_support::run(fleet.io, limit.try_acquire("v", 9, t0)).granted);
  auto const before = fleet.a.stats().commands;
  CHECK(test_support::run(fleet.io, limit.try_acquire("v", 1, t0)).granted);
  CHECK(fleet.a.stats().commands == before + 1); // loaded: EVALSHA alone
  raw(fleet.io, fleet.b, {"SCRIPT", "FLUSH"});
  CHECK_FALSE(test_support::run(fleet.io, limit.try_acquire("v", 1, t0)).granted); // the state survived the flush
  CHECK(fleet.a.stats().commands == before + 3);                                   // NOSCRIPT, then EVAL
  CHECK(limit.stats().fallbacks == 0);
}

TEST_CASE("shared state scripts: Redis and the local fallback decide alike on the same sequence") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace(fleet.a, "org_demo", {.limit_per_minute = 7000, .burst = 7});
  wandura::detail::gcra local;
  double const em = 60000.0 / 7000.0; // not a whole number of ms: the fractions must agree too
  auto const t0 = at_ms(1'764'590'400'000);
  int disagreements = 0;
  test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    for (int step = 0; step < 400; ++step) {
      auto const now = t0 + step * 3ms;
      double const cost = 1 + step % 3;
      auto const shared = co_await pace.try_acquire(cost, now);
      auto const mine = wandura::detail::gcra_take(local, static_cast<double>((now - at_ms(0)) / 1ms), cost, em, 7);
      disagreements += shared.go != mine.go ? 1 : 0;
    }
    co_return 0;
  }());
  CHECK(disagreements == 0);
}
