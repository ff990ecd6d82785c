#include "saturating_time.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "wandura/resilience/clock.hpp"

using namespace std::chrono_literals;
using wandura::detail::saturating_add;
using time_point = wandura::clock::time_point;

TEST_CASE("saturating time: from + d as usual, time_point::max() where it would overflow, never before from") {
  time_point const from{1000h};
  CHECK(saturating_add(from, 1500ms) == from + 1500ms);
  CHECK(saturating_add(from, 1ns) == from + 1ns);
  CHECK(saturating_add(from, 0ms) == from);
  CHECK(saturating_add(from, -5s) == from);
  CHECK(saturating_add(from, std::chrono::milliseconds::min()) == from);

  CHECK(saturating_add(from, std::chrono::milliseconds::max()) == time_point::max());
  CHECK(saturating_add(from, std::chrono::seconds::max()) == time_point::max());
  CHECK(saturating_add(from, std::chrono::nanoseconds::max()) == time_point::max());
  CHECK(saturating_add(from, std::chrono::hours::max()) == time_point::max());
  CHECK(saturating_add(time_point::max(), 1ns) == time_point::max());
  CHECK(saturating_add(time_point::max(), 0ns) == time_point::max());

  // Right at the edge: the room left is added exactly, one more saturates.
  auto const room = time_point::max() - from;
  CHECK(saturating_add(from, room - 1ns) == time_point::max() - 1ns);
  CHECK(saturating_add(from, room) == time_point::max());
  auto const room_ms = std::chrono::floor<std::chrono::milliseconds>(room);
  CHECK(saturating_add(from, room_ms - 1ms) == from + (room_ms - 1ms));
  CHECK(saturating_add(from, room_ms + 1ms) == time_point::max());

  // Another clock (the wall clock of a manual_clock), and a floating-point duration.
  auto const wall = std::chrono::system_clock::time_point{} + 1000h;
  CHECK(saturating_add(wall, std::chrono::milliseconds::max()) == std::chrono::system_clock::time_point::max());
  CHECK(saturating_add(from, std::chrono::duration<double, std::milli>(2.5)) == from + 2500us);
  CHECK(saturating_add(from, std::chrono::duration<double>(1e300)) == time_point::max());
}

TEST_CASE("saturating time: from a time point before the epoch, where the room to max() is past a duration's range") {
  time_point const before{-1000h};
  CHECK(saturating_add(before, 1500ms) == before + 1500ms);
  CHECK(saturating_add(before, 2000h) == time_point{1000h});
  CHECK(saturating_add(before, std::chrono::nanoseconds::max()) == before + std::chrono::nanoseconds::max());
  CHECK(saturating_add(before, std::chrono::milliseconds::max()) == time_point::max());
  CHECK(saturating_add(before, std::chrono::hours::max()) == time_point::max());
  CHECK(saturating_add(time_point::min(), std::chrono::nanoseconds::max()) == time_point{-1ns});
  CHECK(saturating_add(time_point::min(), std::chrono::hours::max()) == time_point::max());
  CHECK(saturating_add(time_point::min(), std::chrono::duration<double>(1e300)) == time_point::max());
  CHECK(saturating_add(time_point{-1ns}, std::chrono::duration<double>(9.3e9)) == time_point::max());
  CHECK(saturating_add(before, std::chrono::duration<float>(1e10F)) == time_point::max());
  CHECK(saturating_add(before, std::chrono::duration<double>(3600.0)) == before + 1h);
  // A whole duration's worth lands 1000 h before the end: the rest of the room is exactly 1000 h.
  CHECK(saturating_add(before, std::chrono::nanoseconds::max()) + 1000h == time_point::max());
  auto const edge = saturating_add(before, std::chrono::nanoseconds::max());
  CHECK(saturating_add(edge, 1000h) == time_point::max());
  CHECK(saturating_add(edge, 999h) == time_point::max() - 1h);
}

TEST_CASE("saturating time: from - d as usual, time_point::min() where it would overflow, never after from") {
  using wandura::detail::saturating_sub;
  time_point const from{1000h};
  CHECK(saturating_sub(from, 1500ms) == from - 1500ms);
  CHECK(saturating_sub(from, 0ms) == from);
  CHECK(saturating_sub(from, -5s) == from);
  CHECK(saturating_sub(from, std::chrono::milliseconds::min()) == from);
  // A margin of the clock's whole span or more gives min() (documented), whatever `from` is.
  CHECK(saturating_sub(from, std::chrono::milliseconds::max()) == time_point::min());
  CHECK(saturating_sub(from, std::chrono::hours::max()) == time_point::min());
  CHECK(saturating_sub(time_point::min(), 1ns) == time_point::min());

  // Before the epoch, right at the edge: the room left is taken exactly, one more saturates.
  time_point const before{-1000h};
  auto const room = before - time_point::min();
  CHECK(saturating_sub(before, room - 1ns) == time_point::min() + 1ns);
  CHECK(saturating_sub(before, room) == time_point::min());
  CHECK(saturating_sub(before, 5min) == before - 5min);

  // The wall clock at its start (a ticket's expires_at of time_point::min(), less the reuse margin).
  auto const start = std::chrono::system_clock::time_point::min();
  CHECK(saturating_sub(start, std::chrono::minutes(5)) == start);
  CHECK(saturating_sub(start + 1min, std::chrono::minutes(5)) == start);
}
