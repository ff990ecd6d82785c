// The shared per-viewer limit over a real redis-server: two clients stand for two processes of a fleet.
#include "wandura/fleet/shared_viewer_limit.hpp"

#include <array>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "fleet_test_support.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::at_ms;
using test_support::count_starting;
using test_support::elapsed_ms;
using test_support::raw;
using test_support::two_processes;
using test_support::wait;

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
  test_support::run(fleet.io, limit_a.release("viewer:1", 2, wandura::viewer_limit::account::primary, t0));
  CHECK(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 2, t0)).granted);
  CHECK_FALSE(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 1, t0 + 5999ms)).granted);
  CHECK(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 1, t0 + 6000ms)).granted);
  CHECK(limit_a.stats().fallbacks + limit_b.stats().fallbacks == 0);
}

TEST_CASE("shared viewer limit: destroyed with an acquire in flight it lets the acquire complete") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  auto limit = std::make_unique<wandura::shared_viewer_limit>(fleet.a, "org_demo",
                                                              wandura::viewer_limit_options{.tickets_per_minute = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  CHECK(test_support::run(fleet.io, limit->try_acquire("viewer:1", 1, t0)).granted); // connected, script loaded
  redis->pause();
  std::optional<bool> granted;
  asio::co_spawn(fleet.io, limit->try_acquire("viewer:1", 2, t0),
                 [&](std::exception_ptr e, auto decision) { granted = !e && decision.granted; });
  fleet.io.restart();
  fleet.io.run_for(50ms); // sent, waiting on the paused server
  CHECK_FALSE(granted.has_value());
  limit.reset();
  redis->resume();
  REQUIRE(test_support::run_until(fleet.io, [&] { return granted.has_value(); }));
  CHECK(*granted);
}

TEST_CASE("shared viewer limit: a take Redis runs after the call answered locally or was cancelled is given back") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url()); // b: 500 ms commands, to look at the buckets and to cancel a take
  wandura::redis_client fast(fleet.io.get_executor(), {.url = redis->url()}); // the default few ms
  wandura::shared_viewer_limit timed_out(fast, "org_demo", {.tickets_per_minute = 2});
  wandura::shared_viewer_limit cancelled(fleet.b, "org_demo", {.tickets_per_minute = 2});
  auto const t0 = at_ms(1'764'590'400'000);
  auto tokens = [&](std::string const& viewer) {
    return raw(fleet.io, fleet.b, {"HGET", wandura::fleet_keys::viewer("org_demo", {2, 2}, viewer), "t"}).text;
  };
  auto settled = [&] { return fast.stats().pending == 0 && fleet.b.stats().pending == 0; };
  // Connected, the script loaded and Redis answering: on a loaded machine the first takes may time out, and then
  // the fallback's probe interval is waited out before Redis is asked again.
  for (int i = 0; i < 10; ++i) {
    auto const before = timed_out.stats().fallbacks;
    (void)test_support::run(fleet.io, timed_out.try_acquire("warm:" + std::to_string(i), 1, t0));
    if (timed_out.stats().fallbacks == before) {
      break;
    }
    test_support::wait(fleet.io, 600ms);
  }
  (void)test_support::run(fleet.io, cancelled.try_acquire("warm", 1, t0));
  REQUIRE(test_support::run_until(fleet.io, settled));
  auto const fallbacks = timed_out.stats().fallbacks;
  auto const compensated = fast.stats().compensations; // late warm-ups, if any

  redis->pause();
  CHECK(test_support::run(fleet.io, timed_out.try_acquire("viewer:1", 2, t0)).granted); // from the local bucket
  CHECK(timed_out.stats().fallbacks == fallbacks + 1);
  asio::cancellation_signal signal;
  std::optional<std::error_code> aborted;
  asio::co_spawn(fleet.io, cancelled.try_acquire("viewer:2", 2, t0),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, auto) {
                   aborted = std::error_code{};
                   try {
                     if (e) {
                       std::rethrow_exception(e);
                     }
                   } catch (wandura::error const& err) {
                     aborted = err.code();
                   }
                 }));
  fleet.io.restart();
  fleet.io.run_for(30ms); // sent, waiting on the paused server
  signal.emit(asio::cancellation_type::terminal);
  REQUIRE(test_support::run_until(fleet.io, [&] { return aborted.has_value(); }));
  CHECK(*aborted == asio::error::operation_aborted);
  redis->resume();

  REQUIRE(test_support::run_until(fleet.io, settled));
  CHECK(fast.stats().compensations == compensated + 1);
  CHECK(fleet.b.stats().compensations == 1);
  CHECK(tokens("viewer:1") == "2"); // the late takes ran and were given back: the buckets are full
  CHECK(tokens("viewer:2") == "2");
  // A take refused late takes nothing, so nothing is given back.
  CHECK(test_support::run(fleet.io, cancelled.try_acquire("viewer:3", 2, t0)).granted);
  test_support::wait(fleet.io, 600ms); // past the fallback's probe interval: Redis is asked again
  redis->pause();
  CHECK(test_support::run(fleet.io, timed_out.try_acquire("viewer:3", 1, t0)).granted); // locally again
  CHECK(timed_out.stats().fallbacks == fallbacks + 2);
  redis->resume();
  REQUIRE(test_support::run_until(fleet.io, settled));
  CHECK(fast.stats().compensations == compensated + 1);
  CHECK(tokens("viewer:3") == "0");
}

