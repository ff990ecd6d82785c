#include "wandura/resilience/holdoff_registry.hpp"

namespace wandura {

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
}

holdoff_registry::time_point holdoff_registry::held_until(std::string_view counter) const {
  std::lock_guard lock(mutex_);
  for (auto const& e : entries_) {
    if (e.counter == counter) {
      return e.until;
    }
  }
  return time_point::min();
}

} // namespace wandura
