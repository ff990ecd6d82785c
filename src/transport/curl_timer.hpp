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
/// The owner's deadline (`set_owner_deadline`: the transport's earliest attempt deadline) is served by the same
/// wait: libcurl may announce a deadline later than a request's own timeout (7.88, connecting with
/// CURLOPT_TIMEOUT_MS of 1, replaces it by its 200 ms happy-eyeballs timer), so the owner's deadline cannot rely on
/// libcurl's alone. A wait pending no later than `owner_tolerance` past it serves it too (libcurl's own deadline for
/// a request is at most `libcurl_timeout_margin` and a millisecond after the transport's), and the owner asks for
/// one (`serve_owner`) only after the libcurl calls that follow a change have announced theirs: no second timer
/// system call per request.
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
  /// What a completed wait means: `stale` (cancelled, or superseded by a later wait: nothing to do), `early`
  /// (libcurl's deadline has not come: re-armed for it if it has one; the owner's deadline may have), `due`
  /// (libcurl's deadline has come: the owner runs a timeout action).
  enum class wake { stale, early, due };
  /// How much later than a request's attempt deadline libcurl's own (CURLOPT_TIMEOUT_MS) is set. libcurl checks
  /// its deadline in every action, and one it reaches first ends the request inside libcurl with its connection
  /// kept, an HTTP/2 stream's reset unsent (docs/adr/0002); the transport ends its due requests before every
  /// action, so libcurl's must come later by more than the time between the transport's clock read and libcurl's
  /// within one action (microseconds, or a preemption on a loaded machine) plus libcurl 7.88's reading of elapsed
  /// time up to 1 ms ahead (`Curl_timediff` truncates each part).
  static constexpr std::chrono::milliseconds libcurl_timeout_margin{10};
  /// A pending wait this much after the owner's deadline serves it: libcurl's own deadline for a request, which it
  /// announces, is at most the margin and a millisecond of rounding after the transport's, so serving the owner
  /// costs no second timer system call per request; a request the wait ends is ended that much late at most.
  static constexpr std::chrono::milliseconds owner_tolerance = libcurl_timeout_margin + std::chrono::milliseconds(2);

  /// A wait completed: see `wake`.
  template <class MakeHandler>
  [[nodiscard]] wake on_fired(std::uint64_t generation, std::error_code ec, MakeHandler const& make_handler);
  /// The owner's own earliest deadline, `clock::time_point::max()` for none. Only noted: `serve_owner` makes a
  /// wait cover it, after the libcurl calls that follow have announced their own deadlines.
  void set_owner_deadline(clock::time_point when) noexcept { owner_ = when; }
  /// Makes a wait pending no later than `owner_tolerance` after the owner's deadline, if it has one: one more wait
  /// only when libcurl's own would come later.
  template <class MakeHandler> void serve_owner(MakeHandler const& make_handler);
  /// The owner has no deadline any more: a pending wait libcurl needs no more is dropped.
  void clear_owner_deadline() noexcept;

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
  std::optional<clock::time_point> deadline_;          ///< libcurl's deadline; none after -1 or 0
  clock::time_point owner_ = clock::time_point::max(); ///< the owner's deadline; max for none
  bool armed_ = false;                                 ///< a wait is pending on timer_...
  clock::time_point armed_at_;                         ///< ...expiring then
  std::uint64_t generation_ = 0;                       ///< of the current wait; older completions are stale
  bool immediate_wanted_ = false;                      ///< libcurl asked for an immediate action, not yet run
  bool immediate_posted_ = false;                      ///< ...and a handler for it is posted
  bool defer_immediate_ = false;
};

template <class MakeHandler> bool curl_timer::on_curl_request(long timeout_ms, MakeHandler const& make_handler) {
  if (timeout_ms < 0) {
    deadline_.reset();
    if (owner_ == clock::time_point::max()) {
      disarm(); // else the owner serves its deadline after the libcurl call (serve_owner)
    }
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
curl_timer::wake curl_timer::on_fired(std::uint64_t generation, std::error_code ec, MakeHandler const& make_handler) {
  if (ec == asio::error::operation_aborted || generation != generation_) {
    return wake::stale;
  }
  armed_ = false;
  if (!deadline_) {
    return wake::early; // libcurl deleted or replaced its deadline since, or the wait was the owner's
  }
  if (clock::now() < *deadline_) {
    arm(*deadline_, make_handler); // libcurl moved the deadline later, or the owner's came first: wait again
    return wake::early;
  }
  deadline_.reset();
  return wake::due;
}

template <class MakeHandler> void curl_timer::serve_owner(MakeHandler const& make_handler) {
  if (owner_ != clock::time_point::max() && (!armed_ || armed_at_ - owner_ > owner_tolerance)) {
    arm(owner_, make_handler);
  }
}

template <class MakeHandler> void curl_timer::arm(clock::time_point when, MakeHandler const& make_handler) {
  // A pending wait is superseded whether or not the new one starts: its completion is stale by its generation.
  // Marked armed only once the new wait is pending: a throw (out of memory making the handler or starting the
  // wait) leaves the timer unarmed, so the next deadline arms it rather than trusting a wait that is not there.
  armed_ = false;
  auto const generation = ++generation_;
  timer_.expires_at(when);
  timer_.async_wait([h = make_handler(), generation](std::error_code ec) { h(generation, ec); });
  armed_ = true;
  armed_at_ = when;
}

} // namespace wandura::detail
