// `wandura::fleet::shutdown`: a program with a fleet and a client it configured can end. The README's shape (one
// io_context, no work guard, one call) against the in-process emulator and a real redis-server: `io.run()` returns
// after `shutdown()`, with Redis up or killed, and the client keeps working from local state meanwhile.
#include "wandura/fleet/fleet.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "fleet_test_support.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/playback/client.hpp"

using namespace std::chrono_literals;

namespace {

/// The lines a fleet logs, from any thread.
struct log_lines {
  std::mutex mutex;
  std::vector<std::string> lines;

  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    };
  }
  std::size_t starting(std::string_view prefix) {
    std::lock_guard lock(mutex);
    return test_support::count_starting(lines, prefix);
  }
};

/// A program as the README writes it: an io_context without a work guard, a fleet on it and a client configured
/// by it, the in-process emulator as the API.
struct program {
  std::unique_ptr<wandura::emulator::server> emu = wandura::emulator::server::start({});
  log_lines log;
  asio::io_context io;
  std::unique_ptr<wandura::fleet> shared;
  std::unique_ptr<wandura::client> api;

  explicit program(std::string const& redis_url) {
    wandura::fleet_options fo;
    fo.redis.url = redis_url;
    fo.redis.command_timeout = 500ms; // a loaded test machine: the default few ms are not what is tested here
    fo.org = "acme";
    fo.fallback.log = log.sink();
    shared = std::make_unique<wandura::fleet>(io.get_executor(), std::move(fo));
    wandura::client_options options;
    options.base_url = emu->base_url();
    options.api_key = "test-key";
    options.viewer_tickets_per_minute = 30;
    shared->configure(options);
    api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));
  }

  /// One start of episode 4 for the one viewer of these tests, on `device`.
  asio::awaitable<wandura::episode_start> start(std::string device) {
    wandura::viewer who{"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", std::move(device), "kek-1"};
    auto op = api->start_episode(std::move(who), "the-heiress-returns", 4, 6);
    co_return co_await std::move(op);
  }
};

/// Waits on the coroutine's executor until `done()` or `limit` passed; whether `done()` held.
template <class Done> asio::awaitable<bool> wait_until(Done done, std::chrono::milliseconds limit) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto const until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) {
    timer.expires_after(10ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return done();
}

/// What the coroutine of one program saw, read after `run()` returned.
struct observed {
  std::optional<wandura::item_outcome> before;
  std::optional<wandura::item_outcome> after;
  std::optional<wandura::item_outcome> other;
  bool after_reused = false;
  bool subscription_live = false;
  bool keys_known = false;
  std::uint64_t commands_at_shutdown = 0;
  std::chrono::steady_clock::time_point shut_at{};
  std::chrono::steady_clock::time_point done_at{};
  std::exception_ptr failure;
};

} // namespace

TEST_CASE("fleet shutdown: io.run returns with a configured client alive after a call, redis up", "[fleet][shutdown]") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  program p(redis->url());
  observed seen;
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await p.start("device-1");
        seen.before = first.play.outcome;
        // The ticket kept locally opens the erase subscription: the part that reconnects forever.
        seen.subscription_live = co_await wait_until([&] { return p.shared->stats().tickets.near_cache_live; }, 5000ms);
        // And its replica of keys read whole: the commands the cache sends on its own are done.
        seen.keys_known = co_await wait_until([&] { return p.shared->stats().tickets.known_keys_complete; }, 5000ms);
        seen.commands_at_shutdown = p.shared->stats().redis.commands;
        seen.shut_at = std::chrono::steady_clock::now();
        p.shared->shutdown();
        // The same ticket again, and a new device: from local state, no Redis command.
        auto again = co_await p.start("device-1");
        seen.after = again.play.outcome;
        seen.after_reused = again.play.reused;
        auto other = co_await p.start("device-2");
        seen.other = other.play.outcome;
      },
      [&](std::exception_ptr e) {
        seen.failure = e;
        seen.done_at = std::chrono::steady_clock::now();
      });
  auto const began = std::chrono::steady_clock::now();
  REQUIRE(test_support::run_returns_within(p.io, 20000ms));
  INFO("io.run() returned after " << test_support::elapsed_ms(began) << " ms: "
                                  << test_support::elapsed_ms(seen.shut_at) << " ms after shutdown() (two calls made "
                                  << "in between), " << test_support::elapsed_ms(seen.done_at)
                                  << " ms after the last call completed");
  if (seen.failure) {
    std::rethrow_exception(seen.failure);
  }
  CHECK(seen.before == wandura::item_outcome::granted);
  CHECK(seen.subscription_live);
  CHECK(seen.keys_known);
  CHECK(seen.after == wandura::item_outcome::granted);
  CHECK(seen.after_reused);                            // the local copy answered
  CHECK(seen.other == wandura::item_outcome::granted); // issued by the API, kept locally
  auto const s = p.shared->stats();
  CHECK(s.redis.commands == seen.commands_at_shutdown); // nothing asked of Redis after the shutdown
  CHECK(s.fallbacks > 0);
  CHECK(s.degraded);
  CHECK_FALSE(s.tickets.near_cache_live);
  CHECK(p.log.starting("INFO fleet: shut down") == 1);
  CHECK(p.log.starting("WARN") == 0);
  // Destroying everything afterwards, client last: nothing of the fleet runs any more.
  p.shared.reset();
  p.api.reset();
}

