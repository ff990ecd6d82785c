#include "fallback_guard.hpp"

#include <utility>

#include <asio/error.hpp>

#include "wandura/detail/printable.hpp"

namespace wandura::detail {

fallback_guard::fallback_guard(std::string what, std::string server, fallback_options options)
    : what_(std::move(what)), server_(std::move(server)), options_(std::move(options)) {}

bool fallback_guard::ask_redis(std::chrono::steady_clock::time_point now) {
  if (!shut_down_ && (!degraded_ || now >= retry_at_)) {
    return true;
  }
  ++fallbacks_;
  return false;
}

void fallback_guard::redis_answered() {
  if (!degraded_) {
    return;
  }
  degraded_ = false;
  if (options_.log) {
    options_.log("INFO fleet " + what_ + ": redis " + server_ + " is back after " +
                 std::to_string(fallbacks_ - fallbacks_at_outage_) + " local answers");
  }
}

void fallback_guard::redis_failed(std::error_code ec, std::chrono::steady_clock::time_point now,
                                  std::string_view refusal) {
  ++fallbacks_;
  ++failures_;
  last_failure_ = ec;
  retry_at_ = now + options_.probe_interval;
  if (ec == asio::error::shut_down) {
    shut_down_ = true;
    degraded_ = true; // answers locally for good; no WARN: this is no outage
    return;
  }
  if (degraded_) {
    return;
  }
  degraded_ = true;
  fallbacks_at_outage_ = fallbacks_ - 1;
  if (options_.log) {
    std::string why = ec.message();
    if (!refusal.empty()) {
      // Redis echoes an unknown command's first arguments: ticket envelopes, viewer keys. Not for a log line.
      refusal = refusal.substr(0, refusal.find(", with args beginning with:"));
      why += ": ";
      append_printable(why, refusal);
    }
    options_.log("WARN fleet " + what_ + ": redis " + server_ + " unavailable (" + why +
                 "); answering from local state until it is back");
  }
}

} // namespace wandura::detail
