// The shared counter pace over a real redis-server: two clients stand for two processes of a fleet.
#include "wandura/fleet/shared_counter_pace.hpp"

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>

#include "fleet_test_support.hpp"

#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"

#include "fleet/fleet_values.hpp"
#include "fleet/rate_math.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::at_ms;
using test_support::count_starting;
using test_support::raw;
using test_support::two_processes;
using test_support::wait;

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

TEST_CASE("shared counter pace: destroyed with an acquire in flight it lets the acquire complete") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  auto pace = std::make_unique<wandura::shared_counter_pace>(
      fleet.a, "org_demo", wandura::counter_pace_options{.counter = "playback", .limit_per_minute = 600, .burst = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  CHECK(test_support::run(fleet.io, pace->try_acquire(1, t0)).go); // connected, script loaded
  redis->pause();
  std::optional<bool> go;
  asio::co_spawn(fleet.io, pace->try_acquire(1, t0),
                 [&](std::exception_ptr e, auto decision) { go = !e && decision.go; });
  fleet.io.restart();
  fleet.io.run_for(50ms); // sent, waiting on the paused server
  CHECK_FALSE(go.has_value());
  pace.reset();
  redis->resume();
  REQUIRE(test_support::run_until(fleet.io, [&] { return go.has_value(); }));
  CHECK(*go);
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

TEST_CASE("shared counter pace: the script and the local fallback decide alike on the same sequence") {
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
  int booked = 0;
  test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    for (int step = 0; step < 400; ++step) {
      auto const now = t0 + step * 3ms;
      double const cost = 1 + step % 3;
      auto const book = step % 5 < 2 ? 20ms : 0ms; // some asks book up to 20 ms ahead
      auto const shared = co_await pace.try_acquire(cost, now, book);
      double const now_ms = static_cast<double>((now - at_ms(0)) / 1ms);
      auto const mine = wandura::detail::gcra_take(local, now_ms, cost, em, 7, static_cast<double>(book.count()));
      auto const expected = mine.go && mine.at_ms <= now_ms ? now : at_ms(static_cast<std::int64_t>(mine.at_ms));
      if ((shared.go != mine.go || shared.wait_until != expected) && disagreements < 5) {
        UNSCOPED_INFO("step " << step << " go " << shared.go << "/" << mine.go << " at "
                              << (shared.wait_until - now) / 1us << "/" << (expected - now) / 1us);
      }
      disagreements += shared.go != mine.go || shared.wait_until != expected ? 1 : 0;
      booked += shared.go && shared.wait_until > now ? 1 : 0;
    }
    co_return 0;
  }());
  CHECK(disagreements == 0);
  CHECK(booked > 0);
}

TEST_CASE("shared counter pace: with redis killed it goes on locally at its share, keeping the last hold") {
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

TEST_CASE("shared counter pace: read tells one process the hold, refusal and rate another set") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace_a(fleet.a, "org_demo", {.limit_per_minute = 6000});
  wandura::shared_counter_pace pace_b(fleet.b, "org_demo", {.limit_per_minute = 6000});
  auto const calm = test_support::run(fleet.io, pace_b.read());
  CHECK(calm.held_until == at_ms(0));
  CHECK(calm.pressure_at == at_ms(0));
  CHECK(calm.limit_per_minute == 0); // the rate of the options is this process's guess, not the fleet's

  auto const t0 = at_ms(1'764'590'400'000);
  test_support::run(fleet.io, pace_a.hold_until(t0 + 2s, t0));
  test_support::run(fleet.io, pace_a.hold_until(t0 + 500ms, t0 + 300ms)); // a later refusal, inside the hold
  test_support::run(fleet.io, pace_a.set_rate(600, 5));
  auto const seen = test_support::run(fleet.io, pace_b.read());
  CHECK(seen.held_until == t0 + 2s);
  CHECK(seen.pressure_at == t0 + 300ms);
  CHECK(seen.limit_per_minute == Approx(600));
  CHECK(pace_b.stats().fallbacks == 0);
}

