#include "wandura/resilience/idempotency.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>

#include "wandura/error.hpp"

namespace wandura {
namespace {

// Bumped in the child of every fork(): a child must never hand out bytes its parent drew before the fork, or both
// would send the same keys. Comparing a counter costs nothing; asking getpid() on every key is what this avoids.
std::atomic<std::uint64_t> fork_generation{0};

void on_fork_child() noexcept {
  fork_generation.fetch_add(1, std::memory_order_relaxed);
}

/// CSPRNG bytes drawn from `RAND_bytes` a block at a time, per thread. Each byte is handed out once and wiped.
class random_pool {
public:
  /// Fills `out` with `n` unpredictable bytes (`n` at most the block size); false when the CSPRNG failed.
  bool draw(unsigned char* out, std::size_t n) noexcept {
    // Registered before the first block is drawn, so no block exists that a fork could copy unnoticed.
    static int const registered = pthread_atfork(nullptr, nullptr, &on_fork_child);
    (void)registered; // on failure (ENOMEM) every later fork is unprotected; nothing better to do than OpenSSL's own
    auto const generation = fork_generation.load(std::memory_order_relaxed);
    if (generation != generation_) {
      OPENSSL_cleanse(block_.data(), block_.size());
      used_ = block_.size();
      generation_ = generation;
    }
    if (block_.size() - used_ < n) {
      if (RAND_bytes(block_.data(), static_cast<int>(block_.size())) != 1) {
        return false;
      }
      used_ = 0;
    }
    std::memcpy(out, block_.data() + used_, n);
    OPENSSL_cleanse(block_.data() + used_, n);
    used_ += n;
    return true;
  }

private:
  std::array<unsigned char, 4096> block_{};
  std::size_t used_ = block_.size(); // nothing drawn yet
  std::uint64_t generation_ = 0;
};

} // namespace

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
  // One pool per thread: used synchronously here, never across a suspension, so coroutines moving between threads
  // do not matter; threads never share bytes.
  thread_local random_pool pool;
  std::array<unsigned char, auto_idempotency_key_length / 2> bytes{};
  if (!pool.draw(bytes.data(), bytes.size())) {
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
