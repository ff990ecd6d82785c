#include "transport/request_queue.hpp"

#include <algorithm>

namespace wandura::detail {

transfer* request_queue::pop_ready() noexcept {
  if (queue_.empty() || !has_room()) {
    disarm_if_empty();
    return nullptr;
  }
  transfer* t = queue_.front();
  queue_.pop_front();
  disarm_if_empty();
  return t;
}

void request_queue::remove(transfer* t) noexcept {
  if (auto it = std::find(queue_.begin(), queue_.end(), t); it != queue_.end()) {
    queue_.erase(it);
  }
  disarm_if_empty();
}

void request_queue::disarm_if_empty() noexcept {
  if (queue_.empty() && armed_) {
    armed_ = false;
    ++generation_;
    timer_.cancel();
  }
}

} // namespace wandura::detail
