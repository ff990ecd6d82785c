// Internal: reading a response's Content-Length field value (RFC 9110 section 8.6).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace wandura::detail {

/// The body length a Content-Length field value gives, or nullopt when the value frames no body unambiguously.
///
/// Rule (RFC 9110 section 8.6): the value is `1*DIGIT` between optional white space (SP, HTAB). A comma-separated
/// list whose elements are all that number (`42, 42`, `42,042`) is taken as that number, as the RFC allows.
/// Anything else is refused: an empty value or list element, a sign (`+42`, `-1`), white space or any other byte
/// inside a number (`5 500`), elements that differ (`5, 500`), and a number past 2^63 - 1, which libcurl's
/// `curl_off_t` cannot hold (libcurl would then read the body to the connection's close).
[[nodiscard]] std::optional<std::uint64_t> parse_content_length(std::string_view value) noexcept;

} // namespace wandura::detail
