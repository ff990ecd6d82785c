// The admission gate with real threads: requests admitted, queued, released and cancelled from an io_context run by
// several threads while responses are observed from others (run it under the tsan preset to check the locking).
// Time is still a hand-stepped clock.
#include "wandura/resilience/admission_gate.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;

namespace {

/// One request: waits at the gate (with a deadline some requests cannot meet) and reports the response.
asio::awaitable<void> request(wandura::admission_gate& gate, wandura::clock& clock, int i, std::atomic<int>& admitted,
                              std::atomic<int>& expired, std::atomic<int>& shed) {
  auto const cls = i % 3 == 0 ? wandura::request_class::prefetch : wandura::request_class::play;
  auto const deadline = clock.now() + (i % 5 == 0 ? 1s : 60s);
  auto const a = co_await gate.admit("playback", cls, 1, deadline);
  switch (a.verdict) {
  case wandura::admission_verdict::admitted: {
    ++admitted;
    wandura::counter_feedback ok;
    ok.status = 200;
    ok.granted = 1;
    gate.observe("playback", ok);
    break;
  }
  case wandura::admission_verdict::deadline_exceeded: ++expired; break;
  case wandura::admission_verdict::shed: ++shed; break;
  case wandura::admission_verdict::cancelled: break;
  }
}

} // namespace

TEST_CASE("admission gate threads: every queued request completes once, from several threads") {
  asio::io_context io;
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::admission_gate gate(clock);
  wandura::counter_feedback refused;
  refused.status = 429;
  refused.refused = 1;
  refused.retry_after = 1s;
  refused.limit = 6000; // 100 a second
  refused.window = 60s;
  gate.observe("playback", refused);

  auto work = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&io] { io.run(); });
  }
  constexpr int requests = 600;
  std::atomic<int> admitted{0};
  std::atomic<int> expired{0};
  std::atomic<int> shed{0};
  for (int i = 0; i < requests; ++i) {
    asio::co_spawn(io, request(gate, *clock, i, admitted, expired, shed), [](std::exception_ptr e) {
      if (e) {
        std::rethrow_exception(e);
      }
    });
  }
  // A 429 now and then from another thread while the queue drains.
  std::thread observer([&] {
    for (int i = 0; i < 20; ++i) {
      gate.observe("playback", refused);
      std::this_thread::sleep_for(1ms);
    }
  });
  for (int step = 0; step < 20000 && admitted + expired + shed < requests; ++step) {
    clock->advance(10ms);
    std::this_thread::sleep_for(100us);
  }
  observer.join();
  // Timers armed for wake-ups that are no longer needed still hold the io_context's work: let their time come.
  for (int step = 0; step < 1000 && clock->pending_sleeps() > 0; ++step) {
    clock->advance(100ms);
  }
  work.reset();
  for (auto& t : threads) {
    t.join();
  }
  CHECK(admitted + expired + shed == requests);
  CHECK(admitted > 0);
  CHECK(expired > 0); // deadlines of 1 s cannot all be met at 100 a second behind a hold-off
  auto const stats = gate.stats();
  CHECK(stats.front().queued_play == 0);
  CHECK(stats.front().queued_prefetch == 0);
}

TEST_CASE("threads: concurrent 429s keep the longest hold-off of each counter") {
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::admission_gate gate(clock);
  auto const t = clock->now();
  auto worker = [&](int offset) {
    for (int i = 0; i < 2000; ++i) {
      wandura::counter_feedback f;
      f.status = 429;
      f.refused = 1;
      f.retry_after = std::chrono::milliseconds(offset + i);
      gate.observe(i % 2 == 0 ? "playback" : "config", f);
    }
  };
  std::thread a(worker, 0);
  std::thread b(worker, 5);
  a.join();
  b.join();
  CHECK(gate.held_until("playback") == t + std::chrono::milliseconds(5 + 1998));
  CHECK(gate.held_until("config") == t + std::chrono::milliseconds(5 + 1999));
}
