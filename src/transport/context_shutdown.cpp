#include "transport/context_shutdown.hpp"

#include <algorithm>
#include <utility>

#include <asio/execution/context.hpp>
#include <asio/query.hpp>

#include "transport/transport_impl.hpp"

namespace wandura::detail {

asio::execution_context::id transport_registry::id;

transport_registry::transport_registry(asio::execution_context& context) : service(context) {}

transport_registry& transport_registry::of(asio::any_io_executor const& ex) {
  return asio::use_service<transport_registry>(asio::query(ex, asio::execution::context));
}

void transport_registry::add(std::weak_ptr<transport_impl> transport) {
  std::lock_guard lock(mutex_);
  std::erase_if(live_, [](std::weak_ptr<transport_impl> const& t) { return t.expired(); });
  live_.push_back(std::move(transport));
}

void transport_registry::shutdown() {
  // No thread runs the context now. Each transport is held while its sends are freed: freeing them may release
  // what else owned it, and it is destroyed here, after, when this holds the last reference.
  std::vector<std::shared_ptr<transport_impl>> live;
  {
    std::lock_guard lock(mutex_);
    for (auto const& t : live_) {
      if (auto held = t.lock()) {
        live.push_back(std::move(held));
      }
    }
    live_.clear();
  }
  for (auto const& t : live) {
    t->abandon_sends();
  }
}

} // namespace wandura::detail
