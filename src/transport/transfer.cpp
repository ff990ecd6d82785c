#include "transport/transfer.hpp"

#include <utility>

namespace wandura::detail {

void transfer::reset_request() noexcept {
  phase = transfer_phase::idle;
  op = nullptr;
  request = nullptr;
  cancel_requested = false;
  unwatchable = 0;
  queued_at = {};
  deadline = std::chrono::steady_clock::time_point::max();
  facts = {};
  content_encoded = false;
  header_bytes = 0;
  interim_response = false;
  at_block_start = true;
  bodyless = false;
  error_text[0] = '\0';
  unadopted_sockets.clear();
  sockets_opened_since_prereq = 0;
}

void transfer::free_curl() noexcept {
  if (easy != nullptr) {
    curl_easy_cleanup(std::exchange(easy, nullptr));
  }
  if (parsed_url != nullptr) {
    curl_url_cleanup(std::exchange(parsed_url, nullptr));
  }
}

transfer* transfer_pool::acquire() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) {
    transfers_.push_back(std::make_unique<transfer>(sockets_, hooks_));
    free_.reserve(transfers_.capacity()); // release() then never allocates
    return transfers_.back().get();
  }
  transfer* t = free_.back();
  free_.pop_back();
  return t;
}

void transfer_pool::release(transfer* t) noexcept {
  t->reset_request();
  std::lock_guard lock(mutex_);
  t->generation.fetch_add(1, std::memory_order_acq_rel);
  free_.push_back(t); // capacity reserved in acquire(): cannot throw
}

std::size_t transfer_pool::size() const noexcept {
  std::lock_guard lock(mutex_);
  return transfers_.size();
}

} // namespace wandura::detail
