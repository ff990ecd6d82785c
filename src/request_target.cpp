#include "request_target.hpp"

#include <string_view>

namespace wandura {

std::string_view method_name(http_method method) noexcept {
  return method == http_method::post ? "POST" : "GET";
}

} // namespace wandura

namespace wandura::detail {

url_parts split_url(std::string_view url) noexcept {
  url_parts out;
  std::size_t i = 0;
  std::size_t const n = url.size();
  auto const scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos) {
    out.scheme = url.substr(0, scheme_end);
    i = scheme_end + 3;
    std::size_t const authority_begin = i;
    while (i < n && url[i] != '/' && url[i] != '?' && url[i] != '#') {
      ++i;
    }
    out.authority = url.substr(authority_begin, i - authority_begin);
  }
  std::size_t const path_begin = i;
  while (i < n && url[i] != '?' && url[i] != '#') {
    ++i;
  }
  out.path = i > path_begin ? url.substr(path_begin, i - path_begin) : std::string_view("/");
  out.without_query = url.substr(0, i);
  return out;
}

std::string describe_target(http_request const& request) {
  return describe_target(request.method, request.url);
}

std::string describe_target(http_method method_code, std::string_view url) {
  auto const parts = split_url(url);
  auto const method = method_name(method_code);
  if (parts.path.find('@') != std::string_view::npos) {
    // User information where no authority was read (a URL without "://", or a '/' inside a password): the URL
    // may hold credentials anywhere, and is not shown.
    return std::string(method) + " (a URL with '@' outside its host, not shown)";
  }
  // The host as the URL writes it, without user information (up to the last '@'), which may hold a password.
  auto const at = parts.authority.rfind('@');
  auto const host = at == std::string_view::npos ? parts.authority : parts.authority.substr(at + 1);
  bool const with_host = !host.empty();
  // A path built from a caller's value (a film ref) can be any length: a message shows its start.
  bool const cut = parts.path.size() > max_path_shown;
  auto const path = cut ? parts.path.substr(0, max_path_shown) : parts.path;
  std::string out;
  out.reserve(method.size() + 1 + path.size() + 3 + (with_host ? 4 + host.size() : 0));
  out.append(method).append(" ").append(path);
  if (cut) {
    out.append("...");
  }
  if (with_host) {
    out.append(" on ").append(host);
  }
  return out;
}

} // namespace wandura::detail
