// The two refill models of seed 001 as plain values, stepped by hand (no server, no clock).
#include "emulator/rate_limiter.hpp"

#include <catch2/catch.hpp>

using namespace wandura::emulator::detail;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
time_point at(std::chrono::milliseconds ms) {
  return time_point(seconds(1'800'000'000)) + ms;
}
} // namespace

TEST_CASE("rate limiter: a continuous bucket spends a whole minute from idle, then refills limit/60 a second") {
  continuous_bucket b(600, 0.0, at(milliseconds(0)));
  for (int i = 0; i < 600; ++i) {
    REQUIRE(b.try_take(1, at(milliseconds(0))));
  }
  CHECK_FALSE(b.try_take(1, at(milliseconds(0))));
  CHECK(b.seconds_until(1, at(milliseconds(0))) == Approx(0.1));
  CHECK_FALSE(b.try_take(1, at(milliseconds(99))));
  CHECK(b.try_take(1, at(milliseconds(100))));
  // Never more than the limit, however long it idles.
  CHECK(b.remaining(at(milliseconds(3'600'000))) == Approx(600));
}

TEST_CASE("rate limiter: the overshoot slack lets a burst pass the limit by floor(limit x overshoot)") {
  continuous_bucket b(1200, 0.025, at(milliseconds(0)));
  int granted = 0;
  while (b.try_take(1, at(milliseconds(0)))) {
    ++granted;
  }
  CHECK(granted == 1230);
  fixed_window w(600, 0.025);
  int in_window = 0;
  while (w.try_take(at(milliseconds(0)))) {
    ++in_window;
  }
  CHECK(in_window == 615);
}

TEST_CASE("rate limiter: a reservation is debt that later requests must wait out") {
  continuous_bucket b(60, 0.0, at(milliseconds(0))); // one unit a second
  for (int i = 0; i < 60; ++i) {
    REQUIRE(b.try_take(1, at(milliseconds(0))));
  }
  CHECK(b.seconds_until(1, at(milliseconds(600))) == Approx(0.4));
  b.reserve(1, at(milliseconds(600)));
  CHECK(b.seconds_until(1, at(milliseconds(600))) == Approx(1.4));
  CHECK_FALSE(b.try_take(1, at(milliseconds(1900))));
  CHECK(b.try_take(1, at(milliseconds(2000))));
}

TEST_CASE("rate limiter: time until the bucket is back above a level") {
  continuous_bucket b(100, 0.0, at(milliseconds(0)));
  for (int i = 0; i < 95; ++i) {
    REQUIRE(b.try_take(1, at(milliseconds(0))));
  }
  CHECK(b.seconds_until_above(20, at(milliseconds(0))) == Approx(9.0).margin(1e-3)); // 15 units at 100/60 a second
  CHECK(b.seconds_until_above(4, at(milliseconds(0))) == 0.0);
}

TEST_CASE("rate limiter: a fixed window restarts at each whole UTC minute") {
  fixed_window w(2, 0.0);
  auto minute = at(milliseconds(0)) - (at(milliseconds(0)).time_since_epoch() % std::chrono::minutes(1));
  CHECK(w.try_take(minute + seconds(10)));
  CHECK(w.try_take(minute + seconds(59)));
  CHECK_FALSE(w.try_take(minute + milliseconds(59'999)));
  CHECK(fixed_window::seconds_to_next_minute(minute + seconds(45)) == Approx(15));
  CHECK(w.try_take(minute + seconds(60)));
}

TEST_CASE("rate limiter: Retry-After rounds up to whole seconds, at least 1") {
  CHECK(retry_after_seconds(0.0) == 1);
  CHECK(retry_after_seconds(0.01) == 1);
  CHECK(retry_after_seconds(1.0) == 1);
  CHECK(retry_after_seconds(1.2) == 2);
  CHECK(retry_after_seconds(39.999) == 40);
  CHECK(retry_after_seconds(-3) == 1);
}
