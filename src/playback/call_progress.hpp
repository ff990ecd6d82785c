// How far a call through the retry engine got, readable from any thread: what a caller that leaves before the call
// ends (cancelled, or its own deadline) reports in its `wandura::error`. Not public API.
#pragma once

#include <atomic>
#include <chrono>
#include <new>
#include <string_view>

#include "request_target.hpp"
#include "wandura/error.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/transport/http_request.hpp"

namespace wandura::detail {

class call_progress {
public:
  /// The request the call sends, named in `left_early`'s error as the engine's own errors name it. `url` is viewed:
  /// it outlives this object (the client's, or the reader's own copy).
  call_progress(http_method method, std::string_view url) noexcept : method_(method), url_(url) {}

  /// `response_reader::on_progress`: from the call's coroutine.
  void note(int attempts, int http_status) noexcept {
    attempts_.store(attempts, std::memory_order_relaxed);
    http_status_.store(http_status, std::memory_order_relaxed);
  }

  /// The error of a caller that left with `stopped` (`cancelled` or `deadline_exceeded`): the attempts made so far
  /// and the status of the latest response, in the engine's words and with its target ("cancelled after 1 attempt
  /// (POST /v1/playback/tickets on api.wandura.example)").
  [[nodiscard]] error left_early(std::string_view operation, stop_reason stopped,
                                 std::chrono::milliseconds total_timeout) const {
    call_result r;
    r.stopped = stopped;
    r.attempts = attempts_.load(std::memory_order_relaxed);
    r.response.status = r.attempts > 0 ? http_status_.load(std::memory_order_relaxed) : 0;
    r.total_timeout = total_timeout;
    try {
      r.target = describe_target(method_, url_);
    } catch (std::bad_alloc const&) { // the message goes without its target, as the engine's
    }
    return to_error(r, operation);
  }

private:
  http_method method_;
  std::string_view url_;
  std::atomic<int> attempts_{0};
  std::atomic<int> http_status_{0};
};

} // namespace wandura::detail