TEST_CASE("shared viewer limit: a give-back goes to the bucket its tickets were taken from, whatever Redis's state") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  two_processes fleet(redis->url()); // b: 500 ms commands, to look at the buckets
  wandura::redis_client fast(fleet.io.get_executor(), {.url = redis->url(), .command_timeout = 20ms});
  wandura::viewer_limit_options options{.tickets_per_minute = 2};
  options.fallback.probe_interval = 50ms;
  wandura::shared_viewer_limit limit(fast, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000); // one instant throughout: nothing refills
  auto tokens = [&](std::string const& viewer) {
    return raw(fleet.io, fleet.b, {"HGET", wandura::fleet_keys::viewer("org_demo", {2, 2}, viewer), "t"}).text;
  };
  auto take = [&](std::string const& viewer, int n) {
    return test_support::run(fleet.io, limit.try_acquire(viewer, n, t0));
  };
  auto give_back = [&](std::string const& viewer, int n, account from) {
    test_support::run(fleet.io, limit.release(viewer, n, from, t0));
  };
  auto redis_answers = [&] { // past the probe interval, Redis decides again
    for (int i = 0; i < 40 && limit.stats().degraded; ++i) {
      test_support::wait(fleet.io, 60ms);
      (void)take("probe", 1);
    }
    return !limit.stats().degraded;
  };
  REQUIRE(redis_answers());
  auto const taken = take("viewer:1", 2); // connected; Redis decides
  REQUIRE(taken.granted);
  REQUIRE(taken.taken_from == account::primary);
  CHECK(take("viewer:2", 1).taken_from == account::primary);
  CHECK(tokens("viewer:1") == "0");
  CHECK(tokens("viewer:2") == "1");

  redis->pause();
  // Times out: the local bucket decides, from what Redis last said the viewer's bucket held (one ticket), not
  // from a full bucket: a stall gives no viewer a fresh allowance.
  auto const local = take("viewer:2", 1);
  CHECK(local.granted);
  CHECK(local.taken_from == account::fallback);
  CHECK(limit.stats().degraded);
  CHECK_FALSE(take("viewer:2", 1).granted);
  auto const spent = take("viewer:1", 2); // the local bucket of viewer:1: spent in Redis, spent here
  CHECK_FALSE(spent.granted);
  CHECK(spent.taken_from == account::fallback);
  // The tickets taken in Redis, given back while the limiter answers locally: sent to Redis all the same (they run
  // when Redis does), not credited to the local bucket, which never had them.
  give_back("viewer:1", 2, account::primary);
  CHECK_FALSE(take("viewer:1", 1).granted);
  redis->resume();
  REQUIRE(redis_answers());
  REQUIRE(test_support::run_until(fleet.io, [&] { return fast.stats().pending == 0; }));
  CHECK(tokens("viewer:1") == "2");

  // Taken locally, given back after Redis returned: back to the local bucket, not to Redis, which never counted it.
  give_back("viewer:2", 1, account::fallback);
  CHECK(tokens("viewer:2") == "1");
  redis->pause();
  (void)take("probe", 1); // degraded again
  auto const again = take("viewer:2", 1);
  CHECK(again.taken_from == account::fallback);
  CHECK(again.granted); // the local bucket has its ticket back: 1 of 2, the other counted in Redis before
  CHECK_FALSE(take("viewer:2", 1).granted);
  redis->resume();
}

TEST_CASE("shared viewer limit: with a local_share of 1/2 a process answering alone spends half of what Redis last "
          "said was left and refills at half the rate and gives a viewer it never asked about half the burst") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  double const share = GENERATE(1.0, 0.5);
  CAPTURE(share);
  two_processes fleet(redis->url());
  wandura::redis_client fast(fleet.io.get_executor(), {.url = redis->url(), .command_timeout = 20ms});
  wandura::redis_client fast_b(fleet.io.get_executor(), {.url = redis->url(), .command_timeout = 20ms});
  wandura::viewer_limit_options options{.tickets_per_minute = 6, .local_share = share};
  options.fallback.probe_interval = 10s; // once paused, every take below answers locally
  wandura::shared_viewer_limit limit(fast, "org_demo", options);
  wandura::shared_viewer_limit limit_b(fast_b, "org_demo", options); // a second process
  auto const t0 = at_ms(1'764'590'400'000);
  auto take = [&](std::string const& viewer, int n, system_clock::time_point at) {
    return test_support::run(fleet.io, limit.try_acquire(viewer, n, at));
  };
  auto granted_of_one = [&](std::string const& viewer, system_clock::time_point at) { // ones granted until refused
    int granted = 0;
    while (granted < 10 && take(viewer, 1, at).granted) {
      ++granted;
    }
    return granted;
  };
  auto take_b = [&](std::string const& viewer, int n, system_clock::time_point at) {
    return test_support::run(fleet.io, limit_b.try_acquire(viewer, n, at));
  };
  for (int i = 0; i < 40 && take("warm-up", 1, t0).taken_from != wandura::viewer_limit::account::primary; ++i) {
    test_support::wait(fleet.io, 50ms); // connected: Redis decides
  }
  for (int i = 0; i < 40 && take_b("warm-up", 1, t0).taken_from != wandura::viewer_limit::account::primary; ++i) {
    test_support::wait(fleet.io, 50ms);
  }
  REQUIRE(take("viewer:1", 2, t0).taken_from == wandura::viewer_limit::account::primary);   // 4 of 6 left
  REQUIRE(take_b("viewer:1", 1, t0).taken_from == wandura::viewer_limit::account::primary); // 3 left
  redis->pause();
  REQUIRE(take("probe", 1, t0).taken_from == wandura::viewer_limit::account::fallback);
  REQUIRE(take_b("probe", 1, t0).taken_from == wandura::viewer_limit::account::fallback);
  REQUIRE(limit.stats().degraded);
  REQUIRE(limit_b.stats().degraded);
  // Each process from its share of what Redis last said was left: at a half, the two grant 2 + 1 = 3, the rest
  // the fleet had (at 1, 4 + 3 = 7).
  int const a_granted = granted_of_one("viewer:1", t0);
  int b_granted = 0;
  while (b_granted < 10 && take_b("viewer:1", 1, t0).granted) {
    ++b_granted;
  }
  CHECK(a_granted == (share == 1.0 ? 4 : 2));
  CHECK(b_granted == (share == 1.0 ? 3 : 1));
  // Refilled at the share of the rate: 6 a minute, so one ticket in 10 s, or in 20 s at half.
  CHECK(granted_of_one("viewer:1", t0 + 10s) == (share == 1.0 ? 1 : 0));
  CHECK(granted_of_one("viewer:1", t0 + 30s) == (share == 1.0 ? 2 : 1));
  // Never asked about: the share of the burst.
  CHECK(granted_of_one("viewer:new", t0) == (share == 1.0 ? 6 : 3));
  // Above the share's burst but within the burst: goes from a full local bucket, in debt.
  CHECK(take("viewer:big", 5, t0).granted);
  auto const next = take("viewer:big", 1, t0);
  if (share == 1.0) {
    CHECK(next.granted); // the sixth
  } else {
    CHECK_FALSE(next.granted);
    CHECK(next.retry_after == 60s); // the debt of 2 and the ticket, 20 s each at half the rate
  }
  CHECK(granted_of_one("viewer:big", t0) == 0);
  CHECK_FALSE(take("viewer:bigger", 7, t0).granted); // above the burst: never
  redis->resume();
}

