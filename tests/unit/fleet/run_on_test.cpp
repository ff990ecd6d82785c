// run_on: a coroutine awaited on another strand hands back its value, its exception, or its end, and gets the
// awaiting coroutine's cancellation on its own strand.
#include "fleet/run_on.hpp"

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

namespace {

using strand_type = asio::strand<asio::io_context::executor_type>;

/// What the work on `away` saw of its cancellation.
struct seen_by_work {
  bool waiting = false;         ///< the work is in its timer wait
  bool handler_on_away = false; ///< its cancellation handler ran on `away`
  bool handler_ran = false;
  bool cancelled_at_start = false; ///< the cancellation had reached the work's state before it began
  std::error_code wait_ended;      ///< how its timer wait ended
};

/// Waits on a timer (10 s at most) with the coroutine's cancellation passed on to the wait through a handler of
/// the test's own, which records where it runs. A cancellation asked for before it began ends it at once (Asio
/// 1.22 records it in the coroutine's cancellation state, and does not end the next wait).
asio::awaitable<void> wait_for_cancel(strand_type away, seen_by_work& seen) {
  asio::steady_timer timer(away, std::chrono::seconds(10));
  asio::cancellation_signal to_timer;
  asio::cancellation_state const state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) {
    seen.cancelled_at_start = true;
    seen.wait_ended = asio::error::operation_aborted;
    co_return;
  }
  state.slot().assign([&seen, &to_timer, away](asio::cancellation_type type) {
    seen.handler_ran = true;
    seen.handler_on_away = away.running_in_this_thread();
    to_timer.emit(type);
  });
  seen.waiting = true;
  std::error_code ec;
  co_await timer.async_wait(
      asio::bind_cancellation_slot(to_timer.slot(), asio::redirect_error(asio::use_awaitable, ec)));
  state.slot().clear();
  seen.wait_ended = ec;
}

} // namespace

TEST_CASE("run_on: the awaiting coroutine's cancellation reaches the work on the work's strand") {
  asio::io_context io;
  strand_type const home = asio::make_strand(io);
  strand_type const away = asio::make_strand(io);
  seen_by_work seen;
  bool awaiting_ended = false;
  asio::cancellation_signal signal;
  auto awaiting = [&]() -> asio::awaitable<void> {
    co_await wandura::detail::run_on(away, wait_for_cancel(away, seen));
    awaiting_ended = true;
  };
  asio::co_spawn(home, awaiting(), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  for (int i = 0; i < 100 && !seen.waiting; ++i) {
    io.poll_one();
  }
  REQUIRE(seen.waiting);
  // Emitted where the awaiting coroutine runs, as Asio's rule for cancellation slots asks.
  asio::post(home, [&] { signal.emit(asio::cancellation_type::terminal); });
  auto const started = std::chrono::steady_clock::now();
  io.run();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  CHECK_FALSE(seen.cancelled_at_start);
  CHECK(seen.handler_ran);
  CHECK(seen.handler_on_away); // not on `home`, where the emission was: there it would race the work's own handlers
  CHECK(seen.wait_ended == asio::error::operation_aborted);
  CHECK(awaiting_ended);
}

TEST_CASE("run_on: a cancellation asked for while the work is being started is not lost") {
  asio::io_context io;
  strand_type const home = asio::make_strand(io);
  strand_type const away = asio::make_strand(io);
  seen_by_work seen;
  asio::cancellation_signal signal;
  auto awaiting = [&]() -> asio::awaitable<void> {
    co_await wandura::detail::run_on(away, wait_for_cancel(away, seen));
  };
  asio::co_spawn(home, awaiting(), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  // Runs on `home` right after the awaiting coroutine has handed the work to `away`, before or after the work's
  // first step there: either way the work sees it (at its start, or in its wait).
  asio::post(home, [&] { signal.emit(asio::cancellation_type::terminal); });
  auto const started = std::chrono::steady_clock::now();
  io.run();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  CHECK(seen.wait_ended == asio::error::operation_aborted);
}

TEST_CASE("run_on: the work's value, its exception, and a void work") {
  asio::io_context io;
  strand_type const home = asio::make_strand(io);
  strand_type const away = asio::make_strand(io);
  int value = 0;
  std::string what;
  bool void_ran = false;
  auto awaiting = [&]() -> asio::awaitable<void> {
    value = co_await wandura::detail::run_on(away, []() -> asio::awaitable<int> { co_return 42; }());
    try {
      (void)co_await wandura::detail::run_on(away, []() -> asio::awaitable<int> {
        throw std::runtime_error("from away");
        co_return 0;
      }());
    } catch (std::runtime_error const& e) {
      what = e.what();
    }
    co_await wandura::detail::run_on(away, [&]() -> asio::awaitable<void> {
      void_ran = away.running_in_this_thread();
      co_return;
    }());
  };
  asio::co_spawn(home, awaiting(), asio::detached);
  io.run();
  CHECK(value == 42);
  CHECK(what == "from away");
  CHECK(void_ran);
}
