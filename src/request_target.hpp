// What a WARN line or an error message says about the request it is about: method, path and host, e.g.
// "POST /v1/playback/tickets on api.wandura.example" or "GET /v1/config on 127.0.0.1:8787". Not public API.
//
// Never the API key (it travels in a header, never in the URL), the query, or user information (`base_url` refuses
// a URL with an `@` in its authority; a request sent through the transport directly may still have one).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "wandura/transport/http_request.hpp"

namespace wandura::detail {

/// The parts of an absolute URL that telemetry and messages name, as views into it.
struct url_parts {
  std::string_view scheme;        ///< "https"; empty when the URL has no "://".
  std::string_view authority;     ///< "user@host:port" as written (user information included); empty without scheme.
  std::string_view path;          ///< From the first '/' after the authority, without query or fragment; "/" if none.
  std::string_view without_query; ///< The URL up to its query or fragment.
};

/// Splits `url` in one pass. A URL without "://" is all path.
[[nodiscard]] url_parts split_url(std::string_view url) noexcept;

/// The most of a path `describe_target` shows; a longer one is cut there and ends in "...".
inline constexpr std::size_t max_path_shown = 200;

/// "METHOD /path on host[:port]": the port as the URL writes it, without user information; the path without query
/// or fragment, its first `max_path_shown` bytes and "..." when longer. "METHOD (a URL with '@' outside its host,
/// not shown)" for a path holding an '@' (in a URL without "://" user information reads as path). Allocates the
/// returned string only.
[[nodiscard]] std::string describe_target(http_request const& request);
/// The same for a request not built yet, or no longer at hand: `method` and `url`.
[[nodiscard]] std::string describe_target(http_method method, std::string_view url);

} // namespace wandura::detail
