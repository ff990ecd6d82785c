// The one check of a client's `base_url`: strict, done once at construction, before anything is sent.
//
// Not public API (`detail`): the one check of a base URL for the client and the command line.
#pragma once

#include <string>
#include <string_view>

namespace wandura::detail {

/// Checks `url` as the base of every API URL and returns it normalised.
///
/// Accepted: `http://` or `https://` (scheme in any case), a host (name, IPv4, or IPv6 literal in brackets, with an
/// optional zone), an optional port 1-65535 (an empty one, `http://host:/`, is the scheme's default, as RFC 3986
/// allows), and an optional path. Refused: any other scheme, no host, port 0 or
/// above 65535, a query (`?x=1`, even an empty `?`), a fragment (`#frag`), userinfo (`user:pass@`: credentials
/// belong in `client_options::api_key`, never in a URL that ends up in logs) and any other `@` (in the path it is a
/// mistyped password all the same), a percent-encoded host name, and any byte outside visible ASCII (white space,
/// control bytes, raw UTF-8: percent-encode them in the path).
///
/// The result is `scheme://host[:port][/path]` with the scheme in lower case, the port only when one was written,
/// the path as libcurl normalises it (dot segments removed) and without trailing slashes, so that the client
/// appends `/v1/...` to it: `HTTPS://api.example:8443/base/` gives `https://api.example:8443/base`. Checking the
/// result again returns it unchanged.
///
/// @param url the text as the user gave it; not retained.
/// @returns the normalised base URL.
/// @throws wandura::error with `errc::invalid_argument` saying what is wrong. The message quotes the URL only when
///   it holds no `@`, so that neither userinfo nor a password ever reaches a log, whatever else is wrong with it.
/// @throws std::bad_alloc when memory runs out.
///
/// @par Thread safety
/// Safe to call from any thread (libcurl's URL API keeps no shared state).
[[nodiscard]] std::string checked_base_url(std::string_view url);

} // namespace wandura::detail
