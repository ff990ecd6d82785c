#include "wandura/resilience/attempt_observer.hpp"

#include <array>
#include <charconv>
#include <string>

#include <asio/error.hpp>

#include "request_target.hpp"
#include "wandura/error.hpp"
#include "wandura/transport/http_response.hpp"

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

/// Where the attributes of an attempt lie in its URL: offsets, so that they hold for any string equal to it.
struct url_target {
  std::size_t url_full_size = 0; ///< The URL up to its query; 0 when it holds user information.
  std::size_t address_at = 0;
  std::size_t address_size = 0;
  int port = 0; ///< 0 without a scheme.
};

url_target read_target(std::string_view url) noexcept {
  url_target t;
  auto const parts = detail::split_url(url);
  // User information is never reported, and cannot be cut out of a view: not in the authority, nor where no
  // authority was read (a URL without "://", or a '/' inside a password), where it reads as path.
  t.url_full_size = parts.path.find('@') == std::string_view::npos ? parts.without_query.size() : 0;
  if (parts.scheme.empty()) {
    return t;
  }
  auto authority = parts.authority;
  if (auto const at = authority.rfind('@'); at != std::string_view::npos) {
    t.url_full_size = 0;
    authority = authority.substr(at + 1);
  }
  std::string_view address;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto const close = authority.find(']');
    address = authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
    if (close != std::string_view::npos && close + 1 < authority.size() && authority[close + 1] == ':') {
      port_text = authority.substr(close + 2);
    }
  } else {
    auto const colon = authority.find(':');
    address = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  t.address_at = static_cast<std::size_t>(address.data() - url.data());
  t.address_size = address.size();
  t.port =
      port_text.empty() ? (iequals(parts.scheme, "https") ? 443 : 80) : parse_port(port_text); // schemes ignore case
  return t;
}

/// The target of `url`, read once per thread for as long as the thread's attempts go to the same URL (a client
/// sends to a few URLs again and again): comparing the URL costs a tenth of reading it. Per thread, so that no
/// lock is taken; the offsets apply to `url` because it equals the URL they were read from.
url_target const& target_of(std::string_view url) noexcept {
  thread_local std::string last_url;
  thread_local bool known = false;
  thread_local url_target last;
  if (known && std::string_view(last_url) == url) {
    return last;
  }
  last = read_target(url);
  try {
    last_url.assign(url);
    known = true;
  } catch (...) {
    known = false; // out of memory: read again next time
  }
  return last;
}

} // namespace

attempt_begin make_attempt_begin(std::string_view operation, http_request const& request, int resend_count) noexcept {
  attempt_begin a;
  a.operation = operation;
  a.method = method_name(request.method);
  a.resend_count = resend_count;
  std::string_view const url = request.url;
  auto const& target = target_of(url);
  a.url_full = url.substr(0, target.url_full_size);
  a.server_address = url.substr(target.address_at, target.address_size);
  a.server_port = target.port;
  return a;
}

std::string_view attempt_error_type(int status, std::error_code error) noexcept {
  if (status >= 400 && status < 600) {
    return {status_texts.data() + static_cast<std::size_t>(status - 100) * 3, 3};
  }
  if (!error) {
    // A status outside 100-599 is no HTTP status (the call failed on it): never a success.
    return status == 0 || (status >= 100 && status < 600) ? std::string_view() : std::string_view("_OTHER");
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
