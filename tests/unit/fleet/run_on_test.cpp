// run_on: a coroutine awaited on another strand hands back its value, its exception, or its end.
#include "fleet/run_on.hpp"

#include <stdexcept>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>

namespace {

using strand_type = asio::strand<asio::io_context::executor_type>;

} // namespace

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
