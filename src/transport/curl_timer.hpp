// Internal: libcurl's one timer (CURLMOPT_TIMERFUNCTION) on an Asio steady_timer (docs/adr/0002).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

namespace wandura::detail {

/// The deadline libcurl announces, and the wait that serves it.
///
/// - `-1`: no deadline; a pending wait is cancelled, so that an idle transport holds no work.
/// - `0`: act "at once": the owner runs a `CURL_SOCKET_TIMEOUT` action outside libcurl, right after the libcurl
///   call that asked (`take_immediate`) or through a posted handler (`take_posted_immediate`).
/// - `N` ms: the timer is armed, unless a pending wait fires no later (re-arming costs a syscall and a cancelled
///   handler); that early wait re-arms itself for the rest.
///
/// A `CURL_SOCKET_TIMEOUT` action makes libcurl 7.88 forget the deadline it announced last: it announces the
/// earliest one left during the action, and none at all (not -1) when none is left. `begin_timeout_action` and
/// `end_timeout_action` bracket every such action so that a wait nothing announced again is dropped.
///
/// `make_handler()` is called only when a wait is started; the handler it returns is called as
/// `handler(generation, ec)` on the strand: pass both to `on_fired`.
///
/// @par Thread safety
/// Not thread-safe: every member is called on the transport's strand.
class curl_timer {
public:
  using clock = std::chrono::steady_clock;
  using strand_type = asio::strand<asio::any_io_executor>;

  explicit curl_timer(strand_type const& strand) : timer_(strand) {}

  /// CURLMOPT_TIMERFUNCTION. Returns true when an immediate action must be posted by the caller (asked for
  /// outside `defer_immediate`, and not already on its way).
  template <class MakeHandler> [[nodiscard]] bool on_curl_request(long timeout_ms, MakeHandler const& make_handler);
  /// A wait completed: true when libcurl's deadline has come and the owner must run a timeout action. Re-arms
  /// itself when libcurl moved the deadline later.
  template <class MakeHandler>
  [[nodiscard]] bool on_fired(std::uint64_t generation, std::error_code ec, MakeHandler const& make_handler);

  /// While set, an immediate action asked for is left to the caller (`start()` runs it after
  /// curl_multi_add_handle returns) instead of being posted.
  void defer_immediate(bool on) noexcept { defer_immediate_ = on; }
  /// True when libcurl asked for an immediate action that no posted handler will run.
  [[nodiscard]] bool immediate_unposted() const noexcept { return immediate_wanted_ && !immediate_posted_; }
  /// Consumes libcurl's request for an immediate action; true when there was one.
  [[nodiscard]] bool take_immediate() noexcept;
  /// The posted handler for an immediate action runs: consumes the request, true when it was still wanted.
  [[nodiscard]] bool take_posted_immediate() noexcept;

  void begin_timeout_action() noexcept { deadline_.reset(); }
  void end_timeout_action() noexcept;
  /// Cancels any wait (shutdown).
  void cancel() noexcept;

private:
  template <class MakeHandler> void arm(clock::time_point when, MakeHandler const& make_handler);
  void disarm() noexcept;

  asio::steady_timer timer_;
  std::optional<clock::time_point> deadline_; ///< libcurl's deadline; none after -1 or 0
  bool armed_ = false;                        ///< a wait is pending on timer_...
  clock::time_point armed_at_;                ///< ...expiring then
  std::uint64_t generation_ = 0;              ///< of the current wait; older completions are stale
  bool immediate_wanted_ = false;             ///< libcurl asked for an immediate action, not yet run
  bool immediate_posted_ = false;             ///< ...and a handler for it is posted
  bool defer_immediate_ = false;
};

template <class MakeHandler> bool curl_timer::on_curl_request(long timeout_ms, MakeHandler const& make_handler) {
  if (timeout_ms < 0) {
    deadline_.reset();
    disarm();
    return false;
  }
  if (timeout_ms == 0) {
    // A pending wait is left alone: libcurl sets its next deadline when it acts.
    deadline_.reset();
    if (immediate_wanted_) {
      return false;
    }
    immediate_wanted_ = true;
    if (defer_immediate_) {
      return false;
    }
    immediate_posted_ = true;
    return true;
  }
  auto const when = clock::now() + std::chrono::milliseconds(timeout_ms);
  deadline_ = when;
  if (!armed_ || when < armed_at_) {
    arm(when, make_handler);
  }
  return false;
}

template <class MakeHandler>
bool curl_timer::on_fired(std::uint64_t generation, std::error_code ec, MakeHandler const& make_handler) {
  if (ec == asio::error::operation_aborted || generation != generation_) {
    return false;
  }
  armed_ = false;
  if (!deadline_) {
    return false; // libcurl deleted or replaced its deadline since
  }
  if (clock::now() < *deadline_) {
    arm(*deadline_, make_handler); // libcurl moved the deadline later: wait again instead of acting early
    return false;
  }
  deadline_.reset();
  return true;
}

template <class MakeHandler> void curl_timer::arm(clock::time_point when, MakeHandler const& make_handler) {
  timer_.expires_at(when);
  armed_ = true;
  armed_at_ = when;
  timer_.async_wait([h = make_handler(), generation = ++generation_](std::error_code ec) { h(generation, ec); });
}

} // namespace wandura::detail
