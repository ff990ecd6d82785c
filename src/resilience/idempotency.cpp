#include "wandura/resilience/idempotency.hpp"

#include <array>

#include <openssl/rand.h>

#include "wandura/error.hpp"

namespace wandura {

std::error_code validate_idempotency_key(std::string_view key) noexcept {
  if (key.empty() || key.size() > max_idempotency_key_length) {
    return errc::invalid_idempotency_key;
  }
  for (char const c : key) {
    auto const byte = static_cast<unsigned char>(c);
    if (byte < 0x21 || byte > 0x7E) {
      return errc::invalid_idempotency_key;
    }
  }
  return {};
}

std::error_code make_idempotency_key(std::string& out) {
  std::array<unsigned char, auto_idempotency_key_length / 2> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return errc::transport_failed;
  }
  constexpr std::string_view hex = "0123456789abcdef";
  std::string key(auto_idempotency_key_length, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    key[2 * i] = hex[bytes[i] >> 4];
    key[2 * i + 1] = hex[bytes[i] & 0x0F];
  }
  out = std::move(key);
  return {};
}

} // namespace wandura
