#include "wandura/resilience/attempt_observer.hpp"

#include <array>
#include <charconv>

#include <asio/error.hpp>

#include "resilience/request_target.hpp"
#include "wandura/error.hpp"

namespace wandura {
namespace {

/// "100" ... "599", three characters each, for `error.type` without allocating.
constexpr auto status_texts = [] {
  std::array<char, 500 * 3> out{};
  for (int s = 100; s < 600; ++s) {
    auto const at = static_cast<std::size_t>(s - 100) * 3;
    out[at] = static_cast<char>('0' + s / 100);
    out[at + 1] = static_cast<char>('0' + s / 10 % 10);
    out[at + 2] = static_cast<char>('0' + s % 10);
  }
  return out;
}();

int parse_port(std::string_view text) noexcept {
  int port = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc{} && end == text.data() + text.size() ? port : 0;
}

} // namespace

std::string_view method_name(http_method method) noexcept {
  return method == http_method::post ? "POST" : "GET";
}

attempt_begin make_attempt_begin(std::string_view operation, http_request const& request, int resend_count) noexcept {
  attempt_begin a;
  a.operation = operation;
  a.method = method_name(request.method);
  a.resend_count = resend_count;
  auto const parts = detail::split_url(request.url);
  a.url_full = parts.without_query;
  if (parts.scheme.empty()) {
    return a;
  }
  auto authority = parts.authority;
  if (auto const at = authority.rfind('@'); at != std::string_view::npos) {
    a.url_full = {}; // user information is never reported, and cannot be cut out of a view
    authority = authority.substr(at + 1);
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto const close = authority.find(']');
    a.server_address = authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
    if (close != std::string_view::npos && close + 1 < authority.size() && authority[close + 1] == ':') {
      port_text = authority.substr(close + 2);
    }
  } else {
    auto const colon = authority.find(':');
    a.server_address = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  a.server_port = port_text.empty() ? (parts.scheme == "https" ? 443 : 80) : parse_port(port_text);
  return a;
}

std::string_view attempt_error_type(int status, std::error_code error) noexcept {
  if (status >= 400 && status < 600) {
    return {status_texts.data() + static_cast<std::size_t>(status - 100) * 3, 3};
  }
  if (!error) {
    return {};
  }
  if (error == asio::error::operation_aborted) {
    return "operation_aborted";
  }
  if (error.category() == error_category()) {
    auto const name = to_string(static_cast<errc>(error.value()));
    return name == "unknown" ? std::string_view("_OTHER") : name;
  }
  return "_OTHER";
}

} // namespace wandura
