#include "failure_reason.hpp"

#include <chrono>

#include <asio/error.hpp>

#include "wandura/error.hpp"

namespace demo {

std::string failure_reason(std::error_code const& code) {
  if (code.category() == wandura::error_category()) {
    return std::string(wandura::to_string(static_cast<wandura::errc>(code.value())));
  }
  if (code == asio::error::operation_aborted) {
    return "cancelled";
  }
  return std::string(code.category().name()) + ":" + std::to_string(code.value());
}

std::string failure_reason(wandura::episode_start const& got, double latency_ms, wandura::retry_policy const& policy) {
  using wandura::item_outcome;
  auto const& item = got.play;
  switch (item.outcome) {
  case item_outcome::granted: return {};
  case item_outcome::failed: return item.error ? failure_reason(item.error) : "http_error";
  case item_outcome::viewer_limited: return "viewer_limited";
  case item_outcome::deferred: return "deferred";
  case item_outcome::not_ready:
  case item_outcome::not_entitled: return "http_error";
  case item_outcome::shed:
  case item_outcome::rate_limited:
  case item_outcome::unavailable: break;
  }
  bool const is_429 = item.outcome != item_outcome::unavailable;
  if (item.reason == "held_off") {
    return "rate_limited"; // held back after a 429 past the deadline: nothing more was sent
  }
  if (got.attempts > policy.max_retries) {
    return is_429 ? "rate_limited" : "unavailable"; // every retry used
  }
  double const next_wait_ms = item.retry_after && item.retry_after->count() > 0
                                  ? static_cast<double>(std::chrono::milliseconds(*item.retry_after).count()) + 1000.0
                                  : static_cast<double>(policy.max_delay.count());
  if (latency_ms + next_wait_ms < static_cast<double>(policy.total_timeout.count())) {
    return "budget_exhausted";
  }
  return "deadline_exceeded";
}

} // namespace demo