TEST_CASE("shared counter pace: with redis paused read answers with this process's own hold and rate") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 50ms});
  wandura::shared_counter_pace pace(client, "org_demo", {.limit_per_minute = 600});
  auto const t0 = at_ms(1'764'590'400'000);
  redis->pause();
  test_support::run(io, pace.hold_until(t0 + 1s, t0)); // times out: kept locally
  test_support::run(io, pace.set_rate(1200, 10));
  auto const start = std::chrono::steady_clock::now();
  auto const seen = test_support::run(io, pace.read());
  CHECK(test_support::elapsed_ms(start) < 50); // within the probe interval: answered locally at once
  redis->resume();
  CHECK(seen.held_until == t0 + 1s);
  CHECK(seen.pressure_at == t0);
  CHECK(seen.limit_per_minute == Approx(1200));
  CHECK(pace.stats().degraded);
}

TEST_CASE("shared counter pace: the script and the local fallback decide alike on sub-millisecond times and holds") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  // A gate asks with its wall clock's full precision and publishes hold-offs the same way: times are rarely whole
  // milliseconds. Every answer must be the one the local arithmetic gives, and a refusal never before the hold ends.
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace(fleet.a, "org_demo", {.limit_per_minute = 7000, .burst = 7});
  wandura::detail::gcra local;
  double const em = 60000.0 / 7000.0;
  auto const t0 = at_ms(1'764'590'400'000) + 250us;
  int disagreements = 0;
  int early = 0;
  int held = 0;
  test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    for (int step = 0; step < 300; ++step) {
      auto const now = t0 + step * 3ms + (step % 7) * 137us;
      if (step % 50 == 10) { // a hold-off to a fraction of a millisecond, 40 ms on
        auto const until = now + 40ms + 333us;
        co_await pace.hold_until(until, now);
        wandura::detail::gcra_hold(local, wandura::detail::to_epoch_ms(now), wandura::detail::to_epoch_ms(until), em,
                                   7);
      }
      double const cost = 1 + step % 3;
      auto const book = step % 5 < 2 ? 20ms : 0ms;
      auto const shared = co_await pace.try_acquire(cost, now, book);
      double const now_ms = wandura::detail::to_epoch_ms(now);
      auto const mine = wandura::detail::gcra_take(local, now_ms, cost, em, 7, static_cast<double>(book.count()));
      auto const expected = mine.go && mine.at_ms <= now_ms ? now : wandura::detail::from_epoch_ms(mine.at_ms);
      bool const differs = shared.go != mine.go || shared.wait_until != expected;
      if (differs && disagreements < 5) {
        UNSCOPED_INFO("step " << step << " go " << shared.go << "/" << mine.go << " at "
                              << (shared.wait_until - now) / 1us << "/" << (expected - now) / 1us << " us");
      }
      disagreements += differs ? 1 : 0;
      bool const in_hold = wandura::detail::to_epoch_ms(now) < local.hold_ms;
      held += in_hold ? 1 : 0;
      early += in_hold && (shared.go || wandura::detail::to_epoch_ms(shared.wait_until) < local.hold_ms) ? 1 : 0;
    }
    co_return 0;
  }());
  CHECK(held > 0);
  CHECK(early == 0);
  CHECK(disagreements == 0);
}

