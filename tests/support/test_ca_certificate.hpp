// Test helpers: a CA certificate and a CRL in PEM, for options that take a bundle file (the CA's key was not kept:
// nothing else is signed with it), and a scratch directory to write them into.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace test_support {

/// A self-signed CA certificate (EC P-256, "CN=wandura test CA", valid until 2126).
inline constexpr std::string_view test_ca_pem = "-----BEGIN CERTIFICATE-----\n"
                                                "MIIBizCCATGgAwIBAgIUWTTXUWh6PM+sZ60WnEXL3Zm/cu4wCgYIKoZIzj0EAwIw\n"
                                                "GjEYMBYGA1UEAwwPd2FuZHVyYSB0ZXN0IENBMCAXDTI2MTIwNTA1NDE1MFoYDzIx\n"
                                                "MjYxMTExMDU0MTUwWjAaMRgwFgYDVQQDDA93YW5kdXJhIHRlc3QgQ0EwWTATBgcq\n"
                                                "hkjOPQIBBggqhkjOPQMBBwNCAARIfyDk3146BQC8aPNMppCbkDTUrQgHBwsllW3X\n"
                                                "wEppilDVTLDr6iFigIr5+ipITU2G7T8lBAyKYGjij5NVNfNeo1MwUTAdBgNVHQ4E\n"
                                                "FgQU9hDMYGaNXY9ERG9O38q6KCzNdfQwHwYDVR0jBBgwFoAU9hDMYGaNXY9ERG9O\n"
                                                "38q6KCzNdfQwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEA5vhL\n"
                                                "ZDkUr3PUcv38p8vYtIm4PZK/vPWIBIY1sLMPC+kCIHF4/Epwif4g6tFtUm+OrjNq\n"
                                                "GCgPxlkfGutqz3xi2zoz\n"
                                                "-----END CERTIFICATE-----\n";

/// A certificate revocation list issued by `test_ca_pem`'s CA, revoking nothing (valid until 2126): a PEM file
/// holding only it holds no certificate.
inline constexpr std::string_view test_crl_pem = "-----BEGIN X509 CRL-----\n"
                                                 "MIGzMFsCAQEwCgYIKoZIzj0EAwIwGjEYMBYGA1UEAwwPd2FuZHVyYSB0ZXN0IENB\n"
                                                 "Fw0yNjEyMDUwNjEzMzFaGA8yMTI2MTExMTA2MTMzMVqgDjAMMAoGA1UdFAQDAgEB\n"
                                                 "MAoGCCqGSM49BAMCA0gAMEUCIGMMhX1kcDn3ofiM+xkz1YMv8dC6k5kQ/kh6pejP\n"
                                                 "Xqd2AiEAoXhzHYsA177YPx6N+ciXgBMaZ1s6P5ghtg8HucVC0Fc=\n"
                                                 "-----END X509 CRL-----\n";

/// A directory of this process's own under the system's temporary directory, removed with everything in it when
/// the object is destroyed.
class scratch_directory {
public:
  explicit scratch_directory(std::string_view name)
      : path_(std::filesystem::temp_directory_path() /
              (std::string(name) + "-" + std::to_string(static_cast<long>(::getpid())))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_directory(scratch_directory const&) = delete;
  scratch_directory& operator=(scratch_directory const&) = delete;

  /// Writes `text` to the file `name` in the directory; returns its path.
  std::string write(std::string_view name, std::string_view text) const {
    auto const file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }
  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace test_support
