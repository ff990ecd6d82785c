#include "wandura/playback/ticket_result.hpp"

#include "wandura/error.hpp"

namespace wandura {

std::string_view to_string(item_outcome o) noexcept {
  switch (o) {
  case item_outcome::granted: return "granted";
  case item_outcome::shed: return "shed";
  case item_outcome::not_ready: return "not_ready";
  case item_outcome::rate_limited: return "rate_limited";
  case item_outcome::unavailable: return "unavailable";
  case item_outcome::not_entitled: return "not_entitled";
  case item_outcome::failed: return "failed";
  case item_outcome::viewer_limited: return "viewer_limited";
  case item_outcome::deferred: return "deferred";
  }
  return "unknown";
}

item_classification classify_item(int status, std::string_view error_code, std::string_view reason,
                                  intent what) noexcept {
  if (status >= 200 && status <= 299) {
    return {item_outcome::granted, {}};
  }
  if (error_code == "not_ready") {
    return {item_outcome::not_ready, {}};
  }
  if (status == 429 || error_code == "rate_limited") {
    bool const shed = reason == "prefetch_shed" || what == intent::prefetch;
    return {shed ? item_outcome::shed : item_outcome::rate_limited, {}};
  }
  if (error_code == "not_entitled" || status == 403) {
    return {item_outcome::not_entitled, {}};
  }
  if (error_code == "service_unavailable" || (status >= 500 && status <= 599)) {
    return {item_outcome::unavailable, {}};
  }
  if (status == 401 || error_code == "unauthorized") {
    return {item_outcome::failed, make_error_code(errc::unauthorized)};
  }
  return {item_outcome::failed, make_error_code(errc::http_error)};
}

} // namespace wandura
