// The begin and end of one HTTP attempt as told to a `wandura::attempt_observer`, from the place attempts happen
// (`retry_engine::call`). Not public API.
//
//     detail::observed_attempt observed(options_.observer.get(), traits.operation, request, attempt - 1, clk, now);
//     ... outcome = co_await sender_.send_attempt(request, options); ...
//     observed.end(outcome);
//
// Nothing is allocated; with a null observer both steps do nothing.
#pragma once

#include <optional>
#include <string_view>

#include "wandura/resilience/attempt_observer.hpp"
#include "wandura/resilience/clock.hpp"
#include "wandura/transport/http_sender.hpp"

namespace wandura::detail {

/// One attempt being observed: `on_attempt_begin` at construction, `on_attempt_end` from `end`.
class observed_attempt {
public:
  /// @param observer may be null (then nothing is told). @param operation the call's name (`request_traits`;
  /// empty: "other"), viewed. @param request must outlive this object.
  /// @param resend_count 0 for the first attempt of the call. @param time the engine's clock, for the duration.
  /// @param started when the attempt started on `time` (the caller has just read it: not read again).
  observed_attempt(attempt_observer* observer, std::string_view operation, http_request const& request,
                   int resend_count, clock& time, clock::time_point started) noexcept;
  observed_attempt(observed_attempt const&) = delete;
  observed_attempt& operator=(observed_attempt const&) = delete;
  ~observed_attempt() = default;

  /// Tells the observer how the attempt ended: its status, `error.type` and duration. Call once.
  /// @returns the time the attempt ended as read for the observer; nullopt when nothing was told (no observer, or
  /// a second call), the clock then not read.
  std::optional<clock::time_point> end(attempt_result const& outcome) noexcept;

private:
  attempt_observer* observer_;
  attempt_begin begin_;
  void* context_ = nullptr;
  clock& time_;
  clock::time_point started_;
};

} // namespace wandura::detail
