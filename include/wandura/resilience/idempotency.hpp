// Idempotency keys for writes (docs/protocol.md §1 "automatic idempotency keys", docs/protocol.md §1 "Idempotency").
//
// Every POST carries `Idempotency-Key: <key>`. An automatic key is made once per logical call and sent unchanged,
// with a byte-identical body, on every attempt; the server then executes and counts the request once and answers a
// repeat with the first result and `Idempotency-Replayed: true`.
//
// Thread safety: free functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace wandura {

/// The request header that carries the key.
inline constexpr std::string_view idempotency_key_header = "Idempotency-Key";
/// Longest caller-chosen key accepted (docs/protocol.md §1: 1 to 200 visible ASCII characters).
inline constexpr std::size_t max_idempotency_key_length = 200;
/// Length of an automatic key: 16 random bytes as lowercase hex.
inline constexpr std::size_t auto_idempotency_key_length = 32;

/// Checks a caller-chosen key before anything is sent: 1-200 characters, each 0x21-0x7E (no spaces, no control or
/// non-ASCII bytes). Returns `errc::invalid_idempotency_key` (docs/protocol.md §1 code 90010) otherwise, empty when
/// valid.
[[nodiscard]] std::error_code validate_idempotency_key(std::string_view key) noexcept;

/// Makes an automatic key: 32 lowercase hex characters from 16 bytes of OpenSSL `RAND_bytes` (a CSPRNG).
///
/// The bytes come from a per-thread block of 4 KiB drawn with one `RAND_bytes` call and handed out once each, so
/// that most keys cost no call into OpenSSL (and no `getpid`, which OpenSSL 3 makes on every call to notice a fork).
/// A block drawn before a `fork` is thrown away in the child (`pthread_atfork`): parent and child never share keys.
///
/// @param out receives the key (replaced). Unchanged on failure.
/// @return empty, or `errc::transport_failed` when the CSPRNG could not produce bytes (never in practice; no
///         weaker source is ever substituted).
[[nodiscard]] std::error_code make_idempotency_key(std::string& out);

} // namespace wandura
