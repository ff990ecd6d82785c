// The demo's report figures that need no server: the plan's best possible play success (play_plan.hpp) on plans
// small enough to work out by hand, and the reason a failed play is counted under (failure_reason.hpp).
#include "play_plan.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "failure_reason.hpp"
#include "wandura/error.hpp"

using namespace std::chrono_literals;

namespace {

demo::play_plan one_per_second(double tickets_at_start, double deadline_ms) {
  demo::play_plan p;
  p.playback_limit_per_min = 60; // one ticket a second
  p.tickets_left_at_start = tickets_at_start;
  p.deadline_ms = deadline_ms;
  return p;
}

wandura::episode_start failed_play(wandura::item_outcome outcome, int requests,
                                   std::optional<std::chrono::seconds> ra) {
  wandura::episode_start got;
  got.play.outcome = outcome;
  got.play.status = outcome == wandura::item_outcome::unavailable ? 503 : 429;
  got.play.retry_after = ra;
  got.attempts = requests;
  return got;
}

} // namespace

TEST_CASE("play bound: first come first served on the refill, a play waits at most its deadline") {
  auto p = one_per_second(1, 1500);
  for (std::uint32_t v = 0; v < 3; ++v) {
    p.plays.push_back({0.0, v, 0, "film", 1});
  }
  // Served at 0 s (the ticket there), at 1 s (waited 1 s), and not the third: it would wait 2 s > 1.5 s.
  CHECK(demo::play_success_bound(p) == Approx(2.0 / 3.0));
  p.plays.push_back({1.2, 9, 0, "film", 1}); // arrives after the dropped one, which took nothing: served at 2 s
  CHECK(demo::play_success_bound(p) == Approx(3.0 / 4.0));
}

TEST_CASE("play bound: a ticket already served needs none, on the same device only") {
  auto p = one_per_second(1, 0);
  p.plays.push_back({0.0, 1, 0, "film", 4});
  p.plays.push_back({0.5, 1, 0, "film", 4}); // restart: the ticket is on the device
  p.plays.push_back({0.6, 1, 1, "film", 4}); // another device: a ticket of its own, none left, no wait allowed
  CHECK(demo::play_success_bound(p) == Approx(2.0 / 3.0));
}

TEST_CASE("play bound: the counter never holds more than its limit, however long it was idle") {
  auto p = one_per_second(60, 0);
  for (std::uint32_t v = 0; v < 70; ++v) {
    p.plays.push_back({100.0, v, 0, "film", 1}); // after 100 s idle the counter holds 60, not 160
  }
  CHECK(demo::play_success_bound(p) == Approx(60.0 / 70.0));
  CHECK(demo::play_success_bound(one_per_second(0, 0)) == 1.0); // no plays
}

TEST_CASE("failure reason: a retryable answer with retries and time left was stopped by the retry budget") {
  auto const policy = wandura::retry_policy::interactive(); // 3 retries, 15 s
  CHECK(demo::failure_reason(failed_play(wandura::item_outcome::rate_limited, 2, 1s), 3000, policy) ==
        "budget_exhausted");
  CHECK(demo::failure_reason(failed_play(wandura::item_outcome::unavailable, 1, 1s), 3000, policy) ==
        "budget_exhausted");
  // Every retry used: the last answer's code.
  CHECK(demo::failure_reason(failed_play(wandura::item_outcome::rate_limited, 4, 1s), 3000, policy) == "rate_limited");
  CHECK(demo::failure_reason(failed_play(wandura::item_outcome::unavailable, 4, 1s), 3000, policy) == "unavailable");
  // The next retry (1 s + up to 1 s of jitter) would not have fitted the 15 s deadline.
  CHECK(demo::failure_reason(failed_play(wandura::item_outcome::rate_limited, 2, 1s), 13500, policy) ==
        "deadline_exceeded");
  auto held = failed_play(wandura::item_outcome::rate_limited, 0, 20s);
  held.play.reason = "held_off";
  CHECK(demo::failure_reason(held, 100, policy) == "rate_limited");
}

TEST_CASE("failure reason: a thrown error is counted under its errc name") {
  CHECK(demo::failure_reason(make_error_code(wandura::errc::deadline_exceeded)) == "deadline_exceeded");
  CHECK(demo::failure_reason(make_error_code(wandura::errc::budget_exhausted)) == "budget_exhausted");
  CHECK(demo::failure_reason(asio::error::operation_aborted) == "cancelled");
}
