// The one check of a CA bundle path the SDK is given (`transport_options::ca_bundle`): a regular file that can be
// opened and holds at least one PEM certificate, read as libcurl's OpenSSL will read it.
//
// Not public API (`detail`): the transport's constructor refuses such a path with it, and the command line uses it
// to say where the path came from (a flag or an environment variable).
#pragma once

#include <string>

namespace wandura::detail {

/// Why `path` cannot serve as the CA bundle, or an empty string when it can: the path quoted as printable ASCII,
/// then what is wrong (`"/etc/ca.pem": cannot be opened: No such file or directory`, `"certs": is a directory; ...`,
/// `"/dev/fd/63": is not a regular file; ...`, `"x.pem": holds no PEM certificate`, which a file of CRLs alone
/// also gets). A pipe or device is refused without being read; a regular file is read whole, now.
///
/// @throws std::bad_alloc when memory runs out.
/// @par Thread safety
/// Any thread. The calling thread's OpenSSL error queue is left as it was found.
[[nodiscard]] std::string ca_bundle_refusal(std::string const& path);

} // namespace wandura::detail
