// The retry engine shared by many coroutines on an io_context run by two threads, as a client is used in a
// backend. Zero backoff keeps it fast; it runs on the real clock, so it is labelled integration, and it is the test
// to run under TSan for the engine's shared state (budget, hold-offs, counters, fake transport).
#include "wandura/resilience/retry_engine.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/testing/fake_transport.hpp"

using namespace std::chrono_literals;

TEST_CASE("retry engine: many calls from two threads share one engine, its budget and its counters") {
  asio::io_context io;
  auto const clock = std::make_shared<wandura::real_clock>();
  wandura::testing::fake_transport fake(io.get_executor(), *clock);
  constexpr int calls = 200;
  // Every third of the first `calls` attempts fails with a reset; everything else answers 200. (Failing every third
  // attempt forever would make the retries of failed calls, which travel together, fail together, 4 times in a row.)
  for (std::size_t attempt = 1; attempt <= calls; attempt += 3) {
    fake.fail_at(attempt, wandura::errc::connection_reset);
  }
  wandura::retry_options options;
  options.policy.initial_delay = 0ms; // full jitter under 0: no waiting
  options.time_source = clock;
  options.budget.percent = 100; // every call may retry once
  std::atomic<int> hook_calls{0};
  options.on_retry = [&](wandura::retry_event const&) { hook_calls.fetch_add(1); };
  wandura::retry_engine engine(fake, options);

  std::mutex failures_mutex; // Catch2 is not thread-safe: collect, then check on this thread
  std::vector<std::string> failures;
  std::atomic<int> done{0};
  std::atomic<int> succeeded{0};
  std::atomic<int> attempts{0};
  for (int i = 0; i < calls; ++i) {
    wandura::http_request request;
    request.method = i % 2 == 0 ? wandura::http_method::post : wandura::http_method::get;
    request.url = "http://127.0.0.1:1/v1/config";
    asio::co_spawn(io, engine.call(std::move(request), {"config", false, 0ms}, engine.settings_for()),
                   [&](std::exception_ptr e, wandura::call_result r) {
                     if (!e && r.ok()) {
                       succeeded.fetch_add(1);
                     } else {
                       std::lock_guard lock(failures_mutex);
                       failures.push_back(std::string(wandura::to_string(r.stopped)) + ": " + r.error.message());
                     }
                     attempts.fetch_add(r.attempts);
                     done.fetch_add(1);
                   });
  }
  std::thread second([&] { io.run(); });
  io.run();
  second.join();

  CHECK(failures == std::vector<std::string>{});
  CHECK(done.load() == calls);
  CHECK(succeeded.load() == calls);
  auto const stats = engine.stats();
  CHECK(stats.calls == static_cast<std::uint64_t>(calls));
  CHECK(stats.attempts == static_cast<std::uint64_t>(attempts.load()));
  CHECK(stats.attempts == fake.attempt_count());
  CHECK(stats.retries == static_cast<std::uint64_t>(hook_calls.load()));
  CHECK(stats.attempts == stats.calls + stats.retries);
  CHECK(engine.budget().snapshot(clock->now()).requests == calls);
  // POSTs carried a key each; distinct calls, distinct keys.
  std::size_t keyed = 0;
  for (auto const& a : fake.attempts()) {
    if (a.request.method == wandura::http_method::post) {
      CHECK(a.header("Idempotency-Key").size() == 32);
      ++keyed;
    }
  }
  CHECK(keyed > 0);
}
