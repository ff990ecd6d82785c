// How far a call through the retry engine got, readable from any thread: what a caller that leaves before the call
// ends (cancelled, or its own deadline) reports in its `wandura::error`. Not public API.
#pragma once

#include <atomic>
#include <chrono>
#include <string_view>

#include "wandura/error.hpp"
#include "wandura/resilience/call_result.hpp"

namespace wandura::detail {

class call_progress {
public:
  /// `response_reader::on_progress`: from the call's coroutine.
  void note(int attempts, int http_status) noexcept {
    attempts_.store(attempts, std::memory_order_relaxed);
    http_status_.store(http_status, std::memory_order_relaxed);
  }

  /// The error of a caller that left with `stopped` (`cancelled` or `deadline_exceeded`): the attempts made so far
  /// and the status of the latest response, in the engine's words ("cancelled after 1 attempt").
  [[nodiscard]] error left_early(std::string_view operation, stop_reason stopped,
                                 std::chrono::milliseconds total_timeout) const {
    call_result r;
    r.stopped = stopped;
    r.attempts = attempts_.load(std::memory_order_relaxed);
    r.response.status = r.attempts > 0 ? http_status_.load(std::memory_order_relaxed) : 0;
    r.total_timeout = total_timeout;
    return to_error(r, operation);
  }

private:
  std::atomic<int> attempts_{0};
  std::atomic<int> http_status_{0};
};

} // namespace wandura::detail
