#include "fallback_guard.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <asio/error.hpp>

#include "wandura/detail/printable.hpp"
#include "wandura/fleet/fleet_error.hpp"

namespace wandura::detail {
namespace {

/// Appends Redis's error reply to a log line, without what names keys or values: the arguments Redis echoes after an
/// unknown command (envelopes, viewer keys) and the script's SHA-1 and line it appends to an error raised inside one.
void append_refusal(std::string& line, std::string_view refusal) {
  refusal = refusal.substr(0, refusal.find(", with args beginning with:"));
  refusal = refusal.substr(0, refusal.find(" script: "));
  append_printable(line, refusal);
}

} // namespace

bool concerns_one_call(std::error_code ec, std::string_view reply_text) noexcept {
  if (ec != fleet_errc::server_error || reply_text.find("@user_script:") == std::string_view::npos) {
    return false;
  }
  std::string_view const code = reply_text.substr(0, reply_text.find(' '));
  if (code != "ERR" && code != "WRONGTYPE") {
    return false; // raised inside the script, but about the server: OOM, READONLY, NOPERM, ...
  }
  // Redis 7.0 refuses what the user's ACL does not allow inside a script with `ERR The user executing the script
  // can't ...` (a command, a key pattern, a Pub/Sub channel): the server's configuration, met by every call.
  if (reply_text.find("user executing the script") != std::string_view::npos) {
    return false;
  }
  // Redis 6 answers `ERR Error running script ...: @user_script:1: <what the command answered>`: a server state
  // quoted there (`-OOM ...`, `READONLY ...`) is no more about one call than it is unwrapped.
  constexpr std::array<std::string_view, 12> server_states{"OOM",        "READONLY",    "NOPERM",   "NOAUTH",
                                                           "LOADING",    "BUSY",        "MISCONF",  "MASTERDOWN",
                                                           "NOREPLICAS", "CLUSTERDOWN", "TRYAGAIN", "CROSSSLOT"};
  for (std::string_view const state : server_states) {
    for (std::string_view const before : {": ", ": -"}) {
      std::string quoted(before);
      quoted += state;
      quoted += ' ';
      if (reply_text.find(quoted) != std::string_view::npos) {
        return false;
      }
    }
  }
  return true;
}

fallback_guard::fallback_guard(std::string what, std::string server, fallback_options options, std::string key_kind)
    : what_(std::move(what)), server_(std::move(server)), options_(std::move(options)), key_kind_(std::move(key_kind)) {
}

redis_turn fallback_guard::ask_redis(std::chrono::steady_clock::time_point now, redis_access access) {
  if (!shut_down_ && !degraded_) {
    return {this, access, false};
  }
  // One probe at a time: the operations started while it is in flight answer locally, so that a paused Redis
  // costs one timeout per interval, not one per operation started during it.
  if (!shut_down_ && !probing_ && now >= retry_at_ && access >= outage_access_) {
    probing_ = true;
    return {this, access, true};
  }
  ++fallbacks_;
  return {nullptr, access, false};
}

void fallback_guard::redis_answered(redis_access access) {
  if (!degraded_ || access < outage_access_) {
    return; // a read answered says nothing of the writes Redis refused
  }
  probing_ = false;
  degraded_ = false;
  if (options_.log) {
    options_.log("INFO fleet " + what_ + ": redis " + server_ + " is back after " +
                 std::to_string(fallbacks_ - fallbacks_at_outage_) + " local answers");
  }
}

void fallback_guard::redis_failed(std::error_code ec, std::chrono::steady_clock::time_point now, redis_access access,
                                  bool probe, std::string_view refusal) {
  ++fallbacks_;
  ++failures_;
  last_failure_ = ec;
  retry_at_ = now + options_.probe_interval;
  redis_not_asked(probe);
  if (ec == asio::error::shut_down) {
    shut_down_ = true;
    degraded_ = true; // answers locally for good; no WARN: this is no outage
    return;
  }
  if (degraded_) {
    outage_access_ = std::max(outage_access_, access); // a write refused too: only a write answered ends it
    return;
  }
  degraded_ = true;
  outage_access_ = access;
  fallbacks_at_outage_ = fallbacks_ - 1;
  if (options_.log) {
    std::string why = ec.message();
    if (!refusal.empty()) {
      why += ": ";
      append_refusal(why, refusal);
    }
    options_.log("WARN fleet " + what_ + ": redis " + server_ + " unavailable (" + why +
                 "); answering from local state until it is back");
  }
}

void fallback_guard::call_failed(std::error_code ec, std::chrono::steady_clock::time_point now, bool probe,
                                 std::string_view refusal) {
  ++fallbacks_;
  ++failures_;
  last_failure_ = ec;
  redis_not_asked(probe); // a probe that met a bad key: the next operation probes again
  ++call_failures_unlogged_;
  if (!options_.log || (call_failure_logged_ && now - call_failure_logged_at_ < call_failure_log_interval)) {
    return;
  }
  std::string line =
      "WARN fleet " + what_ + ": redis " + server_ + " answered a call with an error about its " + key_kind_ + " key (";
  append_refusal(line, refusal);
  line += "); that call answered from local state, the next ones ask redis";
  if (call_failures_unlogged_ > 1) {
    line += " (" + std::to_string(call_failures_unlogged_ - 1) + " more such calls since the last line)";
  }
  call_failures_unlogged_ = 0;
  call_failure_logged_ = true;
  call_failure_logged_at_ = now;
  options_.log(line);
}

redis_turn& redis_turn::operator=(redis_turn&& other) noexcept {
  if (this != &other) {
    if (guard_ != nullptr) {
      guard_->redis_not_asked(probe_);
    }
    guard_ = std::exchange(other.guard_, nullptr);
    access_ = other.access_;
    probe_ = other.probe_;
  }
  return *this;
}

redis_turn::~redis_turn() {
  if (guard_ != nullptr) {
    guard_->redis_not_asked(probe_);
  }
}

// The turn ends before the guard hears the outcome: were the guard to throw on the way (out of memory writing its
// line), the turn's end releases nothing more.
void redis_turn::answered() {
  if (auto* const guard = std::exchange(guard_, nullptr)) {
    guard->redis_answered(access_);
  }
}

void redis_turn::failed(std::error_code ec, std::chrono::steady_clock::time_point now, std::string_view refusal) {
  if (auto* const guard = std::exchange(guard_, nullptr)) {
    guard->redis_failed(ec, now, access_, probe_, refusal);
  }
}

void redis_turn::call_failed(std::error_code ec, std::chrono::steady_clock::time_point now, std::string_view refusal) {
  if (auto* const guard = std::exchange(guard_, nullptr)) {
    guard->call_failed(ec, now, probe_, refusal);
  }
}

} // namespace wandura::detail
