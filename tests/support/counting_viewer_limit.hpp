// A per-viewer limit for tests: allows every take and counts the tickets taken and given back (from any thread), so
// that a test holding it past the client's end sees how each call settled its allowance.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

#include "wandura/playback/viewer_limit.hpp"

namespace test_support {

class counting_viewer_limit final : public wandura::viewer_limit {
public:
  asio::awaitable<decision> acquire(std::string, std::uint32_t tickets) override {
    taken += tickets;
    co_return decision{true, std::chrono::milliseconds{0}, account::primary};
  }
  void release(std::string_view, std::uint32_t tickets, account) noexcept override { released += tickets; }

  std::atomic<std::uint32_t> taken{0};
  std::atomic<std::uint32_t> released{0};
};

} // namespace test_support
