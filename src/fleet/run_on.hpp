// Awaiting a coroutine that runs on another executor (the fleet's strand, a Redis client's), with the awaiting
// coroutine's cancellation carried over there. Not public API.
#pragma once

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace wandura::detail {

/// Runs `op` on `executor` and completes on the awaiting coroutine's executor, as `co_await co_spawn(executor, op,
/// use_awaitable)` does, except for cancellation. Asio 1.22's `co_spawn` installs the spawned coroutine's
/// cancellation state straight into the awaiting coroutine's slot, so a cancellation emitted where the awaiting
/// coroutine runs would reach `op`'s handlers from that thread while `op` runs, and replaces them, on `executor`'s:
/// a data race. Here the awaiting coroutine's cancellation is posted to `executor` and emitted there, and `op` is
/// spawned there too (its cancellation state is installed there): both in the order they were asked for.
/// @pre `executor` runs one handler at a time (a strand), so that what is posted to it runs in that order.
template <class T, class Executor> asio::awaitable<T> run_on(Executor executor, asio::awaitable<T> op) {
  auto relay = std::make_shared<asio::cancellation_signal>();
  asio::cancellation_state const state = co_await asio::this_coro::cancellation_state;
  asio::cancellation_slot outer = state.slot();
  if (outer.is_connected()) {
    outer.assign([relay, executor](asio::cancellation_type type) {
      asio::post(executor, [relay, type] { relay->emit(type); });
    });
  }
  auto initiate = [executor, relay](auto handler, asio::awaitable<T> work) {
    asio::dispatch(executor, [executor, relay, work = std::move(work), handler = std::move(handler)]() mutable {
      asio::co_spawn(executor, std::move(work), asio::bind_cancellation_slot(relay->slot(), std::move(handler)));
    });
  };
  if constexpr (std::is_void_v<T>) {
    co_await asio::async_initiate<asio::use_awaitable_t<> const, void(std::exception_ptr)>(
        std::move(initiate), asio::use_awaitable, std::move(op));
  } else {
    co_return co_await asio::async_initiate<asio::use_awaitable_t<> const, void(std::exception_ptr, T)>(
        std::move(initiate), asio::use_awaitable, std::move(op));
  }
}

} // namespace wandura::detail
