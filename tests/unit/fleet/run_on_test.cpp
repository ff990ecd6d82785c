// run_on: a coroutine awaited on another strand gets the awaiting coroutine's cancellation on its own strand.
#include "fleet/run_on.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

namespace {

using strand_type = asio::strand<asio::io_context::executor_type>;

/// Waits until cancelled; records on which strand its cancellation handler ran.
asio::awaitable<int> wait_for_cancel(strand_type away, bool& installed, bool& handler_on_away) {
  co_await asio::async_initiate<asio::use_awaitable_t<> const, void(std::error_code)>(
      [&, away](auto handler) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        REQUIRE(slot.is_connected());
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        slot.assign([&, away, h](asio::cancellation_type) {
          handler_on_away = away.running_in_this_thread();
          asio::post(away, [h] { std::move (*h)(asio::error::operation_aborted); });
        });
        installed = true;
      },
      asio::use_awaitable);
  co_return 1;
}

} // namespace

TEST_CASE("run_on: the awaiting coroutine's cancellation reaches the work on the work's executor, where it runs") {
  asio::io_context io;
  strand_type const home = asio::make_strand(io);
  strand_type const away = asio::make_strand(io);
  bool installed = false;
  bool handler_on_away = false;
  bool ran_away = false;
  std::error_code seen;
  asio::cancellation_signal signal;
  auto awaiting = [&]() -> asio::awaitable<void> {
    try {
      (void)co_await wandura::detail::run_on(away, [&]() -> asio::awaitable<int> {
        ran_away = away.running_in_this_thread();
        co_return co_await wait_for_cancel(away, installed, handler_on_away);
      }());
    } catch (std::system_error const& e) {
      seen = e.code();
    }
  };
  asio::co_spawn(home, awaiting(), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  io.poll();
  REQUIRE(installed);
  // Emitted where the awaiting coroutine runs, as Asio's rule for cancellation slots asks.
  asio::post(home, [&] { signal.emit(asio::cancellation_type::terminal); });
  io.run();
  CHECK(ran_away);
  CHECK(handler_on_away); // not on `home`, where the emission was: there it would race the work's own handlers
  CHECK(seen == asio::error::operation_aborted);
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
