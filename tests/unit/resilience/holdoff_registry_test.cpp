#include "resilience/holdoff_registry.hpp"

#include <thread>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE("hold-offs: one per counter, and a hold-off only ever moves later") {
  wandura::detail::holdoff_registry r;
  auto const t = std::chrono::steady_clock::time_point(100h);
  CHECK(r.held_until("playback") == std::chrono::steady_clock::time_point::min());
  r.hold("playback", t + 2s);
  CHECK(r.held_until("playback") == t + 2s);
  CHECK(r.held_until("catalog") == std::chrono::steady_clock::time_point::min());
  r.hold("playback", t + 1s); // an earlier 429 answer arriving late does not shorten the wait
  CHECK(r.held_until("playback") == t + 2s);
  r.hold("playback", t + 5s);
  CHECK(r.held_until("playback") == t + 5s);
}

TEST_CASE("hold-offs: concurrent holds keep the longest wait") {
  wandura::detail::holdoff_registry r;
  auto const t = std::chrono::steady_clock::time_point(100h);
  auto worker = [&](int offset) {
    for (int i = 0; i < 2000; ++i) {
      r.hold(i % 2 == 0 ? "playback" : "config", t + std::chrono::milliseconds(offset + i));
    }
  };
  std::thread a(worker, 0);
  std::thread b(worker, 5);
  a.join();
  b.join();
  CHECK(r.held_until("playback") == t + std::chrono::milliseconds(5 + 1998));
  CHECK(r.held_until("config") == t + std::chrono::milliseconds(5 + 1999));
}
