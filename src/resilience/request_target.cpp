#include "resilience/request_target.hpp"

#include <string_view>

#include "wandura/resilience/attempt_observer.hpp"

namespace wandura::detail {

std::string describe_target(http_request const& request) {
  std::string_view url = request.url;
  url = url.substr(0, url.find_first_of("?#"));
  std::string_view authority;
  std::string_view path = url;
  if (auto const scheme_end = url.find("://"); scheme_end != std::string_view::npos) {
    auto const rest = url.substr(scheme_end + 3);
    auto const slash = rest.find('/');
    authority = rest.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
  }
  std::string out(method_name(request.method));
  out.append(" ").append(path);
  if (!authority.empty() && authority.find('@') == std::string_view::npos) {
    out.append(" on ").append(authority);
  }
  return out;
}

} // namespace wandura::detail
