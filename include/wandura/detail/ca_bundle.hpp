// The one check of a CA bundle path the SDK is given (`transport_options::ca_bundle`): a file that can be opened and
// holds at least one PEM certificate, read as libcurl's OpenSSL reads it for each new TLS connection.
//
// Not public API (`detail`): the transport's constructor refuses such a path with it, and the command line uses it
// to say where the path came from (a flag or an environment variable).
#pragma once

#include <string>

namespace wandura::detail {

/// Why `path` cannot serve as the CA bundle, or an empty string when it can: the path quoted as printable ASCII,
/// then what is wrong (`"/etc/ca.pem": cannot be opened: No such file or directory`, `"certs": is a directory; ...`,
/// `"x.pem": holds no PEM certificate`). The file is read whole, now; a file changed later is read as it is then.
///
/// @throws std::bad_alloc when memory runs out.
/// @par Thread safety
/// Any thread. Leaves the calling thread's OpenSSL error queue empty.
[[nodiscard]] std::string ca_bundle_refusal(std::string const& path);

} // namespace wandura::detail
