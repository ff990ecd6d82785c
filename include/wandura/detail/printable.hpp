// Text that came from elsewhere (a server's error code, a Redis error, a key of a response body), made fit for a
// one-line message: a log line, an exception's `what()`, a table row.
//
// Not public API (`detail`): the one way the SDK and its programs put text they do not control into a message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wandura::detail {

/// The most bytes of a server's text that a message quotes; the rest is cut and marked with `...`.
inline constexpr std::size_t max_quoted_bytes = 200;

/// Appends `text` to `out` as one line of printable ASCII: every byte outside 0x20-0x7E (CR, LF, other control
/// bytes, DEL, and each byte of non-ASCII UTF-8) is written as `\xHH` (lower-case hex), every other byte as it is.
/// Only the first `max_bytes` bytes of `text` are written; when it is longer, `...` follows them. The result is
/// therefore valid UTF-8 (ASCII), holds no line break, and is at most `4 * max_bytes + 3` bytes long.
void append_printable(std::string& out, std::string_view text, std::size_t max_bytes = max_quoted_bytes);

/// `append_printable` into a new string.
[[nodiscard]] std::string printable(std::string_view text, std::size_t max_bytes = max_quoted_bytes);

} // namespace wandura::detail
