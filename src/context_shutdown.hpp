// context_shutdown: frees the handlers the library parks outside Asio's own services when their execution context
// is destroyed (or shut down) with work still pending.
//
// Asio's rule for an execution context that goes away with work pending is that each service destroys the
// operations it holds without running them, and a coroutine whose handler is destroyed is destroyed with its
// frames. The library parks handlers of its own: a transport its pending sends, the admission gate the requests
// queued behind a counter, a client's call registry the callers waiting for an operation. When such a coroutine's
// frames own what parks their handler (a client's calls own the client), the handler, the frames and their owner
// keep each other alive and nothing frees them. Every such place registers here, with the context its handlers run
// on; this service, one per execution context, is the library's part of the rule: its `shutdown()` asks each to
// free, unrun, what it parks for that context. Docs: docs/adr/0002 ("Lifetime").
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/execution_context.hpp>

namespace wandura::detail {

/// A place that parks handlers of an execution context's work outside Asio's services.
class parked_handlers {
public:
  virtual ~parked_handlers() = default;
  /// Frees, without running them, the handlers parked here that belong to `context`; after it, none of them
  /// completes. Called at `context`'s shutdown, when no thread runs it; may free what owns this object (the caller
  /// holds it meanwhile).
  virtual void abandon(asio::execution_context& context) noexcept = 0;

protected:
  parked_handlers() = default;
  parked_handlers(parked_handlers const&) = default;
  parked_handlers& operator=(parked_handlers const&) = default;
};

/// The execution context an executor belongs to.
[[nodiscard]] asio::execution_context& context_of(asio::any_io_executor const& ex) noexcept;

class context_shutdown final : public asio::execution_context::service {
public:
  static asio::execution_context::id id;

  explicit context_shutdown(asio::execution_context& context);

  /// Registers `parked` (once: a place already registered is not added again): its `abandon(context)` runs at
  /// `context`'s shutdown, unless it has expired by then. Any thread. @throws std::bad_alloc.
  static void add(asio::execution_context& context, std::weak_ptr<parked_handlers> parked);

private:
  void shutdown() override;

  std::mutex mutex_;
  std::vector<std::weak_ptr<parked_handlers>> live_;
};

} // namespace wandura::detail