TEST_CASE("shared counter pace: with redis down, a cost above this process's share of the burst goes when it is full") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::counter_pace_options options{.limit_per_minute = 600, .burst = 10, .local_share = 0.5};
  options.fallback = {.log = {}, .probe_interval = 1h};
  wandura::shared_counter_pace pace(client, "org_demo", options);
  redis->kill();
  // A batch of 8 tickets is within the fleet's burst of 10, above this process's 5: as the gate's own bucket lets
  // an oversized batch go when it is full, it goes when the local share is, and leaves a debt behind.
  auto const t0 = at_ms(1'764'590'400'000);
  std::vector<system_clock::time_point> went;
  for (int step = 0; step < 100; ++step) { // 10 s in steps of 100 ms
    auto const now = t0 + step * 100ms;
    if (test_support::run(io, pace.try_acquire(8, now)).go) {
      went.push_back(now);
    }
  }
  REQUIRE(went.size() >= 2);
  CHECK(went.front() == t0);
  // At the share's rate (5/s) the debt of 8 units is repaid in 1.6 s, and the next batch goes then: 7 in 10 s, never
  // more than the share's refill over the time plus one batch.
  for (std::size_t i = 1; i < went.size(); ++i) {
    CHECK(went[i] - went[i - 1] >= 1600ms);
  }
  CHECK(went.size() == 7);
  CHECK(static_cast<double>(went.size()) * 8 <= 5.0 * 10 + 8);
  CHECK(pace.stats().degraded);
}

TEST_CASE("shared counter pace: a cost of zero or above the burst, or a negative booking time, is invalid_argument") {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = "redis://127.0.0.1:1"}); // never reached
  wandura::shared_counter_pace pace(client, "org_demo", {.limit_per_minute = 600, .burst = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  auto refuses = [&](double cost, std::chrono::milliseconds book) {
    return test_support::refused_as_invalid([&] { (void)test_support::run(io, pace.try_acquire(cost, t0, book)); });
  };
  CHECK(refuses(0, 0ms));
  CHECK(refuses(-1, 0ms));
  CHECK(refuses(10.5, 0ms));
  CHECK(refuses(1, -1ms));
  CHECK(pace.stats().admitted + pace.stats().delayed == 0); // refused before any decision
  CHECK(pace.stats().fallbacks == 0);                       // and before any command
}

TEST_CASE("shared counter pace: units booked before a hold are used at its end, and come out of the burst there") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::counter_pace_options const options{.counter = "playback", .limit_per_minute = 600, .burst = 5};
  wandura::shared_counter_pace pace_a(fleet.a, "org_demo", options);
  wandura::shared_counter_pace pace_b(fleet.b, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000);
  int now_go = 0;
  int booked = 0;
  int at_end = 0;
  test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    for (int i = 0; i < 5; ++i) { // the burst, now
      auto const d = co_await pace_a.try_acquire(1, t0);
      now_go += d.go ? 1 : 0;
    }
    for (int i = 0; i < 3; ++i) { // three units booked for t0 + 100, 200 and 300 ms
      auto const d = co_await pace_a.try_acquire(1, t0, 500ms);
      booked += d.go && d.wait_until > t0 ? 1 : 0;
    }
    // Another process's 429, held 2 s: the booked instants fall inside it, so their units go at its end.
    co_await pace_b.hold_until(t0 + 2s, t0 + 10ms);
    co_await pace_a.hold_until(t0 + 2s, t0 + 20ms); // the same hold published again moves nothing further
    for (int i = 0; i < 10; ++i) {
      auto const d = co_await pace_b.try_acquire(1, t0 + 2s);
      at_end += d.go ? 1 : 0;
    }
    co_return 0;
  }());
  CHECK(now_go == 5);
  CHECK(booked == 3);
  // At the hold's end the fleet releases its burst of 5: the 3 booked units and 2 more, not 5 more.
  CHECK(at_end == 2);
  // The local arithmetic does the same.
  wandura::detail::gcra local;
  for (int i = 0; i < 8; ++i) {
    (void)wandura::detail::gcra_take(local, 1000, 1, 100, 5, 500);
  }
  wandura::detail::gcra_hold(local, 1010, 3000, 100, 5);
  wandura::detail::gcra_hold(local, 1020, 3000, 100, 5);
  int local_at_end = 0;
  for (int i = 0; i < 10; ++i) {
    local_at_end += wandura::detail::gcra_take(local, 3000, 1, 100, 5).go ? 1 : 0;
  }
  CHECK(local_at_end == 2);
}