TEST_CASE("shared viewer limit: a wait past 31 years from a tiny rate or share is said as 10^12 ms in Redis and "
          "locally") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  auto const t0 = at_ms(1'764'590'400'000);
  wandura::shared_viewer_limit slow(client, "org_demo", {.tickets_per_minute = 1e-9, .burst = 1});
  REQUIRE(test_support::run(io, slow.try_acquire("viewer:1", 1, t0)).granted);
  auto const in_redis = test_support::run(io, slow.try_acquire("viewer:1", 1, t0));
  CHECK_FALSE(in_redis.granted);
  CHECK(in_redis.taken_from == wandura::viewer_limit::account::primary);
  CHECK(in_redis.retry_after == std::chrono::milliseconds(1'000'000'000'000));

  wandura::redis_client down(io.get_executor(), {.url = "redis://127.0.0.1:1"});
  wandura::shared_viewer_limit tiny(down, "org_demo", {.tickets_per_minute = 3, .local_share = 1e-300});
  (void)test_support::run(io, tiny.try_acquire("viewer:1", 1, t0)); // in debt from a full local bucket
  auto const local = test_support::run(io, tiny.try_acquire("viewer:1", 1, t0));
  CHECK_FALSE(local.granted);
  CHECK(local.taken_from == wandura::viewer_limit::account::fallback);
  CHECK(local.retry_after == std::chrono::milliseconds(1'000'000'000'000));
}

TEST_CASE("shared viewer limit: a local_share outside 0 to 1, or too small a share of the rate, is refused with "
          "invalid_argument") {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = "redis://127.0.0.1:1"});
  for (double const bad : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    CHECK(test_support::refused_as_invalid(
        [&] { wandura::shared_viewer_limit limit(client, "org_demo", {.local_share = bad}); }));
  }
  wandura::shared_viewer_limit fine(client, "org_demo", {.local_share = 0.25});
  CHECK(fine.stats().granted == 0);
  // A share of a rate that underflows (a trial: 1e-300 of 1e-300 a minute answered every local take with a wait of
  // INT64_MIN ms, a NaN converted) is refused too; the smallest that counts is taken.
  for (double const rate : {1e-300, 1e-5}) {
    CAPTURE(rate);
    CHECK(test_support::refused_as_invalid([&] {
      wandura::shared_viewer_limit limit(client, "org_demo", {.tickets_per_minute = rate, .local_share = 1e-300});
    }));
  }
  CHECK_NOTHROW(wandura::shared_viewer_limit(client, "org_demo", {.tickets_per_minute = 3, .local_share = 1e-300}));
}

