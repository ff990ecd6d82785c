// The one check of a header value the SDK sends: visible ASCII, SP, HTAB and obs-text (bytes 0x80-0xFF) only
// (RFC 9110 §5.5), so that no value can end its header line early, add a header of its own, be cut short by a C
// string, or carry a control byte the server would answer 400.
//
// Not public API (`detail`): the one check for every header value the SDK sends (API key, user agent, idempotency
// key, caller headers), at construction or before sending.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace wandura::detail {

/// The offset of the first byte in `value` that a field value may not hold, or nullopt when it has none: a control
/// byte other than HTAB (0x00-0x08, 0x0A-0x1F) or DEL (0x7F).
///
/// RFC 9110 §5.5 allows a field value visible ASCII (0x21-0x7E), SP, HTAB and obs-text (0x80-0xFF). Of the others,
/// CR and LF would end the header line and let the rest of the value be read as a header of its own (header
/// injection), and a NUL cuts the value short wherever it becomes a C string; the other control bytes would reach
/// the server, which answers 400. All of them are refused here, before anything is sent.
///
/// @par Thread safety
/// Pure function.
[[nodiscard]] std::optional<std::size_t> find_forbidden_header_byte(std::string_view value) noexcept;

/// Why `value` cannot be sent as the value of header `name`, or an empty string when it can (see
/// `find_forbidden_header_byte`): `header Authorization: value holds a line feed (LF) at byte 5`, or for a byte
/// other than CR, LF and NUL `header User-Agent: value holds a control byte (\x7f) at byte 5`. Names the header,
/// the offending byte and its offset, never the rest of the value (it may be a secret: an API key).
///
/// @throws std::bad_alloc when memory runs out while building the message.
[[nodiscard]] std::string header_value_refusal(std::string_view name, std::string_view value);

/// Throws unless `value` is safe to send as the value of header `name` (see `find_forbidden_header_byte`).
///
/// @param name the header's name as sent (e.g. `Authorization`), used in the message only.
/// @param value the value to check; never copied into the message, since it may be a secret (an API key).
/// @throws wandura::error with `errc::invalid_argument` and `header_value_refusal`'s message followed by
///   `; refused, nothing sent`, e.g. `header Authorization: value holds a line feed (LF) at byte 5; refused,
///   nothing sent`.
/// @throws std::bad_alloc when memory runs out while building the message.
///
/// @par Thread safety
/// Pure function.
void check_header_value(std::string_view name, std::string_view value);

} // namespace wandura::detail
