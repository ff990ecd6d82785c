#include "resilience/observed_attempt.hpp"

namespace wandura::detail {

std::string_view operation_of(http_request const& request) noexcept {
  std::string_view path = request.url;
  if (auto const scheme_end = path.find("://"); scheme_end != std::string_view::npos) {
    path = path.substr(scheme_end + 3);
    auto const slash = path.find('/');
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash);
  }
  path = path.substr(0, path.find_first_of("?#"));
  if (request.method == http_method::post) {
    return path == "/v1/playback/tickets" ? "issue_tickets" : "other";
  }
  if (path == "/v1/config") {
    return "get_config";
  }
  if (path.starts_with("/v1/catalog/films/")) {
    return "get_film";
  }
  if (path == "/v1/videos") {
    return "list_videos";
  }
  if (path.starts_with("/v1/videos/")) {
    return "get_video";
  }
  return path == "/v1/creatives" ? "list_creatives" : "other";
}

observed_attempt::observed_attempt(attempt_observer* observer, http_request const& request, int resend_count,
                                   clock& time) noexcept
    : observer_(observer), time_(time), started_(time.now()) {
  if (observer_ != nullptr) {
    begin_ = make_attempt_begin(operation_of(request), request, resend_count);
    context_ = observer_->on_attempt_begin(begin_);
  }
}

void observed_attempt::end(attempt_result const& outcome) noexcept {
  if (observer_ == nullptr) {
    return;
  }
  auto const status = outcome.response.status;
  observer_->on_attempt_end(context_, begin_,
                            {status, attempt_error_type(status, outcome.error), time_.now() - started_});
  observer_ = nullptr;
}

} // namespace wandura::detail