TEST_CASE("shared viewer limit: takes and give-backs while Redis stalls and recovers over and over leave its bucket "
          "where the kept tickets left it") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  two_processes fleet(redis->url()); // b: 500 ms commands, to look at the bucket
  wandura::redis_client fast(fleet.io.get_executor(), {.url = redis->url()}); // the default few ms
  wandura::viewer_limit_options options{.tickets_per_minute = 1, .burst = 100};
  options.fallback.probe_interval = 20ms;
  wandura::shared_viewer_limit limit(fast, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000); // one instant throughout: nothing refills
  auto tokens = [&] {
    return raw(fleet.io, fleet.b, {"HGET", wandura::fleet_keys::viewer("org_demo", {1, 100}, "viewer:1"), "t"}).text;
  };
  // 50 kept for the whole test, taken in Redis (a loaded machine may answer the first takes locally).
  for (int i = 0; i < 100; ++i) {
    auto const kept = test_support::run(fleet.io, limit.try_acquire("viewer:1", 50, t0));
    REQUIRE(kept.granted);
    if (kept.taken_from == account::primary) {
      break;
    }
    test_support::run(fleet.io, limit.release("viewer:1", 50, kept.taken_from, t0));
    test_support::wait(fleet.io, 30ms);
  }
  REQUIRE(tokens() == "50");

  // Eight callers take 1-7 tickets and give them back a few ms later, sixty times each, while Redis is paused and
  // resumed every 7-17 ms: takes answered in Redis, locally, timed out and run late (compensated), give-backs sent
  // to a stalled Redis. Whatever each was decided by, what went to Redis comes back to it exactly once.
  int running = 0;
  std::array<int, 2> granted_by{}; // primary, fallback
  auto caller = [&](int seed) -> asio::awaitable<void> {
    asio::steady_timer pause(co_await asio::this_coro::executor);
    for (int i = 0; i < 60; ++i) {
      int const n = 1 + (seed + i) % 7;
      auto take = limit.try_acquire("viewer:1", n, t0); // named: GCC 12 and co_await temporaries
      auto const decided = co_await std::move(take);
      if (!decided.granted) {
        continue;
      }
      ++granted_by[decided.taken_from == account::primary ? 0 : 1];
      pause.expires_after(std::chrono::milliseconds((seed * 3 + i) % 4));
      co_await pause.async_wait(asio::use_awaitable);
      auto give = limit.release("viewer:1", n, decided.taken_from, t0);
      co_await std::move(give);
    }
    --running;
  };
  auto stall = [&]() -> asio::awaitable<void> {
    asio::steady_timer next(co_await asio::this_coro::executor);
    for (int i = 0; running > 0; ++i) {
      next.expires_after(std::chrono::milliseconds(7 + i % 11));
      co_await next.async_wait(asio::use_awaitable);
      i % 2 == 0 ? redis->pause() : redis->resume();
    }
    redis->resume();
  };
  for (int c = 0; c < 8; ++c) {
    ++running;
    asio::co_spawn(fleet.io, caller(c), asio::detached);
  }
  asio::co_spawn(fleet.io, stall(), asio::detached);
  REQUIRE(test_support::run_until(
      fleet.io, [&] { return running == 0; }, 60s));
  redis->resume();
  REQUIRE(test_support::run_until(
      fleet.io, [&] { return fast.stats().pending == 0; }, 10s));
  INFO("granted in Redis " << granted_by[0] << ", locally " << granted_by[1] << "; compensations "
                           << fast.stats().compensations << ", timeouts " << fast.stats().timeouts);
  CHECK(granted_by[0] > 0);
  CHECK(tokens() == "50");
}

TEST_CASE("shared viewer limit: after SCRIPT FLUSH (or a restart) the script is sent again and answers") {
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

TEST_CASE("shared viewer limit: with redis down at start it answers locally, then shares once redis is up") {
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
  // Redis decides again, and is shared: its bucket for "v" is fresh. The probe that finds it back carries nothing
  // (10 - 1); the next take carries the 8 granted locally, taken first, so 1 is left for the two processes.
  CHECK(test_support::run(io, limit_a.try_acquire("v", 1, t0)).granted);
  CHECK_FALSE(test_support::run(io, limit_a.try_acquire("v", 2, t0)).granted);
  CHECK(test_support::run(io, limit_b.try_acquire("v", 1, t0)).granted);
  CHECK_FALSE(test_support::run(io, limit_a.try_acquire("v", 1, t0)).granted);
  CHECK(limit_a.stats().fallbacks == 2);
  CHECK_FALSE(limit_a.stats().degraded);
  CHECK(count_starting(lines, "INFO fleet viewer_limit: ") == 1);
}

TEST_CASE("shared viewer limit: zero is granted without a round trip, more than the burst never, as in process") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit(fleet.a, "org_demo", {.tickets_per_minute = 30});
  auto const t0 = at_ms(1'764'590'400'000);
  auto const before = fleet.a.stats().commands;
  CHECK(test_support::run(fleet.io, limit.try_acquire("v", 0, t0)).granted);
  CHECK(fleet.a.stats().commands == before);
  REQUIRE(test_support::run(fleet.io, limit.try_acquire("v", 10, t0)).granted);
  auto const never = test_support::run(fleet.io, limit.try_acquire("v", 31, t0));
  CHECK_FALSE(never.granted);
  CHECK(never.retry_after == 20000ms); // until full again, as the local arithmetic says
  CHECK(test_support::run(fleet.io, limit.try_acquire("v", 20, t0)).granted); // the refusal took nothing
}

TEST_CASE("shared viewer limit: more than the burst from a full bucket is refused with a wait of 0 and takes nothing") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit(fleet.a, "org_demo", {.tickets_per_minute = 30});
  auto const t0 = at_ms(1'764'590'400'000);
  auto const never = test_support::run(fleet.io, limit.try_acquire("fresh", 31, t0));
  CHECK_FALSE(never.granted);
  CHECK(never.retry_after == 0ms); // already full: no wait makes it fit
  CHECK(never.taken_from == wandura::viewer_limit::account::primary);
  CHECK(test_support::run(fleet.io, limit.try_acquire("fresh", 30, t0)).granted);
}

