#include "wandura/detail/ca_bundle.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <memory>
#include <new>
#include <system_error>

#include "wandura/detail/printable.hpp"

namespace wandura::detail {
namespace {

/// Whether the PEM file at `path` holds one certificate at least (a CRL alone verifies no server), read by OpenSSL
/// as libcurl's OpenSSL reads CURLOPT_CAINFO. The calling thread's error queue is left as it was found.
bool holds_certificate(std::string const& path) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  if (!store) {
    throw std::bad_alloc();
  }
  ERR_set_mark();
  bool const loaded = X509_STORE_load_file(store.get(), path.c_str()) == 1;
  ERR_pop_to_mark();
  if (!loaded) {
    return false;
  }
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store.get());
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    if (X509_OBJECT_get_type(sk_X509_OBJECT_value(objects, i)) == X509_LU_X509) {
      return true;
    }
  }
  return false;
}

} // namespace

std::string ca_bundle_refusal(std::string const& path) {
  std::string const quoted = "\"" + printable(path) + "\": ";
  if (path.empty()) {
    return quoted + "an empty path names no file";
  }
  if (path.find('\0') != std::string::npos) {
    return quoted + "holds a NUL byte, which no path does";
  }
  // Opened without waiting (a FIFO without a writer would block here) and looked at before anything is read.
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int const failure = errno;
    return quoted + "cannot be opened: " + std::generic_category().message(failure);
  }
  struct stat facts {};
  int const looked = ::fstat(fd, &facts);
  int const failure = errno;
  ::close(fd);
  if (looked != 0) {
    return quoted + "cannot be opened: " + std::generic_category().message(failure);
  }
  if (S_ISDIR(facts.st_mode)) {
    // libcurl (CURLOPT_CAINFO) reads one file; given a directory it would fail every handshake without naming it.
    return quoted + "is a directory; give one PEM file with the CA certificates to trust (for example their "
                    "concatenation: cat DIR/*.pem > bundle.pem)";
  }
  if (!S_ISREG(facts.st_mode)) {
    // A pipe or a device: reading it here would use it up (or wait for it) before libcurl reads it.
    return quoted + "is not a regular file; give one PEM file with the CA certificates to trust";
  }
  return holds_certificate(path) ? std::string() : quoted + "holds no PEM certificate";
}

} // namespace wandura::detail
