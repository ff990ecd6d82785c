// `viewer_ref`: a stable, non-personal id of one viewer on one device (docs/protocol.md §1 "viewer_ref";
// docs/protocol.md §3: HMAC of the user id plus a hash of the install id, never per session, never personal data).
//
// Thread safety: the functions are reentrant and may be called from any thread at once.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace wandura {

/// Computes `base64url_nopad(HMAC-SHA256(key = secret, msg = user_id)[0:16]) + ":" +
/// base64url_nopad(SHA-256(install_id)[0:8])` over the UTF-8 bytes given: 22 characters, a colon, 11 characters
/// (tests/vectors/viewer-ref.json). The same inputs always give the same value; the user id cannot be recovered
/// without `secret`.
///
/// @param secret the organisation's own key for viewer refs (keep it server-side; rotating it changes every ref,
///   so reuse stops until tickets are issued again). Must not be empty.
/// @param user_id the backend's user id. Must not be empty.
/// @param install_id the app installation's id (one per device and app install). Must not be empty.
/// @throws wandura::error with `errc::invalid_argument` when an input is empty (the message names which) or when
///   OpenSSL fails to compute a digest; `std::bad_alloc` when out of memory.
[[nodiscard]] std::string make_viewer_ref(std::string_view secret, std::string_view user_id,
                                          std::string_view install_id);

/// As above, but reports a refused input through `ec` (set to `errc::invalid_argument`, result empty) instead of
/// throwing; `ec` is cleared on success. Only `std::bad_alloc` can escape.
[[nodiscard]] std::string make_viewer_ref(std::string_view secret, std::string_view user_id,
                                          std::string_view install_id, std::error_code& ec);

} // namespace wandura