TEST_CASE("shared viewer limit: a give-back in Redis fills the bucket up to its capacity, never past it") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit(fleet.a, "org_demo", {.tickets_per_minute = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  REQUIRE(test_support::run(fleet.io, limit.try_acquire("v", 2, t0)).granted);
  test_support::run(fleet.io, limit.release("v", 50, wandura::viewer_limit::account::primary, t0));
  CHECK(raw(fleet.io, fleet.b, {"HGET", wandura::fleet_keys::viewer("org_demo", {10, 10}, "v"), "t"}).text == "10");
  CHECK_FALSE(test_support::run(fleet.io, limit.try_acquire("v", 11, t0)).granted);
  CHECK(test_support::run(fleet.io, limit.try_acquire("v", 10, t0)).granted);
}

TEST_CASE("shared viewer limit: bad arguments are refused with invalid_argument and send nothing") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  for (std::string const& org : {std::string(), std::string("a{b}"), std::string("has space"), std::string(65, 'o')}) {
    CHECK(test_support::refused_as_invalid([&] { wandura::shared_viewer_limit(fleet.a, org, {}); }));
  }
  for (double const rate : {0.0, -1.0, nan, inf}) {
    CHECK(test_support::refused_as_invalid(
        [&] { wandura::shared_viewer_limit(fleet.a, "org_demo", {.tickets_per_minute = rate}); }));
  }
  for (double const burst : {-1.0, nan, inf}) {
    CHECK(
        test_support::refused_as_invalid([&] { wandura::shared_viewer_limit(fleet.a, "org_demo", {.burst = burst}); }));
  }
  wandura::shared_viewer_limit limit(fleet.a, "org_demo", {.tickets_per_minute = 10});
  auto const t0 = at_ms(1'764'590'400'000);
  auto const before = fleet.a.stats().commands;
  using account = wandura::viewer_limit::account;
  CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, limit.try_acquire("", 1, t0)); }));
  CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, limit.try_acquire("v", -1, t0)); }));
  for (auto const from : {account::primary, account::fallback}) {
    CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, limit.release("", 1, from, t0)); }));
    CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, limit.release("v", -1, from, t0)); }));
  }
  CHECK(fleet.a.stats().commands == before);
  CHECK(limit.stats().granted + limit.stats().refused == 0);
}

TEST_CASE("shared viewer limit: with Redis down, beyond local_capacity viewers are granted untracked, full buckets "
          "dropped first") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  redis->kill();
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::viewer_limit_options options{.tickets_per_minute = 2, .local_capacity = 2};
  options.fallback.log = [](std::string_view) {};
  wandura::shared_viewer_limit limit(client, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000);
  using account = wandura::viewer_limit::account;
  auto take = [&](std::string const& viewer, int n) { return test_support::run(io, limit.try_acquire(viewer, n, t0)); };
  auto const first = take("a", 2);
  CHECK(first.granted);
  CHECK(first.taken_from == account::fallback);
  CHECK(take("b", 2).granted);
  CHECK_FALSE(take("a", 1).granted); // tracked: a and b are spent
  // A third viewer while both tracked buckets are spent: granted, not tracked, so never refused.
  for (int i = 0; i < 3; ++i) {
    CHECK(take("c", 2).granted);
  }
  // A give-back of an untracked viewer is ignored; one of a tracked viewer fills its bucket, which is then dropped
  // first when another viewer needs the room.
  test_support::run(io, limit.release("c", 2, account::fallback, t0));
  test_support::run(io, limit.release("a", 2, account::fallback, t0));
  CHECK(take("d", 2).granted);       // a's full bucket made room for d
  CHECK_FALSE(take("d", 1).granted); // and d is tracked
  CHECK_FALSE(take("b", 1).granted); // b still is
  // Later, as the buckets refill (2 a minute): at 30 s neither is full and another viewer goes untracked; by 60 s
  // both are, and are dropped for the next ones, which are tracked again.
  auto take_at = [&](std::string const& viewer, int n, std::chrono::milliseconds later) {
    return test_support::run(io, limit.try_acquire(viewer, n, t0 + later));
  };
  for (int i = 0; i < 3; ++i) {
    CHECK(take_at("e", 2, 30s).granted);
  }
  CHECK(take_at("f", 2, 61s).granted);
  CHECK_FALSE(take_at("f", 1, 61s).granted);
  CHECK(take_at("g", 2, 61s).granted);
  CHECK_FALSE(take_at("g", 1, 61s).granted);
  CHECK(take_at("h", 2, 61s).granted); // f and g are spent: untracked again
}

TEST_CASE("shared viewer limit: a paused Redis costs one command per probe interval, however many calls are in "
          "flight, and the limit recovers when it resumes") {
  // Every call started while the probe waited went to the paused Redis too: 32 calls in flight timed out 775
  // commands in 6 s and filled max_pending, after which even give-backs were refused.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 20ms});
  wandura::viewer_limit_options options{.tickets_per_minute = 1e6};
  options.fallback.probe_interval = 100ms;
  wandura::shared_viewer_limit limit(client, "org_demo", options);
  auto const t0 = at_ms(1'764'590'400'000);
  REQUIRE(test_support::run(io, limit.try_acquire("viewer:0", 1, t0)).taken_from ==
          wandura::viewer_limit::account::primary);
  redis->pause();
  auto const sent_before = client.stats().commands;
  constexpr int in_flight = 32;
  constexpr auto lasting = 1s; // ten probe intervals
  int running = 0;
  int calls = 0;
  auto const start = std::chrono::steady_clock::now();
  std::function<void(int)> launch = [&](int i) {
    ++running;
    asio::co_spawn(io, limit.try_acquire("viewer:" + std::to_string(i % 97), 1, t0),
                   [&, i](std::exception_ptr, wandura::viewer_limit_decision) {
                     --running;
                     ++calls;
                     if (std::chrono::steady_clock::now() - start < lasting) {
                       launch(i + in_flight);
                     }
                   });
  };
  for (int i = 0; i < in_flight; ++i) {
    launch(i);
  }
  auto const settled = [&] { return running == 0; };
  REQUIRE(test_support::run_until(io, settled, 5s));
  auto const sent = client.stats().commands - sent_before;
  INFO("calls " << calls << ", commands " << sent);
  CHECK(calls > 10 * in_flight);
  // The 32 in flight when it paused, then one probe per interval (eleven at most in one second).
  CHECK(sent <= in_flight + 11);
  CHECK(client.stats().pending <= in_flight + 11);
  redis->resume();
  auto back = [&] {
    (void)test_support::run(io, limit.try_acquire("viewer:1", 1, t0));
    return !limit.stats().degraded;
  };
  CHECK(test_support::wait_until(io, back, 2s));
}

