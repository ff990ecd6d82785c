// wandura::transport: the public face of transport_impl (src/transport/transport_impl.hpp); design and the traps it
// handles: docs/adr/0002-transport-event-loop.md.
#include "wandura/transport/transport.hpp"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "context_shutdown.hpp"
#include "request_target.hpp"
#include "transport/test_hooks.hpp"
#include "transport/transport_impl.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {

/// The one way into a transport's internals from outside the class: the test hooks.
struct transport_access {
  static transport_impl& impl(transport& tr) noexcept { return *tr.impl_; }
};

void start_send(transport_impl& impl, http_request const& request, attempt_options const& options, send_completion* op,
                asio::cancellation_slot slot) {
  impl.initiate(request, options, op, slot);
}

asio::any_io_executor transport_executor(transport_impl const& impl) noexcept {
  return impl.executor();
}

void set_test_hooks(transport& tr, transport_test_hooks hooks) noexcept {
  transport_access::impl(tr).set_test_hooks(hooks);
}

} // namespace wandura::detail

namespace wandura {

transport::transport(asio::any_io_executor ex, transport_options options)
    : impl_(std::make_shared<detail::transport_impl>(std::move(ex), std::move(options))) {
  detail::context_shutdown::add(detail::context_of(impl_->executor()), impl_);
}

transport::~transport() {
  if (impl_) {
    impl_->request_shutdown();
  }
}

// send() and send_attempt() are not coroutines themselves: they copy the options into the coroutine they return,
// so that `co_spawn(ex, tr.send_attempt(request, {}), ...)` does not leave the coroutine a dangling reference.
asio::awaitable<http_response> transport::send(http_request const& request, attempt_options const& options) {
  return do_send(impl_, request, options);
}

// Not a coroutine either: the operation completes the awaiting coroutine with the whole attempt_result, so an
// attempt costs no coroutine frame besides the one Asio's initiation makes (that frame holds the copies of the
// request's address and of the options).
asio::awaitable<attempt_result> transport::send_attempt(http_request const& request, attempt_options const& options) {
  return asio::async_initiate<asio::use_awaitable_t<> const, void(attempt_result)>(
      [impl = impl_](auto handler, http_request const* req, attempt_options const& opts) {
        using handler_type = std::decay_t<decltype(handler)>;
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto* op = detail::send_op<handler_type, detail::send_shape::attempt>::create(
            std::move(handler), detail::transport_executor(*impl));
        detail::start_send(*impl, *req, opts, op, slot);
      },
      asio::use_awaitable, &request, options);
}

asio::awaitable<http_response> transport::do_send(std::shared_ptr<detail::transport_impl> impl,
                                                  http_request const& request, attempt_options options) {
  std::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  auto [response, detail] = co_await async_send_with_detail(std::move(impl), request, options, token);
  if (ec) {
    // Named as call_result::target names a request: never its query, fragment or user information, which may
    // carry credentials.
    std::string message = "transport: " + detail::describe_target(request);
    message.append(": ").append(ec.message());
    if (!detail.empty()) {
      message.append(": ").append(detail);
    }
    throw error(ec, message);
  }
  co_return std::move(response);
}

asio::any_io_executor transport::get_executor() const {
  return impl_->executor();
}

transport_stats transport::stats() const noexcept {
  return impl_->stats();
}

} // namespace wandura