TEST_CASE("shared counter pace: a rate or burst that is infinite or NaN is invalid_argument, in options and set_rate") {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = "redis://127.0.0.1:1"}); // never reached
  double const inf = std::numeric_limits<double>::infinity();
  double const nan = std::numeric_limits<double>::quiet_NaN();
  for (auto const& [limit, burst] : {std::pair{inf, 0.0}, std::pair{nan, 0.0}, std::pair{600.0, inf},
                                     std::pair{600.0, nan}, std::pair{-inf, 0.0}, std::pair{600.0, -1.0}}) {
    INFO(limit << " " << burst);
    CHECK(test_support::refused_as_invalid(
        [&] { wandura::shared_counter_pace pace(client, "org_demo", {.limit_per_minute = limit, .burst = burst}); }));
    wandura::shared_counter_pace pace(client, "org_demo", {.limit_per_minute = 600});
    CHECK(test_support::refused_as_invalid([&] { test_support::run(io, pace.set_rate(limit, burst)); }));
    CHECK(pace.stats().fallbacks == 0); // refused before any command
  }
}

TEST_CASE("shared counter pace: a counter name empty or over 64 characters is refused with a message about the name") {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = "redis://127.0.0.1:1"}); // never reached
  for (auto const& name : {std::string(), std::string(65, 'c')}) {
    try {
      wandura::shared_counter_pace pace(client, "org_demo", {.counter = name});
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK(std::string(e.what()).find("1-64") != std::string::npos);
      CHECK(std::string(e.what()).find("local_share") == std::string::npos);
    }
  }
  wandura::shared_counter_pace longest(client, "org_demo", {.counter = std::string(64, 'c')});
}

TEST_CASE("shared counter pace: a hold in Redis past what the clock holds reads as the clock's end, never overflows") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace(fleet.a, "org_demo", {.limit_per_minute = 6000});
  auto const key = wandura::fleet_keys::pace("org_demo", "playback");
  auto const now = system_clock::now();
  for (char const* hold : {"9223372036855", "9007199254740992"}) { // past the clock's last millisecond, up to 2^53
    INFO(hold);
    raw(fleet.io, fleet.a, {"HSET", key, "hold", hold, "press", hold});
    auto const seen = test_support::run(fleet.io, pace.read());
    CHECK(seen.held_until == system_clock::time_point::max());
    CHECK(seen.pressure_at == system_clock::time_point::max());
  }
  raw(fleet.io, fleet.a, {"HSET", key, "hold", "9223372036855"});
  auto const held = test_support::run(fleet.io, pace.try_acquire(1, now));
  CHECK_FALSE(held.go);
  CHECK(held.wait_until == system_clock::time_point::max());
  // inf is no time the SDK writes (nor is 1e300): the script reads it as no hold and deletes it, where it answered
  // ceil(inf) as some integer. tests/integration/fleet/fleet_poisoned_key_test.cpp has the rest of such values.
  raw(fleet.io, fleet.a, {"HSET", key, "hold", "inf"});
  CHECK(test_support::run(fleet.io, pace.try_acquire(1, now)).go);
  CHECK(raw(fleet.io, fleet.a, {"HEXISTS", key, "hold"}).integer == 0);
}

TEST_CASE("shared counter pace: a hold until the clock's end from one process is stored finite and read by another") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_counter_pace pace_a(fleet.a, "org_demo", {.limit_per_minute = 6000});
  wandura::shared_counter_pace pace_b(fleet.b, "org_demo", {.limit_per_minute = 6000});
  auto const now = system_clock::now();
  test_support::run(fleet.io, pace_a.hold_until(system_clock::time_point::max(), now));
  auto const stored = raw(fleet.io, fleet.a, {"HGET", wandura::fleet_keys::pace("org_demo", "playback"), "hold"});
  double const clock_end_ms = wandura::detail::to_epoch_ms(system_clock::time_point::max());
  CHECK(std::stod(stored.text) < clock_end_ms);
  auto const seen = test_support::run(fleet.io, pace_b.read());
  CHECK(seen.held_until > now + std::chrono::years(200));
  auto const decision = test_support::run(fleet.io, pace_b.try_acquire(1, now));
  CHECK_FALSE(decision.go);
  CHECK(decision.wait_until > now + std::chrono::years(200));
}