namespace {

/// One limiter of 6 tickets a minute (burst 6) on its own client, and a look at its viewers' buckets in Redis.
struct owed_setup {
  explicit owed_setup(test_support::redis_server& server, std::chrono::milliseconds command_timeout = 200ms,
                      double local_share = 1)
      : redis(server), fleet(server.url()),
        client(fleet.io.get_executor(), {.url = server.url(), .command_timeout = command_timeout}),
        limit(client, "org_demo", options(local_share)) {}

  static wandura::viewer_limit_options options(double local_share = 1) {
    wandura::viewer_limit_options out{.tickets_per_minute = 6, .local_share = local_share};
    out.fallback.probe_interval = 100ms;
    return out;
  }
  wandura::viewer_limit_decision take(std::string const& viewer, int n, system_clock::time_point at) {
    return test_support::run(fleet.io, limit.try_acquire(viewer, n, at));
  }
  void give_back(std::string const& viewer, int n, wandura::viewer_limit::account from, system_clock::time_point at) {
    test_support::run(fleet.io, limit.release(viewer, n, from, at));
  }
  /// The tokens of `viewer`'s bucket in Redis.
  double tokens(std::string const& viewer) {
    return std::stod(
        raw(fleet.io, fleet.b, {"HGET", wandura::fleet_keys::viewer("org_demo", {6, 6}, viewer), "t"}).text);
  }
  /// Until Redis decides a take (of a viewer of its own) again, after the probe interval.
  void until_redis_decides() {
    for (int i = 0; i < 100; ++i) {
      if (take("probe:" + std::to_string(i), 1, at_ms(1'764'590'400'000)).taken_from ==
          wandura::viewer_limit::account::primary) {
        return;
      }
      wait(fleet.io, 50ms);
    }
    FAIL("Redis never decided again");
  }
  /// Redis paused, and a take (of a viewer of its own) answered locally: takes answer locally for 100 ms.
  void pause_redis() {
    redis.pause();
    REQUIRE(take("paused", 1, at_ms(1'764'590'400'000)).taken_from == wandura::viewer_limit::account::fallback);
  }
  bool settled() { return client.stats().pending == 0; }
  /// `viewer` takes `in_redis` tickets Redis decides, then `locally` while Redis is paused (owed, from its local
  /// bucket), all at `at`; then Redis is resumed, decides again, and every command has its answer.
  void owe(std::string const& viewer, int in_redis, int locally, system_clock::time_point at) {
    until_redis_decides();
    REQUIRE(take(viewer, in_redis, at).taken_from == wandura::viewer_limit::account::primary);
    pause_redis();
    auto const local = take(viewer, locally, at);
    REQUIRE(local.granted);
    REQUIRE(local.taken_from == wandura::viewer_limit::account::fallback);
    redis.resume();
    until_redis_decides();
    REQUIRE(test_support::run_until(fleet.io, [&] { return settled(); }));
  }

  test_support::redis_server& redis;
  two_processes fleet; // b: to look at the buckets
  wandura::redis_client client;
  wandura::shared_viewer_limit limit;
};

} // namespace

TEST_CASE("shared viewer limit: tickets granted locally while Redis was away are taken from its bucket first when "
          "it answers again less what the refill to the burst absorbed meanwhile") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  auto const t0 = at_ms(1'764'590'400'000);
  s.until_redis_decides();
  for (std::string const viewer : {"viewer:1", "viewer:2", "viewer:3"}) {
    REQUIRE(s.take(viewer, 2, t0).taken_from == account::primary); // 4 of 6 left
  }
  s.pause_redis();
  for (std::string const viewer : {"viewer:1", "viewer:2", "viewer:3"}) {
    auto const local = s.take(viewer, 3, t0); // 1 left locally; Redis still holds 4
    CHECK(local.granted);
    CHECK(local.taken_from == account::fallback);
  }
  redis->resume();
  s.until_redis_decides();
  // At once: the 3 are taken first, then the 1 asked for: nothing left, as if Redis had decided all along.
  auto const at_once = s.take("viewer:1", 1, t0);
  CHECK(at_once.granted);
  CHECK(at_once.taken_from == account::primary);
  CHECK(s.tokens("viewer:1") == Approx(0).margin(1e-9));
  CHECK_FALSE(s.take("viewer:1", 1, t0).granted);
  // 30 s later (3 refilled): Redis's bucket would hold 7 but stops at the burst of 6, and so does the bucket this
  // process would have had without its 3 (4 + 3), while its own holds 1 + 3: 2 are still owed, and 6 - 2 - 1 = 3
  // are left after the ticket, what the local bucket holds.
  CHECK(s.take("viewer:2", 1, t0 + 30s).granted);
  CHECK(s.tokens("viewer:2") == Approx(3).margin(1e-6));
  // A minute later both are full: nothing is owed any more.
  CHECK(s.take("viewer:3", 1, t0 + 60s).granted);
  CHECK(s.tokens("viewer:3") == Approx(5).margin(1e-6));
  CHECK(s.limit.stats().fallbacks >= 4);
}

