// wandura::redis_url: where the fleet's Redis is and how to log in, read from `redis://[user:password@]host:port[/db]`.
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wandura {

/// A parsed `redis://` URL. The password is kept for `AUTH` and never appears in a message of the SDK: use
/// `redacted()` to name the server in a log line, `redacted_url()` to show the URL a user gave.
struct redis_url {
  std::string host = "127.0.0.1"; ///< name or address; an IPv6 address without its brackets.
  std::uint16_t port = 6379;      ///< TCP port; 6379 when the URL names none.
  std::string user;               ///< ACL user for `AUTH user password` (sent whenever a user is named, with an empty
                                  ///< password when none is given); empty for `AUTH password` (Redis < 6).
  std::string password;           ///< empty, and no user: no `AUTH` on connect.
  int db = 0;                     ///< `SELECT db` on connect when not 0.

  /// Reads `redis://[user:password@]host[:port][/db]` (the scheme in any case; user and password percent-decoded;
  /// an IPv6 `host` in brackets, `[::1]`).
  /// @throws wandura::error with `errc::invalid_argument` for another scheme (`rediss://` included, in any case:
  ///         hiredis 0.14 has no TLS, docs/adr/0008), an empty host, a host with a control character (a byte below
  ///         0x20, or 0x7f) or a space, a host name with a character other than letters, digits and
  ///         `-._~!$&'()*+,;=` (RFC 3986's unescaped ones), an IPv6 address without brackets (`redis://::1:6379`),
  ///         brackets around anything but an IPv6 address (hex digits, ':' and '.'; no zone id), a port outside
  ///         1-65535, a db outside 0-65535, a query
  ///         string or fragment (`?db=1`: the db is the path) or a bad percent escape. The message says which,
  ///         and never contains the password.
  [[nodiscard]] static redis_url parse(std::string_view url);

  /// `host:port/db` (IPv6 in brackets), without user or password: safe to log.
  [[nodiscard]] std::string redacted() const;

  /// The URL with `***` for the password: `redis://user:***@host:port[/db]`, `redis://:***@host:port` for a
  /// password alone, `redis://host:port` without credentials (the user percent-encoded, IPv6 in brackets, the
  /// port always, the db when not 0). Safe to print or write to a report; `parse` reads it back to the same host,
  /// port, user and db.
  [[nodiscard]] std::string redacted_url() const;
};

} // namespace wandura
