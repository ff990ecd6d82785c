#include "wandura/playback/viewer_ref.hpp"

#include <array>
#include <limits>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "wandura/error.hpp"

namespace wandura {
namespace {

/// RFC 4648 §5 base64url without '=' padding.
void append_base64url(std::string& out, unsigned char const* data, std::size_t size) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    std::uint32_t const n = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8) | data[i + 2];
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
    out.push_back(alphabet[(n >> 6) & 63]);
    out.push_back(alphabet[n & 63]);
  }
  if (size - i == 1) {
    std::uint32_t const n = std::uint32_t{data[i]} << 16;
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
  } else if (size - i == 2) {
    std::uint32_t const n = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8);
    out.push_back(alphabet[(n >> 18) & 63]);
    out.push_back(alphabet[(n >> 12) & 63]);
    out.push_back(alphabet[(n >> 6) & 63]);
  }
}

/// Fills `message` and returns an empty string when an input is refused or OpenSSL fails.
std::string compute(std::string_view secret, std::string_view user_id, std::string_view install_id,
                    char const*& message) {
  if (secret.empty()) {
    message = "make_viewer_ref: empty secret";
    return {};
  }
  if (user_id.empty()) {
    message = "make_viewer_ref: empty user_id";
    return {};
  }
  if (install_id.empty()) {
    message = "make_viewer_ref: empty install_id";
    return {};
  }
  if (secret.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    message = "make_viewer_ref: secret longer than 2^31-1 bytes";
    return {};
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<unsigned char const*>(user_id.data()), user_id.size(), mac.data(), &mac_size) == nullptr ||
      mac_size < 16) {
    message = "make_viewer_ref: OpenSSL HMAC-SHA256 failed";
    return {};
  }
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  if (SHA256(reinterpret_cast<unsigned char const*>(install_id.data()), install_id.size(), digest.data()) == nullptr) {
    message = "make_viewer_ref: OpenSSL SHA-256 failed";
    return {};
  }
  std::string out;
  out.reserve(22 + 1 + 11);
  append_base64url(out, mac.data(), 16);
  out.push_back(':');
  append_base64url(out, digest.data(), 8);
  return out;
}

} // namespace

std::string make_viewer_ref(std::string_view secret, std::string_view user_id, std::string_view install_id) {
  char const* message = nullptr;
  std::string out = compute(secret, user_id, install_id, message);
  if (message != nullptr) {
    throw error(errc::invalid_argument, message);
  }
  return out;
}

std::string make_viewer_ref(std::string_view secret, std::string_view user_id, std::string_view install_id,
                            std::error_code& ec) {
  char const* message = nullptr;
  std::string out = compute(secret, user_id, install_id, message);
  ec = message != nullptr ? make_error_code(errc::invalid_argument) : std::error_code();
  return out;
}

} // namespace wandura
