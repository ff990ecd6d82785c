// What the fleet integration tests share: a private redis-server or a clear skip, and a bounded runner.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "redis_server.hpp"
#include "run_awaitable.hpp"

namespace test_support {

/// A running private redis-server, or null after a WARN saying why the test is skipped (binary absent only).
inline std::unique_ptr<redis_server> start_redis_or_skip(std::vector<std::string> extra_args = {}) {
  auto binary = redis_server::find_binary();
  if (!binary) {
    WARN("skipped: redis-server is not installed (not on PATH, WANDURA_REDIS_SERVER unset); "
         "scripts/install-deps.sh installs it");
    return nullptr;
  }
  return std::make_unique<redis_server>(*binary, std::move(extra_args));
}

/// `run` for an awaitable without a value.
inline void run(asio::io_context& io, asio::awaitable<void> aw) {
  run(io, [](asio::awaitable<void> inner) -> asio::awaitable<int> {
    co_await std::move(inner);
    co_return 0;
  }(std::move(aw)));
}

/// Milliseconds since `start` on the steady clock.
inline long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

} // namespace test_support
