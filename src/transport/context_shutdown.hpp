// transport_registry: frees the sends a transport still holds when its io_context is destroyed (or shut down).
//
// Asio's rule for an execution context that goes away with work pending is that each service destroys the
// operations it holds without running them, and a coroutine whose handler is destroyed is destroyed with its
// frames. A pending send's handler is held by the transport it waits on, not by a service: when that coroutine's
// frames own the transport's owner (a client's calls do), the handler, the frames and the transport keep each
// other alive and nothing frees them. This service, one per execution context, is the transport's part of the rule:
// its `shutdown()` frees every pending send of every live transport of the context unrun. Docs: docs/adr/0002.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/execution_context.hpp>

namespace wandura::detail {

class transport_impl;

class transport_registry final : public asio::execution_context::service {
public:
  static asio::execution_context::id id;

  explicit transport_registry(asio::execution_context& context);

  /// The registry of the context `ex` belongs to (created on first use).
  static transport_registry& of(asio::any_io_executor const& ex);

  /// Registers a live transport; it is forgotten once expired. Any thread.
  void add(std::weak_ptr<transport_impl> transport);

private:
  void shutdown() override;

  std::mutex mutex_;
  std::vector<std::weak_ptr<transport_impl>> live_;
};

} // namespace wandura::detail