TEST_CASE("fleet shutdown: io.run returns when redis is down at the time", "[fleet][shutdown]") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  program p(redis->url());
  observed seen;
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await p.start("device-1");
        seen.before = first.play.outcome;
        seen.subscription_live = co_await wait_until([&] { return p.shared->stats().tickets.near_cache_live; }, 5000ms);
        redis->kill();
        // The subscription noticed and is reconnecting (with backoff) when the fleet is shut down.
        co_await wait_until([&] { return !p.shared->stats().tickets.near_cache_live; }, 5000ms);
        p.shared->shutdown();
        auto again = co_await p.start("device-1");
        seen.after = again.play.outcome;
        seen.after_reused = again.play.reused;
      },
      [&](std::exception_ptr e) { seen.failure = e; });
  REQUIRE(test_support::run_returns_within(p.io, 20000ms));
  if (seen.failure) {
    std::rethrow_exception(seen.failure);
  }
  CHECK(seen.before == wandura::item_outcome::granted);
  CHECK(seen.subscription_live);
  CHECK(seen.after == wandura::item_outcome::granted);
  CHECK(seen.after_reused);
  CHECK(p.log.starting("INFO fleet: shut down") == 1);
}

TEST_CASE("fleet shutdown: a call waiting on a stalled Redis is answered locally at once, not at its timeout",
          "[fleet][shutdown]") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  program p(redis->url()); // 500 ms commands
  observed seen;
  std::chrono::milliseconds waited{};
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await p.start("device-1"); // connected, the scripts loaded
        seen.before = first.play.outcome;
        redis->pause();
        std::optional<wandura::episode_start> stalled;
        asio::co_spawn(co_await asio::this_coro::executor, p.start("device-2"),
                       [&](std::exception_ptr e, wandura::episode_start r) {
                         if (e) {
                           seen.failure = e;
                         } else {
                           stalled = std::move(r);
                         }
                       });
        asio::steady_timer sent(co_await asio::this_coro::executor, 50ms); // its commands wait on the paused server
        co_await sent.async_wait(asio::use_awaitable);
        auto const shut = std::chrono::steady_clock::now();
        p.shared->shutdown();
        co_await wait_until([&] { return stalled.has_value() || seen.failure != nullptr; }, 5000ms);
        waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - shut);
        if (stalled) {
          seen.after = stalled->play.outcome;
        }
      },
      [&](std::exception_ptr e) {
        if (e) {
          seen.failure = e;
        }
      });
  REQUIRE(test_support::run_returns_within(p.io, 20000ms));
  redis->resume();
  if (seen.failure) {
    std::rethrow_exception(seen.failure);
  }
  CHECK(seen.before == wandura::item_outcome::granted);
  CHECK(seen.after == wandura::item_outcome::granted);
  CHECK(waited < 400ms); // a command timeout is 500 ms
  CHECK(p.shared->stats().fallbacks >= 1);
}

TEST_CASE("fleet shutdown: redis never reachable, io.run returns and calls are answered locally", "[fleet][shutdown]") {
  // A port nothing listens on: every connect is refused, the parts fall back (one WARN each), and the connection
  // is retried after each backoff until the shutdown.
  program p("redis://127.0.0.1:" + std::to_string(test_support::free_loopback_port()));
  observed seen;
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await p.start("device-1");
        seen.before = first.play.outcome;
        p.shared->shutdown();
        auto again = co_await p.start("device-1");
        seen.after = again.play.outcome;
        seen.after_reused = again.play.reused;
      },
      [&](std::exception_ptr e) { seen.failure = e; });
  REQUIRE(test_support::run_returns_within(p.io, 20000ms));
  if (seen.failure) {
    std::rethrow_exception(seen.failure);
  }
  CHECK(seen.before == wandura::item_outcome::granted);
  CHECK(seen.after == wandura::item_outcome::granted);
  CHECK(seen.after_reused);
  CHECK(p.shared->stats().redis.connects == 0);
}

