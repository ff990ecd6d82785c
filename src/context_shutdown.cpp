#include "context_shutdown.hpp"

#include <algorithm>
#include <utility>

#include <asio/execution/context.hpp>
#include <asio/query.hpp>

namespace wandura::detail {

asio::execution_context::id context_shutdown::id;

asio::execution_context& context_of(asio::any_io_executor const& ex) noexcept {
  return asio::query(ex, asio::execution::context);
}

context_shutdown::context_shutdown(asio::execution_context& context) : service(context) {}

void context_shutdown::add(asio::execution_context& context, std::weak_ptr<parked_handlers> parked) {
  auto& self = asio::use_service<context_shutdown>(context);
  std::lock_guard lock(self.mutex_);
  std::erase_if(self.live_, [](std::weak_ptr<parked_handlers> const& p) { return p.expired(); });
  bool const known = std::any_of(self.live_.begin(), self.live_.end(), [&](std::weak_ptr<parked_handlers> const& p) {
    return !p.owner_before(parked) && !parked.owner_before(p);
  });
  if (!known) {
    self.live_.push_back(std::move(parked));
  }
}

void context_shutdown::shutdown() {
  // No thread runs the context now. Each place is held while it frees its handlers: freeing them may release what
  // else owned it, and it is destroyed here, after, when this holds the last reference. The lock is not held
  // meanwhile: what is freed may register again (it then finds the context shut down and parks nothing more).
  std::vector<std::shared_ptr<parked_handlers>> live;
  {
    std::lock_guard lock(mutex_);
    for (auto const& p : live_) {
      if (auto held = p.lock()) {
        live.push_back(std::move(held));
      }
    }
    live_.clear();
  }
  for (auto const& p : live) {
    p->abandon(context());
  }
}

} // namespace wandura::detail
