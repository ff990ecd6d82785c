// The local arithmetic that the Lua scripts mirror (src/fleet/rate_math.hpp), on a hand-stepped clock, and the
// reading of the times they store (src/fleet/fleet_values.hpp).
#include "fleet/rate_math.hpp"

#include <chrono>
#include <limits>

#include <catch2/catch.hpp>

#include "fleet/fleet_values.hpp"

using wandura::detail::bucket_take;
using wandura::detail::gcra_take;

TEST_CASE("token bucket: all or nothing, refilled continuously, released up to capacity") {
  wandura::detail::token_bucket b;
  double const rate = 30.0 / 60000.0; // 30 tickets a minute: one every 2000 ms
  CHECK(bucket_take(b, 0, rate, 30, 28).granted);
  auto const refused = bucket_take(b, 0, rate, 30, 3); // 2 left
  CHECK_FALSE(refused.granted);
  CHECK(refused.wait_ms == 2000); // one more token in 2 s
  CHECK(bucket_take(b, 0, rate, 30, 2).granted);
  CHECK_FALSE(bucket_take(b, 1999, rate, 30, 1).granted);
  CHECK(bucket_take(b, 2000, rate, 30, 1).granted);
  bucket_take(b, 2000, rate, 30, -100); // release: capped at capacity
  CHECK(b.tokens == 30);
  CHECK_FALSE(bucket_take(b, 2000, rate, 30, 31).granted);
}

TEST_CASE("token bucket: a share of a larger bucket lets a request above the share go when full and in debt") {
  // A process's half of a 6-ticket bucket: holds 3, refills at half the rate; a request of up to 6 may go.
  wandura::detail::token_bucket b;
  double const rate = 3.0 / 60000.0; // half of 6 a minute: one every 20 s
  auto const early = bucket_take(b, 0, rate, 3, 7, 6);
  CHECK_FALSE(early.granted); // above the whole bucket: never, with the time until full (it is full)
  CHECK(early.wait_ms == 0);
  CHECK(bucket_take(b, 0, rate, 3, 5, 6).granted); // full: goes, 2 in debt
  CHECK(b.tokens == -2);
  auto const owed = bucket_take(b, 0, rate, 3, 1, 6);
  CHECK_FALSE(owed.granted);
  CHECK(owed.wait_ms == 60000); // the debt and the ticket: 3 refills of 20 s
  CHECK_FALSE(bucket_take(b, 59999, rate, 3, 1, 6).granted);
  CHECK(bucket_take(b, 60000, rate, 3, 1, 6).granted);
  auto const big = bucket_take(b, 60000, rate, 3, 4, 6); // above the share: waits until the bucket is full
  CHECK_FALSE(big.granted);
  CHECK(big.wait_ms == 60000);
  bucket_take(b, 60000, rate, 3, -10, 6); // given back: up to the share's capacity
  CHECK(b.tokens == 3);
  // With `most` equal to the capacity it is the whole bucket's rule.
  wandura::detail::token_bucket whole;
  CHECK_FALSE(bucket_take(whole, 0, rate, 3, 4, 3).granted);
  CHECK(bucket_take(whole, 0, rate, 3, 3, 3).granted);
}

TEST_CASE("gcra: a whole burst from idle, then one unit per emission interval") {
  wandura::detail::gcra g;
  double const em = 100; // 600 a minute
  double const burst = 10;
  double const t0 = 1'700'000'000'000.0;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(gcra_take(g, t0, 1, em, burst).go);
  }
  auto const next = gcra_take(g, t0, 1, em, burst);
  CHECK_FALSE(next.go);
  CHECK(next.at_ms == t0 + 100);
  CHECK_FALSE(gcra_take(g, t0 + 99, 1, em, burst).go);
  CHECK(gcra_take(g, t0 + 100, 1, em, burst).go);
  auto const batch = gcra_take(g, t0 + 100, 3, em, burst); // a batch of 3 waits for 3 intervals of room
  CHECK_FALSE(batch.go);
  CHECK(batch.at_ms == t0 + 400);
}

TEST_CASE("gcra: units that conform within the booking time are booked for their instant, in the order asked") {
  wandura::detail::gcra g;
  double const em = 100;
  double const t0 = 1'700'000'000'000.0;
  REQUIRE(gcra_take(g, t0, 2, em, 2, 250).at_ms == t0); // the burst: now
  auto const first = gcra_take(g, t0, 1, em, 2, 250);
  CHECK(first.go);
  CHECK(first.at_ms == t0 + 100);
  auto const second = gcra_take(g, t0, 1, em, 2, 250);
  CHECK(second.go);
  CHECK(second.at_ms == t0 + 200);
  auto const beyond = gcra_take(g, t0, 1, em, 2, 250); // conforms at t0 + 300: beyond the booking time
  CHECK_FALSE(beyond.go);
  CHECK(beyond.at_ms == t0 + 50); // when asking again books it
  auto const later = gcra_take(g, t0 + 50, 1, em, 2, 250);
  CHECK(later.go);
  CHECK(later.at_ms == t0 + 300);
  CHECK_FALSE(gcra_take(g, t0 + 50, 1, em, 2, 0).go); // without booking, nothing before its instant
}

TEST_CASE("gcra: a hold-off refuses everything until it passes") {
  wandura::detail::gcra g;
  g.hold_ms = 5000;
  auto const held = gcra_take(g, 1000, 1, 100, 10);
  CHECK_FALSE(held.go);
  CHECK(held.at_ms == 5000);
  CHECK(gcra_take(g, 5000, 1, 100, 10).go);
}

TEST_CASE("token bucket: more than the capacity never fits, the wait is until the bucket is full") {
  wandura::detail::token_bucket b;
  double const rate = 30.0 / 60000.0;
  REQUIRE(bucket_take(b, 0, rate, 30, 10).granted);
  auto const never = bucket_take(b, 0, rate, 30, 31);
  CHECK_FALSE(never.granted);
  CHECK(never.wait_ms == 20000); // 10 tokens at one per 2 s
  CHECK(b.tokens == 20);         // nothing taken
}

TEST_CASE("epoch milliseconds from Redis: NaN is the epoch, infinite or out of range saturates at the clock's ends") {
  using wandura::detail::from_epoch_ms;
  using time_point = std::chrono::system_clock::time_point;
  double const inf = std::numeric_limits<double>::infinity();
  CHECK(from_epoch_ms(std::numeric_limits<double>::quiet_NaN()) == time_point{});
  CHECK(from_epoch_ms(inf) == time_point::max());
  CHECK(from_epoch_ms(-inf) == time_point::min());
  CHECK(from_epoch_ms(1e300) == time_point::max());
  CHECK(from_epoch_ms(-1e300) == time_point::min());
  CHECK(from_epoch_ms(9223372036855.0) == time_point::max()); // just past the clock's last millisecond
  CHECK(from_epoch_ms(1'764'590'400'123.5) ==
        time_point(std::chrono::milliseconds(1'764'590'400'123) + std::chrono::microseconds(500)));
  CHECK(from_epoch_ms(wandura::detail::to_written_epoch_ms(time_point::max())) < time_point::max());
}
