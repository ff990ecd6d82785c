#include "resilience/holdoff_registry.hpp"

namespace wandura::detail {

void holdoff_registry::hold(std::string_view counter, time_point until) {
  std::lock_guard lock(mutex_);
  for (auto& e : entries_) {
    if (e.counter == counter) {
      if (until > e.until) {
        e.until = until;
      }
      return;
    }
  }
  entries_.push_back({std::string(counter), until});
  any_.store(true, std::memory_order_release);
}

holdoff_registry::time_point holdoff_registry::held_until(std::string_view counter) const {
  if (!any_.load(std::memory_order_acquire)) {
    return time_point::min(); // a hold() racing with this is seen by the next lookup, as if it came just after
  }
  std::lock_guard lock(mutex_);
  for (auto const& e : entries_) {
    if (e.counter == counter) {
      return e.until;
    }
  }
  return time_point::min();
}

} // namespace wandura::detail