TEST_CASE("shared counter pace: a share of 0 or less or above 1, or a bad org, is invalid_argument") {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = "redis://127.0.0.1:1"}); // never reached
  for (double const share : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO(share);
    CHECK(test_support::refused_as_invalid(
        [&] { wandura::shared_counter_pace pace(client, "org_demo", {.local_share = share}); }));
  }
  CHECK_FALSE(test_support::refused_as_invalid(
      [&] { wandura::shared_counter_pace pace(client, "org_demo", {.local_share = 1.0}); }));
  for (std::string const& org : {std::string(), std::string("a{b}"), std::string(65, 'o')}) {
    CHECK(test_support::refused_as_invalid([&] { wandura::shared_counter_pace pace(client, org); }));
  }
}

TEST_CASE("shared counter pace: a burst of 0 is a whole minute's limit, in the options and in set_rate, and a rate "
          "set is kept in Redis for an hour") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  auto const t0 = at_ms(1'764'590'400'000);
  auto admitted_at_once = [&](wandura::shared_counter_pace& pace) {
    int admitted = 0;
    while (admitted < 5000 && test_support::run(fleet.io, pace.try_acquire(10, t0)).go) {
      admitted += 10;
    }
    return admitted;
  };
  wandura::shared_counter_pace from_options(fleet.a, "org_demo", {.counter = "minute", .limit_per_minute = 600});
  CHECK(admitted_at_once(from_options) == 600);
  wandura::shared_counter_pace from_rate(fleet.a, "org_demo", {.counter = "set", .limit_per_minute = 60});
  test_support::run(fleet.io, from_rate.set_rate(1200, 0));
  CHECK(admitted_at_once(from_rate) == 1200);
  auto const pttl = raw(fleet.io, fleet.b, {"PTTL", wandura::fleet_keys::pace("org_demo", "set")});
  CHECK(pttl.integer > 3'590'000);
  CHECK(pttl.integer <= 3'600'000);
  CHECK(from_options.stats().fallbacks + from_rate.stats().fallbacks == 0);
}

TEST_CASE("shared counter pace: an acquire or read cancelled while Redis is paused ends with operation_aborted") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url()); // 500 ms commands: cancelled well before they time out
  wandura::shared_counter_pace pace(fleet.a, "org_demo", {.counter = "playback"});
  REQUIRE(test_support::run(fleet.io, pace.try_acquire(1)).go); // connected, the script loaded
  redis->pause();
  auto outcome_of = [&](auto operation) {
    asio::cancellation_signal signal;
    std::optional<std::error_code> ended;
    asio::co_spawn(fleet.io, std::move(operation),
                   asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, auto) {
                     ended = std::error_code{};
                     try {
                       if (e) {
                         std::rethrow_exception(e);
                       }
                     } catch (wandura::error const& err) {
                       ended = err.code();
                     }
                   }));
    fleet.io.restart();
    fleet.io.run_for(30ms); // sent, waiting on the paused server
    signal.emit(asio::cancellation_type::terminal);
    test_support::run_until(
        fleet.io, [&] { return ended.has_value(); }, 200ms);
    return ended;
  };
  auto const acquire = outcome_of(pace.try_acquire(1));
  auto const read = outcome_of(pace.read());
  redis->resume();
  REQUIRE(acquire);
  CHECK(*acquire == asio::error::operation_aborted);
  REQUIRE(read);
  CHECK(*read == asio::error::operation_aborted);
  CHECK(pace.stats().fallbacks == 0); // a cancellation is not a fallback
}
