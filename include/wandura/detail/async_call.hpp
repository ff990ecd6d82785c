// How a `client::async_` form runs an awaitable call and completes the way Asio's own operations do,
// `void(std::error_code, T)`, instead of `co_spawn`'s `void(std::exception_ptr, T)`. Not public API.
//
// The call is spawned with `co_spawn` on an executor that runs one handler at a time (the client's, or a strand of
// it made for the call); its completion handler converts the exception to the code it carries and then calls the
// user's handler, with the user's executor and allocator. A cancellation emitted on the user's handler's
// associated slot (`asio::bind_cancellation_slot`) is posted to the call's executor and emitted there: emitted on
// the user's thread it would reach the call's own handlers while the call runs, and replaces them, on another.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>

#include "wandura/error.hpp"
#include "wandura/playback/error_info_token.hpp"

namespace wandura::detail {

/// The code an awaitable call's exception carries; writes the details of a `wandura::error` to `details` (when not
/// null), and a default `error_info` there on success or for other exceptions. Codes: the exception's own for a
/// `std::system_error` (a `wandura::error` included), `std::errc::not_enough_memory` for `std::bad_alloc`,
/// `std::errc::io_error` for anything else (the SDK throws nothing else; a `viewer_limit` of the user's may).
inline std::error_code to_error_code(std::exception_ptr const& failure, error_info* details) {
  if (details != nullptr) {
    *details = error_info{};
  }
  if (!failure) {
    return {};
  }
  try {
    std::rethrow_exception(failure);
  } catch (wandura::error const& e) {
    if (details != nullptr) {
      *details = e.info();
    }
    return e.code();
  } catch (std::system_error const& e) {
    return e.code();
  } catch (std::bad_alloc const&) {
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (...) {
    return std::make_error_code(std::errc::io_error);
  }
}

/// The call's end of a cancellation bound by the user: the signal the call is spawned with, and the executor it is
/// emitted on. Made only when the user's handler has a connected cancellation slot. Owned by the call's completion
/// handler (and by emissions on their way), so that it goes with the call when its context destroys it; the relay in
/// the user's slot holds it weakly.
struct cancellation_relay {
  explicit cancellation_relay(asio::any_io_executor ex) : executor(std::move(ex)) {}
  asio::cancellation_signal signal;
  asio::any_io_executor executor;
};

/// `co_spawn`'s completion handler for one call: turns `(std::exception_ptr, T)` into `(std::error_code, T)`. Its
/// cancellation slot is the relay's (see `async_call_with`); it runs on the user's handler's executor, where it
/// takes the relay out of the user's slot before calling the handler.
template <typename Handler, typename T> class error_code_handler {
public:
  using cancellation_slot_type = asio::cancellation_slot;

  error_code_handler(Handler handler, error_info* details, std::shared_ptr<cancellation_relay> relay)
      : handler_(std::move(handler)), details_(details), relay_(std::move(relay)) {}

  void operator()(std::exception_ptr failure, T value) {
    auto const code = to_error_code(failure, details_);
    auto user_slot = asio::get_associated_cancellation_slot(handler_);
    if (user_slot.is_connected()) {
      user_slot.clear(); // the relay: the call is over
    }
    std::move(handler_)(code, std::move(value));
  }

  /// The relay's slot; an unconnected one when the user bound no slot (`co_spawn` then keeps no cancellation).
  [[nodiscard]] cancellation_slot_type get_cancellation_slot() const noexcept {
    return relay_ ? relay_->signal.slot() : cancellation_slot_type();
  }
  [[nodiscard]] Handler const& handler() const noexcept { return handler_; }

private:
  Handler handler_;
  error_info* details_;
  std::shared_ptr<cancellation_relay> relay_;
};

/// Starts `op` on `executor` and completes `token` with `void(std::error_code, T)`; `details` (may be null)
/// receives the error's details first. @pre `executor` runs one handler at a time (`client::call_executor`), so
/// that a cancellation posted to it runs after what was posted before.
template <typename T, typename CompletionToken>
auto async_call_with(asio::any_io_executor executor, asio::awaitable<T> op, error_info* details,
                     CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, T)>(
      [](auto handler, asio::any_io_executor ex, asio::awaitable<T> call, error_info* out) {
        using handler_type = std::decay_t<decltype(handler)>;
        std::shared_ptr<cancellation_relay> relay; // only for a connected slot: without one, nothing cancels
        auto user_slot = asio::get_associated_cancellation_slot(handler);
        if (user_slot.is_connected()) {
          relay = std::make_shared<cancellation_relay>(ex);
          // Weakly: the user's signal may outlive the call and its context. An emission is posted to `ex`, after
          // the installation of the call's cancellation state below (on this thread, before any emission).
          user_slot.assign([weak = std::weak_ptr<cancellation_relay>(relay)](asio::cancellation_type type) {
            // Any type is emitted as terminal, which the call's cancellation state lets through: a call ends the
            // same way for each (client.hpp), and cannot promise that nothing observable happened.
            if (auto r = weak.lock(); r && type != asio::cancellation_type::none) {
              asio::post(r->executor, [r] { r->signal.emit(asio::cancellation_type::terminal); });
            }
          });
        }
        asio::co_spawn(std::move(ex), std::move(call),
                       error_code_handler<handler_type, T>(std::move(handler), out, std::move(relay)));
      },
      token, std::move(executor), std::move(op), details);
}

/// `async_call_with`, taking the details' address from a `wandura::error_info_token` when `token` is one.
template <typename T, typename CompletionToken>
auto async_call(asio::any_io_executor executor, asio::awaitable<T> op, CompletionToken&& token) {
  if constexpr (is_error_info_token<std::decay_t<CompletionToken>>::value) {
    auto wrapped = std::forward<CompletionToken>(token);
    return async_call_with<T>(std::move(executor), std::move(op), wrapped.details, std::move(wrapped.inner));
  } else {
    return async_call_with<T>(std::move(executor), std::move(op), nullptr, std::forward<CompletionToken>(token));
  }
}

} // namespace wandura::detail

template <typename Handler, typename T, typename Executor>
struct asio::associated_executor<wandura::detail::error_code_handler<Handler, T>, Executor> {
  using type = asio::associated_executor_t<Handler, Executor>;
  static type get(wandura::detail::error_code_handler<Handler, T> const& h, Executor const& ex = Executor()) noexcept {
    return asio::get_associated_executor(h.handler(), ex);
  }
};

template <typename Handler, typename T, typename Allocator>
struct asio::associated_allocator<wandura::detail::error_code_handler<Handler, T>, Allocator> {
  using type = asio::associated_allocator_t<Handler, Allocator>;
  static type get(wandura::detail::error_code_handler<Handler, T> const& h, Allocator const& a = Allocator()) noexcept {
    return asio::get_associated_allocator(h.handler(), a);
  }
};
