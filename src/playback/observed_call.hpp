// The end of one logical call as told to a `wandura::attempt_observer` (and so to `http_client_metrics`): operation,
// outcome and duration, failed calls included. Not public API.
//
//     detail::observed_call observed(observer, "get_config", *self->time);
//     try { ...; observed.succeeded(); co_return value; }
//     catch (...) { observed.fail(std::current_exception()); throw; }
//
// The destructor reports what `succeeded` or `fail` said; neither (the call's coroutine destroyed before it
// completed: its io_context destroyed with the call in flight), `operation_aborted`. Nothing is allocated.
#pragma once

#include <exception>
#include <string_view>
#include <system_error>

#include <asio/error.hpp>

#include "wandura/detail/async_call.hpp"
#include "wandura/resilience/attempt_observer.hpp"
#include "wandura/resilience/clock.hpp"

namespace wandura::detail {

/// Reports one call's end to `observer` (may be null) when destroyed.
class observed_call {
public:
  observed_call(attempt_observer* observer, std::string_view operation, clock& time) noexcept
      : observer_(observer), operation_(operation), time_(time), started_(time.now()) {}
  observed_call(observed_call const&) = delete;
  observed_call& operator=(observed_call const&) = delete;
  ~observed_call() {
    if (observer_ != nullptr) {
      observer_->on_call_end({operation_, error_, time_.now() - started_});
    }
  }

  /// The call succeeds.
  void succeeded() noexcept { error_.clear(); }
  /// The call fails with `failure`'s code (as the `async_` forms report it).
  void fail(std::exception_ptr const& failure) noexcept {
    try {
      error_ = to_error_code(failure, nullptr);
    } catch (...) {
      error_ = std::make_error_code(std::errc::not_enough_memory);
    }
  }
  /// The call fails with `code`.
  void fail(std::error_code code) noexcept { error_ = code; }
  /// When the call started, on the clock given.
  [[nodiscard]] clock::time_point started() const noexcept { return started_; }

private:
  attempt_observer* observer_;
  std::string_view operation_;
  clock& time_;
  clock::time_point started_;
  std::error_code error_ = make_error_code(asio::error::operation_aborted); ///< abandoned unless told otherwise
};

} // namespace wandura::detail
