#include "wandura/testing/manual_clock.hpp"

#include <memory>
#include <optional>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wandura::testing::manual_clock;

namespace {
void sleep(asio::io_context& io, manual_clock& clock, manual_clock::time_point when, std::vector<int>& order, int id,
           asio::cancellation_slot slot = {}) {
  asio::co_spawn(io, clock.sleep_until(when),
                 asio::bind_cancellation_slot(
                     slot, [&order, id](std::exception_ptr, std::error_code ec) { order.push_back(ec ? -id : id); }));
}
} // namespace

TEST_CASE("manual clock: time moves only when advanced, wall clock with it") {
  manual_clock clock;
  auto const t = clock.now();
  auto const w = clock.system_now();
  CHECK(clock.now() == t);
  clock.advance(1500ms);
  CHECK(clock.now() - t == 1500ms);
  CHECK(clock.system_now() - w == 1500ms);
  CHECK(clock.elapsed() == 1500ms);
  clock.advance(-5s); // never backwards
  CHECK(clock.now() - t == 1500ms);
}

TEST_CASE("manual clock: sleepers wake in time order when the clock passes them, never inline") {
  manual_clock clock;
  asio::io_context io;
  std::vector<int> order;
  auto const t = clock.now();
  sleep(io, clock, t + 3s, order, 3);
  sleep(io, clock, t + 1s, order, 1);
  sleep(io, clock, t + 2s, order, 2);
  io.poll();
  CHECK(clock.pending_sleeps() == 3);
  CHECK(clock.next_wakeup() == t + 1s);
  clock.advance(2s);
  CHECK(order.empty()); // completions are posted, not run inside advance()
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{1, 2});
  CHECK(clock.advance_to_next_wakeup());
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK(clock.now() - t == 3s);
  CHECK_FALSE(clock.advance_to_next_wakeup());
}

TEST_CASE("manual clock: a sleep until a past time completes without advancing") {
  manual_clock clock;
  asio::io_context io;
  std::vector<int> order;
  sleep(io, clock, clock.now() - 1s, order, 7);
  io.poll();
  CHECK(order == std::vector<int>{7});
  CHECK(clock.elapsed() == 0ms);
}

TEST_CASE("manual clock: cancelling a sleep completes it with operation_aborted and forgets it") {
  manual_clock clock;
  asio::io_context io;
  std::vector<int> order;
  asio::cancellation_signal signal;
  sleep(io, clock, clock.now() + 10s, order, 4, signal.slot());
  io.poll();
  REQUIRE(clock.pending_sleeps() == 1);
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{-4});
  CHECK(clock.pending_sleeps() == 0);
  clock.advance(20s);
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{-4}); // completed exactly once
}

TEST_CASE("manual clock: a huge advance saturates at the end of time and wakes a sleeper there") {
  asio::io_context io;
  manual_clock clock;
  std::vector<int> order;
  sleep(io, clock, manual_clock::time_point::max(), order, 1);
  io.poll();
  REQUIRE(clock.pending_sleeps() == 1);
  CHECK(clock.advance_to_next_wakeup()); // to time_point::max(): the wall clock saturates with it
  CHECK(clock.now() == manual_clock::time_point::max());
  CHECK(clock.system_now() == std::chrono::system_clock::time_point::max());
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{1});

  manual_clock other;
  auto const before = other.now();
  other.advance(manual_clock::duration::max());
  CHECK(other.now() == manual_clock::time_point::max());
  CHECK(other.now() > before);
  CHECK(other.system_now() == std::chrono::system_clock::time_point::max());
  other.advance(1s); // already at the end: stays there
  CHECK(other.now() == manual_clock::time_point::max());
}

TEST_CASE("manual clock: elapsed saturates where a duration cannot hold it") {
  manual_clock clock(manual_clock::time_point(-1000h), std::chrono::system_clock::time_point{});
  clock.advance(manual_clock::duration::max()); // a whole duration: 1000 h short of the end
  CHECK(clock.now() == manual_clock::time_point::max() - 1000h);
  CHECK(clock.elapsed() == manual_clock::duration::max());
  clock.advance(1000h);
  CHECK(clock.now() == manual_clock::time_point::max());
  CHECK(clock.elapsed() == manual_clock::duration::max()); // 1000 h more than a duration holds
}

namespace {
/// Counts its destruction; made inside a sleeping coroutine, so that the coroutine's end shows.
struct end_marker {
  int* ended;
  manual_clock* clock;
  ~end_marker() {
    ++*ended;
    (void)clock->now(); // what a client's destructor does (its gate reads the clock): must not deadlock
  }
};

asio::awaitable<void> sleep_holding(std::shared_ptr<manual_clock> clock, int* ended) {
  end_marker marker{ended, clock.get()};
  (void)co_await clock->sleep_until(clock->now() + 1h);
}
} // namespace

TEST_CASE("manual clock: a sleep whose context ends first is dropped with it, its coroutine freed") {
  // The clock outlives the context (declared first, or shared): the pending sleep must not be posted later into the
  // freed context, and the coroutine, which holds the clock, must not be kept alive by it (a cycle).
  auto clock = std::make_shared<manual_clock>();
  int ended = 0;
  {
    asio::io_context io;
    asio::co_spawn(io, sleep_holding(clock, &ended), asio::detached);
    io.poll();
    REQUIRE(clock->pending_sleeps() == 1);
    CHECK(clock.use_count() == 2); // the coroutine's copy
    CHECK(ended == 0);
  }
  CHECK(ended == 1);
  CHECK(clock.use_count() == 1);
  CHECK(clock->pending_sleeps() == 0);
  CHECK_FALSE(clock->next_wakeup().has_value());
  CHECK_FALSE(clock->advance_to_next_wakeup());
  clock->advance(2h); // nothing to wake, nothing posted anywhere
  CHECK(ended == 1);

  SECTION("a sleep that came due before the context ended is dropped too") {
    asio::io_context io;
    asio::co_spawn(io, sleep_holding(clock, &ended), asio::detached);
    io.poll();
    clock->advance(2h); // posted to the context, never run
    CHECK(clock->pending_sleeps() == 0);
  }
  SECTION("the clock ends after the context, a sleep pending") {
    asio::io_context io;
    asio::co_spawn(io, sleep_holding(clock, &ended), asio::detached);
    io.poll();
  }
  CHECK(ended == 2);
  clock.reset(); // the clock's end finds the dropped sleep and posts nothing
}

TEST_CASE("manual clock: a cancellation emitted after the clock's end finds the sleep done") {
  // The clock's end posts operation_aborted; the sleep's cancellation slot is cleared only when that runs, so a
  // cancellation emitted before it reaches the slot's handler, which must not touch the clock any more.
  asio::io_context io;
  auto clock = std::make_unique<manual_clock>();
  asio::cancellation_signal signal;
  std::vector<int> order;
  sleep(io, *clock, clock->now() + 1h, order, 1, signal.slot());
  io.poll();
  REQUIRE(clock->pending_sleeps() == 1);
  clock.reset();
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  CHECK(order == std::vector<int>{-1}); // completed once, aborted
}
