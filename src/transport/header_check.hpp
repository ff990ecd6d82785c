// Internal: what the transport refuses to put in a request header (RFC 9110 section 5): a name that is not a token,
// a value holding a control byte other than HTAB, or DEL (CR and LF would end or split the line and let a value
// inject headers of its own; the others draw a 400), and the framing headers `Content-Length` and
// `Transfer-Encoding` (RFC 9112 section 6), which the transport sets from the body.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "wandura/transport/http_request.hpp"

namespace wandura::detail {

/// True when `name` is an RFC 9110 token: one or more of ALPHA, DIGIT and "!#$%&'*+-.^_`|~".
[[nodiscard]] bool is_header_name(std::string_view name) noexcept;

/// True when `value` holds only visible ASCII, SP, HTAB and bytes 0x80-0xFF (`find_forbidden_header_byte` finds
/// nothing).
[[nodiscard]] bool is_header_value(std::string_view value) noexcept;

/// Why `headers` cannot be sent, naming the first offending header and, for a value, the offending byte and its
/// offset (`request header Authorization: value holds a carriage return (CR) at byte 13`; never the value: it may
/// be a key), or an empty string when all of them can.
[[nodiscard]] std::string check_headers(std::vector<http_header> const& headers);

} // namespace wandura::detail
