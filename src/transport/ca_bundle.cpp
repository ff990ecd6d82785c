#include "wandura/detail/ca_bundle.hpp"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <system_error>

#include "wandura/detail/printable.hpp"

namespace wandura::detail {

std::string ca_bundle_refusal(std::string const& path) {
  std::string const quoted = "\"" + printable(path) + "\": ";
  if (path.empty()) {
    return quoted + "an empty path names no file";
  }
  if (path.find('\0') != std::string::npos) {
    return quoted + "holds a NUL byte, which no path does";
  }
  std::error_code not_a_directory;
  if (std::filesystem::is_directory(path, not_a_directory)) {
    // A directory opens like a file, and libcurl (CURLOPT_CAINFO) would fail every handshake without naming it.
    return quoted + "is a directory; give one PEM file with the CA certificates to trust (for example their "
                    "concatenation: cat DIR/*.pem > bundle.pem)";
  }
  errno = 0;
  if (!std::ifstream(path, std::ios::binary).is_open()) {
    return quoted + "cannot be opened: " + std::strerror(errno != 0 ? errno : ENOENT);
  }
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  if (!store) {
    throw std::bad_alloc();
  }
  // X509_STORE_load_file succeeds when it read one certificate or CRL at least (X509_load_cert_crl_file).
  bool const loaded = X509_STORE_load_file(store.get(), path.c_str()) == 1;
  ERR_clear_error(); // nothing left on this thread's error queue for the next OpenSSL user to misread
  return loaded ? std::string() : quoted + "holds no PEM certificate";
}

} // namespace wandura::detail
