// The one check of a header value the SDK sends: no CR, LF or NUL (RFC 9110 §5.5), so that no value can end its
// header line early, add a header of its own, or be cut short by a C string.
//
// Not public API (`detail`): the one check for every header value the SDK sends (API key, user agent, idempotency
// key, caller headers), at construction or before sending.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace wandura::detail {

/// The offset of the first CR (0x0D), LF (0x0A) or NUL (0x00) byte in `value`, or nullopt when it has none.
///
/// RFC 9110 §5.5 calls field values holding these three "invalid and dangerous": CR and LF would end the header
/// line and let the rest of the value be read as a header of its own (header injection); a NUL cuts the value
/// short wherever it becomes a C string. Other control bytes are invalid too but harmless on the wire, and a
/// recipient may keep them (same section), so they are left to the server.
///
/// @par Thread safety
/// Pure function.
[[nodiscard]] std::optional<std::size_t> find_forbidden_header_byte(std::string_view value) noexcept;

/// Throws unless `value` is safe to send as the value of header `name` (see `find_forbidden_header_byte`).
///
/// @param name the header's name as sent (e.g. `Authorization`), used in the message only.
/// @param value the value to check; never copied into the message, since it may be a secret (an API key).
/// @throws wandura::error with `errc::invalid_argument` and a message naming the header, the kind of byte and its
///   offset, e.g. `header Authorization: value holds a line feed (LF) at byte 5; refused, nothing sent`.
/// @throws std::bad_alloc when memory runs out while building the message.
///
/// @par Thread safety
/// Pure function.
void check_header_value(std::string_view name, std::string_view value);

} // namespace wandura::detail