TEST_CASE("fleet shutdown: twice, from other threads, the fleet destroyed at once, the client still working",
          "[fleet][shutdown]") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  program p(redis->url());
  std::atomic<bool> first_done{false};
  std::atomic<bool> go_on{false};
  observed seen;
  asio::co_spawn(
      p.io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await p.start("device-1");
        seen.before = first.play.outcome;
        seen.subscription_live = co_await wait_until([&] { return p.shared->stats().tickets.near_cache_live; }, 5000ms);
        first_done = true;
        // Keeps run() busy on its own until the other threads are done with the fleet.
        co_await wait_until([&] { return go_on.load(); }, 10000ms);
        auto again = co_await p.start("device-1");
        seen.after = again.play.outcome;
        seen.after_reused = again.play.reused;
      },
      [&](std::exception_ptr e) { seen.failure = e; });
  std::atomic<bool> returned{false};
  std::thread runner([&] {
    p.io.run();
    returned = true;
  });
  REQUIRE(test_support::wait_until([&] { return first_done.load(); }));
  // Two threads at once, neither of them the io_context's, then the fleet object is destroyed before the
  // shutdown's posted step may have run: the clients hold the state it closes.
  std::thread a([&] { p.shared->shutdown(); });
  std::thread b([&] { p.shared->shutdown(); });
  a.join();
  b.join();
  p.shared->shutdown();
  auto const last = p.shared->stats();
  p.shared.reset();
  go_on = true;
  bool const in_time = test_support::wait_until([&] { return returned.load(); }, 20s);
  if (!in_time) {
    p.io.stop();
  }
  runner.join();
  REQUIRE(in_time);
  if (seen.failure) {
    std::rethrow_exception(seen.failure);
  }
  CHECK(seen.before == wandura::item_outcome::granted);
  CHECK(seen.subscription_live);
  CHECK(seen.after == wandura::item_outcome::granted);
  CHECK(seen.after_reused);
  CHECK(last.cross_process_reuse == 0);
  CHECK(p.log.starting("INFO fleet: shut down") == 1);
  CHECK(p.log.starting("WARN") == 0);
  p.api.reset();
}

TEST_CASE("fleet lifetime: destroyed on another thread while two io threads read late replies, without shutdown",
          "[fleet][lifetime]") {
  // A fleet on a multi-threaded io_context, destroyed with its ticket store and viewer limit on the main thread
  // while the strand reads the late replies of thousands of calls that fell back (a Redis that stalled and came
  // back): the connection must be freed on the strand, not under the read. Crashed within a round or two when it
  // was freed by whoever let go of the fleet's state last. Rounds until 8 or 3 s, each destroying at another
  // moment of the read.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto const until = std::chrono::steady_clock::now() + 3s;
  int rounds = 0;
  for (; rounds < 8 && std::chrono::steady_clock::now() < until; ++rounds) {
    CAPTURE(rounds);
    asio::io_context io(2);
    auto work = asio::make_work_guard(io);
    wandura::fleet_options fo;
    fo.redis.url = redis->url();
    fo.redis.command_timeout = 3ms;
    fo.redis.max_pending = 100000;
    fo.org = "acme";
    fo.known_keys_capacity = 0;
    fo.fallback.probe_interval = 0ms;
    auto shared = std::make_unique<wandura::fleet>(io.get_executor(), fo);
    wandura::client_options options;
    options.base_url = "http://127.0.0.1:1";
    options.api_key = "test-key";
    options.viewer_tickets_per_minute = 30;
    shared->configure(options);
    auto store = options.tickets;
    auto limit = options.viewer_limit;
    options = {};
    std::atomic<int> done{0};
    std::atomic<int> returned{0};
    std::vector<std::thread> runners;
    for (int i = 0; i < 2; ++i) {
      runners.emplace_back([&] {
        io.run();
        ++returned;
      });
    }
    auto const count = [&](std::exception_ptr /*unused*/, auto&& /*unused*/) { ++done; };
    asio::co_spawn(io, store->find({wandura::ticket_key{"v", "d", "f", 1, wandura::intent::play}}), count);
    REQUIRE(test_support::wait_until([&] { return done.load() == 1; }, 5s)); // connected
    redis->pause();
    constexpr int n = 3000;
    for (int i = 0; i < n; ++i) {
      asio::co_spawn(io, limit->acquire("viewer-" + std::to_string(i), 1), count);
      asio::co_spawn(
          io, store->find({wandura::ticket_key{"v" + std::to_string(i), "d", "f", 1, wandura::intent::play}}), count);
    }
    bool const fell_back = test_support::wait_until([&] { return done.load() == 1 + 2 * n; }, 10s);
    redis->resume();
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rounds * 400));
    store.reset(); // the fleet's state goes with the last of these three, on this thread
    limit.reset();
    shared.reset();
    work.reset();
    bool const ended = test_support::wait_until([&] { return returned.load() == 2; }, 5s);
    if (!ended) {
      io.stop();
    }
    for (auto& r : runners) {
      r.join();
    }
    REQUIRE(fell_back);
    CHECK(ended); // the connection was closed on the strand: nothing keeps run() busy
  }
  CHECK(rounds >= 2);
}

TEST_CASE("fleet shutdown: a fleet and a client that made no call, shut down before run", "[fleet][shutdown]") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  program p(redis->url());
  p.shared->shutdown();
  REQUIRE(test_support::run_returns_within(p.io, 5000ms));
  CHECK(p.shared->stats().redis.connects == 0);
  CHECK(p.shared->stats().redis.commands == 0);
}