TEST_CASE("shared viewer limit: owed tickets are taken down to an empty bucket and no further") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  wandura::shared_viewer_limit other(s.fleet.b, "org_demo", owed_setup::options()); // another process
  auto const t0 = at_ms(1'764'590'400'000);
  s.until_redis_decides();
  REQUIRE(s.take("viewer:1", 1, t0).taken_from == account::primary); // 5 left
  s.pause_redis();
  REQUIRE(s.take("viewer:1", 4, t0).taken_from == account::fallback); // owed 4; 1 left locally
  redis->resume();
  auto const others = test_support::run(s.fleet.io, other.try_acquire("viewer:1", 3, t0)); // 2 left in Redis
  REQUIRE(others.granted);
  REQUIRE(others.taken_from == account::primary);
  s.until_redis_decides();
  auto const refused = s.take("viewer:1", 1, t0); // 2 of the 4 owed taken, the rest forgiven: empty
  CHECK_FALSE(refused.granted);
  CHECK(refused.taken_from == account::primary);
  CHECK(refused.retry_after == 10000ms);
  CHECK(s.tokens("viewer:1") == Approx(0).margin(1e-9));
  // Of the 4 granted locally, given back: the 2 Redis took go back to Redis, the 2 it forgave to the local bucket.
  s.give_back("viewer:1", 4, account::fallback, t0);
  CHECK(s.tokens("viewer:1") == Approx(2).margin(1e-9));
}

TEST_CASE("shared viewer limit: locally granted tickets given back go to the local bucket while owed and to Redis "
          "once Redis took them") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  auto const t0 = at_ms(1'764'590'400'000);
  s.owe("viewer:1", 2, 3, t0);                       // 4 left in Redis, 3 owed
  s.give_back("viewer:1", 1, account::fallback, t0); // owed 2: Redis never counted it
  CHECK(s.tokens("viewer:1") == Approx(4).margin(1e-9));
  CHECK(s.take("viewer:1", 1, t0).granted); // the 2 owed, then 1
  CHECK(s.tokens("viewer:1") == Approx(1).margin(1e-9));
  s.give_back("viewer:1", 2, account::fallback, t0); // Redis took them: back to Redis
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-9));
  s.give_back("viewer:1", 1, account::fallback, t0); // more than Redis took: to the local bucket only
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-9));
  // 2 + 3 + 1 taken, 3 given back: 3 left, counted once.
}

TEST_CASE("shared viewer limit: owed tickets a take carried that Redis ran after the take timed out are counted "
          "once: forgiven here and taken there") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  auto const t0 = at_ms(1'764'590'400'000);
  s.owe("viewer:1", 2, 3, t0); // 4 left in Redis, 3 owed
  auto const compensations = s.client.stats().compensations;
  redis->pause();
  // Sent with the 3 owed and timed out: Redis may have run it, so the 3 are no longer owed here (Redis may count
  // them, once); the ticket is decided locally, and not owed either (Redis may have counted the take).
  auto const late = s.take("viewer:1", 1, t0);
  CHECK(late.taken_from == account::fallback);
  CHECK(late.granted);
  redis->resume();
  REQUIRE(test_support::run_until(s.fleet.io, [&] { return s.settled(); }));
  CHECK(s.client.stats().compensations == compensations + 1);
  CHECK(s.tokens("viewer:1") == Approx(1).margin(1e-9)); // it ran (4 - 3 - 1) and gave its own ticket back
  s.until_redis_decides();
  // Nothing owed: the last one. The ticket granted here while the take's fate was unknown goes uncounted (it ran
  // and gave its own back): 2 + 3 + 1 + 1 tickets of 6, erring towards the viewer.
  auto const after = s.take("viewer:1", 1, t0);
  CHECK(after.granted);
  CHECK(after.taken_from == account::primary);
  CHECK(s.tokens("viewer:1") == Approx(0).margin(1e-9));
  // The 3 the late take counted go back to Redis with a give-back, as any Redis took.
  s.give_back("viewer:1", 3, account::fallback, t0);
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-9));
}

TEST_CASE("shared viewer limit: tickets granted locally while Redis was down are charged once it is up again, the "
          "refused probes meanwhile carrying none") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  auto const t0 = at_ms(1'764'590'400'000);
  s.until_redis_decides();
  REQUIRE(s.take("viewer:1", 2, t0).taken_from == account::primary); // 4 left
  redis->kill();
  REQUIRE(s.take("down", 1, t0).taken_from == account::fallback); // its connection broke: an outage begins
  // One local take now and one after each probe interval: every probe is refused, none carries the owed.
  for (int i = 0; i < 3; ++i) {
    auto const local = s.take("viewer:1", 1, t0);
    CHECK(local.granted);
    CHECK(local.taken_from == account::fallback);
    wait(s.fleet.io, 150ms);
  }
  redis->start(); // empty: the viewer's bucket starts full again
  s.until_redis_decides();
  CHECK(s.take("viewer:1", 1, t0).granted); // the 3 owed first, then 1
  CHECK(s.tokens("viewer:1") == Approx(2).margin(1e-9));
}

