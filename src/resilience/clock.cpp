#include "wandura/resilience/clock.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace wandura {

asio::awaitable<std::error_code> real_clock::sleep_until(time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor, when);
  auto [ec] = co_await timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  co_return ec;
}

} // namespace wandura
