#include "wandura/detail/base_url.hpp"

#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>
#include <string>

namespace wandura::detail {
namespace {

constexpr std::string_view host_requirement = "with a host";
constexpr std::string_view port_requirement = "with a port from 1 to 65535";
constexpr std::string_view userinfo_hint = "credentials belong in the API key, never in a URL";

struct url_deleter {
  void operator()(CURLU* handle) const noexcept { curl_url_cleanup(handle); }
};
using url_handle = std::unique_ptr<CURLU, url_deleter>;

struct curl_string_deleter {
  void operator()(char* text) const noexcept { curl_free(text); }
};
using curl_string = std::unique_ptr<char, curl_string_deleter>;

/// The URL as it may appear in a message: quoted, control bytes escaped, or not at all when it holds an `@`,
/// which is where userinfo (and a password) would be. The words used then hold no `@` either, so that a message
/// about such a URL holds none at all.
std::string shown(std::string_view url) {
  if (url.find('@') != std::string_view::npos) {
    return "(not shown: it holds an at sign, so it may hold credentials)";
  }
  std::string out = "\"";
  append_printable(out, url);
  out.push_back('"');
  return out;
}

/// Throws "base_url must be an http:// or https:// URL <requirement>, got <url>[; <hint>]".
[[noreturn]] void refuse(std::string_view url, std::string_view requirement, std::string_view hint = {}) {
  std::string message = "base_url must be an http:// or https:// URL";
  if (!requirement.empty()) {
    message.append(" ").append(requirement);
  }
  message.append(", got ").append(shown(url));
  if (!hint.empty()) {
    message.append("; ").append(hint);
  }
  throw error(errc::invalid_argument, message);
}

/// One part of a parsed URL, or nullopt when the URL has none (libcurl's "no such part" codes).
std::optional<std::string> part(CURLU* handle, CURLUPart which) {
  char* raw = nullptr;
  if (curl_url_get(handle, which, &raw, 0) != CURLUE_OK || raw == nullptr) {
    return std::nullopt;
  }
  curl_string const owned(raw);
  return std::string(owned.get());
}

/// What libcurl refused, in words a user can act on.
std::string_view parse_failure(CURLUcode code) {
  switch (code) {
  case CURLUE_BAD_PORT_NUMBER: return port_requirement;
  case CURLUE_NO_HOST:
  case CURLUE_BAD_HOSTNAME: return host_requirement;
  case CURLUE_BAD_SCHEME:
  case CURLUE_UNSUPPORTED_SCHEME: return host_requirement;
  case CURLUE_OUT_OF_MEMORY: throw std::bad_alloc();
  default: return {};
  }
}

/// Refuses the parts a base URL must not have; checked on the text too, since an empty `?` or `#` leaves no part.
void refuse_extra_parts(CURLU* handle, std::string_view url) {
  if (part(handle, CURLUPART_USER) || part(handle, CURLUPART_PASSWORD) || part(handle, CURLUPART_OPTIONS)) {
    refuse(url, "without userinfo", userinfo_hint);
  }
  if (part(handle, CURLUPART_QUERY) || url.find('?') != std::string_view::npos) {
    refuse(url, "without a query (?...)", "the client appends its own paths and parameters");
  }
  if (part(handle, CURLUPART_FRAGMENT) || url.find('#') != std::string_view::npos) {
    refuse(url, "without a fragment (#...)");
  }
}

std::string checked_port(CURLU* handle, std::string_view url) {
  auto port = part(handle, CURLUPART_PORT); // only when written: no CURLU_DEFAULT_PORT
  if (!port) {
    return {};
  }
  unsigned value = 0;
  auto const [end, ec] = std::from_chars(port->data(), port->data() + port->size(), value);
  if (ec != std::errc() || end != port->data() + port->size() || value < 1 || value > 65535) {
    refuse(url, port_requirement);
  }
  return ":" + std::to_string(value);
}

} // namespace

std::string checked_base_url(std::string_view url) {
  if (url.empty()) {
    refuse(url, host_requirement);
  }
  // Visible ASCII only: no NUL to cut libcurl's C string short, no white space or control byte to split a request
  // line, no raw UTF-8 that libcurl would send unencoded.
  if (std::any_of(url.begin(), url.end(), [](char c) { return c < '!' || c > '~'; })) {
    refuse(url, "of visible ASCII only", "percent-encode anything else in the path");
  }
  // An `@` anywhere is refused with the userinfo, not only where libcurl reads userinfo: in
  // `https://u/ser:pass@host` it sits in the path, but it is a mistyped password all the same.
  if (url.find('@') != std::string_view::npos) {
    refuse(url, "without userinfo", userinfo_hint);
  }
  url_handle const handle(curl_url());
  if (!handle) {
    throw std::bad_alloc();
  }
  std::string const text(url);
  if (CURLUcode const rc = curl_url_set(handle.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK) {
    refuse(url, parse_failure(rc));
  }
  std::string scheme = part(handle.get(), CURLUPART_SCHEME).value_or("");
  for (char& c : scheme) {
    c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  // libcurl reads `https:///host` as `https://host`, as browsers do; a base URL is taken only as written.
  std::string_view const after_scheme = url.substr(std::min(url.size(), scheme.size()));
  if ((scheme != "http" && scheme != "https") || !after_scheme.starts_with("://") ||
      after_scheme.substr(3).starts_with('/')) {
    refuse(url, host_requirement);
  }
  // libcurl decodes a percent-encoded host name but then no longer reads it as an IPv4 address (`%36` is `6`,
  // `6` is `0.0.0.6`): a host is taken only as written, and `%` belongs only to an IPv6 zone (`[fe80::1%25eth0]`).
  std::string_view const authority = after_scheme.substr(3, after_scheme.find('/', 3) - 3);
  if (!authority.starts_with('[') && authority.find('%') != std::string_view::npos) {
    refuse(url, "with its host name as written, not percent-encoded");
  }
  refuse_extra_parts(handle.get(), url);
  std::string host = part(handle.get(), CURLUPART_HOST).value_or("");
  if (host.empty()) {
    refuse(url, host_requirement);
  }
  if (auto zone = part(handle.get(), CURLUPART_ZONEID); zone && host.size() > 2 && host.back() == ']') {
    host.insert(host.size() - 1, "%25" + *zone); // an IPv6 link-local literal keeps its interface
  }
  std::string path = part(handle.get(), CURLUPART_PATH).value_or("");
  while (!path.empty() && path.back() == '/') {
    path.pop_back();
  }
  return scheme + "://" + host + checked_port(handle.get(), url) + path;
}

} // namespace wandura::detail