TEST_CASE("shared viewer limit: locally granted tickets given back while a take carries them go to Redis") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis, 2000ms); // a take waits for a paused Redis rather than answering locally
  auto const t0 = at_ms(1'764'590'400'000);
  s.owe("viewer:1", 2, 3, t0); // 4 left in Redis (the local take ran late and was given back), 3 owed
  REQUIRE(s.tokens("viewer:1") == Approx(4).margin(1e-9));

  redis->pause();
  std::optional<wandura::viewer_limit_decision> carrying;
  asio::co_spawn(s.fleet.io, s.limit.try_acquire("viewer:1", 1, t0),
                 [&](std::exception_ptr, wandura::viewer_limit_decision d) { carrying = d; });
  s.fleet.io.restart();
  s.fleet.io.run_for(50ms); // sent with the 3 owed, waiting on the paused server
  REQUIRE_FALSE(carrying);
  bool given_back = false; // 2 of the 3 it carries: sent to Redis behind it
  asio::co_spawn(s.fleet.io, s.limit.release("viewer:1", 2, account::fallback, t0),
                 [&](std::exception_ptr) { given_back = true; });
  s.fleet.io.run_for(50ms);
  redis->resume();
  REQUIRE(test_support::run_until(s.fleet.io, [&] { return carrying.has_value() && given_back; }));
  CHECK(carrying->granted);
  CHECK(carrying->taken_from == account::primary);
  // Redis took the 3 and the 1, then got the 2 back: 2 + 3 + 1 taken, 2 back.
  CHECK(s.tokens("viewer:1") == Approx(2).margin(1e-9));
  s.give_back("viewer:1", 1, account::fallback, t0); // the last of the 3 Redis took: back there
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-9));
}

TEST_CASE("shared viewer limit: at a local_share of 1/2 a process that served a viewer alone owes nothing Redis's "
          "own refill covered") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis, 200ms, 0.5);
  auto const t0 = at_ms(1'764'590'400'000);
  s.until_redis_decides();
  for (std::string const viewer : {"viewer:1", "viewer:2"}) {
    REQUIRE(s.take(viewer, 2, t0).taken_from == account::primary); // 4 left; locally half: 2
  }
  s.pause_redis();
  for (std::string const viewer : {"viewer:1", "viewer:2"}) {
    REQUIRE(s.take(viewer, 2, t0).taken_from == account::fallback); // owed 2; the local half is spent
  }
  redis->resume();
  s.until_redis_decides();
  // 20 s later Redis's bucket has refilled 2 (to the burst of 6): the 2 still owed, then the ticket.
  CHECK(s.take("viewer:1", 1, t0 + 20s).granted);
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-6));
  // 40 s later it would have been full with the 2 taken in Redis: nothing owed (at the share's rate, a process
  // would still owe 1, half of the refill being another's).
  CHECK(s.take("viewer:2", 1, t0 + 40s).granted);
  CHECK(s.tokens("viewer:2") == Approx(5).margin(1e-6));
}

TEST_CASE("shared viewer limit: a ticket granted here for a take that timed out is never owed: counted in Redis at "
          "most once whether Redis granted the take late or refused it") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  owed_setup s(*redis);
  wandura::shared_viewer_limit other(s.fleet.b, "org_demo", owed_setup::options()); // another process
  auto const t0 = at_ms(1'764'590'400'000);
  s.until_redis_decides();
  REQUIRE(s.take("viewer:1", 2, t0).taken_from == account::primary); // 4 left
  REQUIRE(s.take("viewer:2", 2, t0).taken_from == account::primary); // 4 left, as this process last saw
  auto const drained = test_support::run(s.fleet.io, other.try_acquire("viewer:2", 4, t0)); // none left in Redis
  REQUIRE(drained.granted);
  REQUIRE(drained.taken_from == account::primary);
  auto const compensations = s.client.stats().compensations;
  redis->pause();
  // Each take is sent (the first while Redis seems well, the others as the probe of each interval: a viewer
  // asking once an interval is every probe), times out and is granted here.
  for (int i = 0; i < 3; ++i) {
    auto const local = s.take("viewer:1", 1, t0);
    CHECK(local.granted);
    CHECK(local.taken_from == account::fallback);
    wait(s.fleet.io, 150ms);
  }
  auto const only_here = s.take("viewer:2", 1, t0);
  CHECK(only_here.granted);
  CHECK(only_here.taken_from == account::fallback);
  redis->resume();
  REQUIRE(test_support::run_until(s.fleet.io, [&] { return s.settled(); }));
  // viewer:1's three ran late, granted, and were given back there; viewer:2's was refused there (empty).
  CHECK(s.client.stats().compensations == compensations + 3);
  CHECK(s.tokens("viewer:1") == Approx(4).margin(1e-9));
  CHECK(s.tokens("viewer:2") == Approx(0).margin(1e-9));
  // Not owed: the next takes carry nothing (a lost late reply may have counted them in Redis; here they count
  // nowhere, erring towards the viewer).
  s.until_redis_decides();
  CHECK(s.take("viewer:1", 1, t0).granted);
  CHECK(s.tokens("viewer:1") == Approx(3).margin(1e-9));
  auto const refilled = s.take("viewer:2", 1, t0 + 10s); // 1 refilled, nothing owed: granted
  CHECK(refilled.granted);
  CHECK(refilled.taken_from == account::primary);
  CHECK(s.tokens("viewer:2") == Approx(0).margin(1e-6));
}
