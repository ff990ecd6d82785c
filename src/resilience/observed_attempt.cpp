#include "resilience/observed_attempt.hpp"

namespace wandura::detail {

observed_attempt::observed_attempt(attempt_observer* observer, std::string_view operation, http_request const& request,
                                   int resend_count, clock& time, clock::time_point started) noexcept
    : observer_(observer), time_(time), started_(started) {
  if (observer_ != nullptr) {
    begin_ = make_attempt_begin(operation.empty() ? std::string_view("other") : operation, request, resend_count);
    context_ = observer_->on_attempt_begin(begin_);
  }
}

std::optional<clock::time_point> observed_attempt::end(attempt_result const& outcome) noexcept {
  if (observer_ == nullptr) {
    return std::nullopt;
  }
  auto const status = outcome.response.status;
  auto const now = time_.now();
  observer_->on_attempt_end(context_, begin_, {status, attempt_error_type(status, outcome.error), now - started_});
  observer_ = nullptr;
  return now;
}

} // namespace wandura::detail
