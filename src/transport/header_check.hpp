// Internal: what the transport refuses to put in a request header (CR, LF and NUL would end or split the line and
// let a value inject headers of its own; RFC 9110 section 5).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "wandura/transport/http_request.hpp"

namespace wandura::detail {

/// True when `name` is an RFC 9110 token: one or more of ALPHA, DIGIT and "!#$%&'*+-.^_`|~".
[[nodiscard]] bool is_header_name(std::string_view name) noexcept;

/// True when `value` holds no CR, LF or NUL.
[[nodiscard]] bool is_header_value(std::string_view value) noexcept;

/// Why `headers` cannot be sent, naming the first offending header (never its value: it may be a key), or an
/// empty string when all of them can.
[[nodiscard]] std::string check_headers(std::vector<http_header> const& headers);

} // namespace wandura::detail
