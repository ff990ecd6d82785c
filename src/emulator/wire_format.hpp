// The emulator's wire vocabulary: error codes and messages, header lines, canonical JSON for idempotency, digests
// and encodings, dates. Pure functions shared by the service's parts (service.cpp, ticket_batch.cpp).
#pragma once

#include "emulator/clock.hpp"

#include <simdjson.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wandura::emulator::detail {

/// The API's `error_code` for an HTTP status (docs/protocol.md §1 "Errors").
std::string_view error_code_for(int status) noexcept;
/// The human `error` text for an `error_code`.
std::string_view message_for(std::string_view error_code) noexcept;

/// Appends the header line `name: value\r\n`.
void append_header(std::string& headers, std::string_view name, std::uint64_t value);
void append_header(std::string& headers, std::string_view name, std::string_view value);

/// Serialises a JSON value with object keys sorted and no white space, so that two texts of the same JSON value
/// (docs/protocol.md §4: "key order and white space ignored") give the same bytes.
void canonical_json(simdjson::dom::element e, std::string& out);

/// SHA-256 of `data`.
std::array<unsigned char, 32> sha256(std::string_view data);
/// Standard base64 with padding.
std::string base64(unsigned char const* data, std::size_t n);
/// Percent-encodes everything but RFC 3986 unreserved characters, for film refs placed in URLs.
std::string url_encode(std::string_view s);
/// One path segment with its `%XX` escapes decoded (RFC 3986 §2.1, either case of hex digit); an encoded `/` is a
/// byte of the segment like any other. Nothing when a `%` is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view segment);
/// Whether every byte is visible ASCII (0x21-0x7E).
bool visible_ascii(std::string_view s) noexcept;

/// The `unreadable_item` fault: in a ticket batch answer written by this emulator, quotes the number of the
/// `index`-th item's `"status":` (`"status":"200"`), a value no client can read as a status. Returns false, and
/// leaves `body` as it was, when the answer has no such item. (The pattern `"status":` cannot occur inside a JSON
/// string the emulator writes, where a quote is escaped, and the batch's other objects have no `status`.)
bool make_item_unreadable(std::string& body, std::size_t index);

} // namespace wandura::emulator::detail
