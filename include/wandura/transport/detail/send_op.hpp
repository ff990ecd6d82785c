// Internal: the type-erased state of one `transport::async_send` operation (not public API).
//
// Modelled on Asio's src/examples/cpp20/operations/c_callback_wrapper.cpp: the operation owns the completion
// handler and a work guard on the handler's executor; on completion it moves both out, frees itself with the
// handler's allocator and posts the handler to the handler's executor. The transport never resumes a caller
// inline: completions always go through `asio::post`.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/recycling_allocator.hpp>

#include "wandura/transport/http_request.hpp"
#include "wandura/transport/http_response.hpp"
#include "wandura/transport/http_sender.hpp"

namespace wandura::detail {

class transport_impl;

/// One pending send, as the (non-template) transport core sees it. Exactly one of `complete` or `destroy` is
/// called, exactly once; both free the object.
class send_completion {
public:
  send_completion(send_completion const&) = delete;
  send_completion& operator=(send_completion const&) = delete;

  /// Hands the result to the caller: posts the handler to its executor. Called on the transport's strand.
  /// `detail` says what happened when `ec` is set (libcurl's error text included); operations of the shapes
  /// `with_detail` and `attempt` pass it on.
  virtual void complete(std::error_code ec, http_response&& response, std::string_view detail) noexcept = 0;
  /// Frees the operation without calling the handler (the transport is being torn down with its io_context).
  virtual void destroy() noexcept = 0;

protected:
  send_completion() = default;
  ~send_completion() = default;
};

/// What a send operation completes its handler with.
enum class send_shape {
  response,    ///< `(error_code, http_response)`: `transport::async_send`
  with_detail, ///< `(error_code, http_response, std::string detail)`: what `transport::send()` puts in its message
  attempt,     ///< `(attempt_result)`, the detail only with an error: `transport::send_attempt`
};

/// The operation of one send: completes `Handler` as `Shape` says.
template <class Handler, send_shape Shape = send_shape::response> class send_op final : public send_completion {
  using executor_type = asio::associated_executor_t<Handler, asio::any_io_executor>;
  using allocator_type = asio::associated_allocator_t<Handler, asio::recycling_allocator<void>>;
  using self_allocator = typename std::allocator_traits<allocator_type>::template rebind_alloc<send_op>;

public:
  send_op(Handler&& handler, executor_type ex) : handler_(std::move(handler)), work_(std::move(ex)) {}

  /// Allocates the operation with the handler's associated allocator.
  static send_op* create(Handler&& handler, asio::any_io_executor const& fallback) {
    auto ex = asio::get_associated_executor(handler, fallback);
    self_allocator alloc(asio::get_associated_allocator(handler, asio::recycling_allocator<void>()));
    send_op* p = std::allocator_traits<self_allocator>::allocate(alloc, 1);
    try {
      std::allocator_traits<self_allocator>::construct(alloc, p, std::move(handler), std::move(ex));
    } catch (...) {
      std::allocator_traits<self_allocator>::deallocate(alloc, p, 1);
      throw;
    }
    return p;
  }

  void complete(std::error_code ec, http_response&& response, std::string_view detail) noexcept override {
    // Move everything out first: the handler may start another send that reuses this memory.
    self_allocator alloc(asio::get_associated_allocator(handler_, asio::recycling_allocator<void>()));
    Handler handler(std::move(handler_));
    asio::executor_work_guard<executor_type> work(std::move(work_));
    std::allocator_traits<self_allocator>::destroy(alloc, this);
    std::allocator_traits<self_allocator>::deallocate(alloc, this, 1);
    try {
      if constexpr (Shape == send_shape::with_detail) {
        asio::post(work.get_executor(),
                   [h = std::move(handler), ec, r = std::move(response), d = std::string(detail)]() mutable {
                     std::move(h)(ec, std::move(r), std::move(d));
                   });
      } else if constexpr (Shape == send_shape::attempt) {
        asio::post(work.get_executor(),
                   [h = std::move(handler),
                    r = attempt_result{ec, std::move(response), ec ? std::string(detail) : std::string()}]() mutable {
                     std::move(h)(std::move(r));
                   });
      } else {
        asio::post(work.get_executor(),
                   [h = std::move(handler), ec, r = std::move(response)]() mutable { std::move(h)(ec, std::move(r)); });
      }
    } catch (...) {
      // Posting only fails when memory runs out; the operation cannot be completed then. The handler is dropped,
      // which for a coroutine destroys its frame: the same outcome as an io_context shut down mid-operation.
    }
    work.reset();
  }

  void destroy() noexcept override { free_self(); }

private:
  void free_self() noexcept {
    self_allocator alloc(asio::get_associated_allocator(handler_, asio::recycling_allocator<void>()));
    std::allocator_traits<self_allocator>::destroy(alloc, this);
    std::allocator_traits<self_allocator>::deallocate(alloc, this, 1);
  }

  Handler handler_;
  asio::executor_work_guard<executor_type> work_;
};

/// Starts `op` on the transport's strand. Installs a cancellation handler into `slot` when it is connected.
/// Called on the initiating thread (any thread). `request` must outlive the operation.
void start_send(transport_impl& impl, http_request const& request, attempt_options const& options, send_completion* op,
                asio::cancellation_slot slot);

/// The executor handlers without one of their own complete on.
asio::any_io_executor transport_executor(transport_impl const& impl) noexcept;

} // namespace wandura::detail
