#include "wandura/resilience/retry_budget.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wandura::retry_budget;

namespace {
auto const t0 = std::chrono::steady_clock::time_point(std::chrono::hours(10));
}

TEST_CASE("retry budget: at least 10 retries a minute even without requests") {
  retry_budget b(t0);
  for (int i = 0; i < 10; ++i) {
    CHECK(b.try_retry(t0 + std::chrono::milliseconds(i)));
  }
  CHECK_FALSE(b.try_retry(t0 + 20ms));
  auto const s = b.snapshot(t0 + 20ms);
  CHECK(s.retries == 10);
  CHECK(s.left == 0);
}

TEST_CASE("retry budget: the percentage is exact, not rounded: 10 % of 15 requests lets a second retry go") {
  retry_budget b(t0, {.min_retries = 0, .percent = 10, .window = 60s});
  for (int i = 0; i < 15; ++i) {
    b.note_request(t0 + 1s);
  }
  CHECK(b.try_retry(t0 + 2s));       // 0 < 1.5
  CHECK(b.try_retry(t0 + 2s));       // 1 < 1.5
  CHECK_FALSE(b.try_retry(t0 + 2s)); // 2 >= 1.5
  CHECK(b.snapshot(t0 + 2s).retries == 2);
}

TEST_CASE("retry budget: 10 percent of the window's requests once that is above 10") {
  retry_budget b(t0);
  for (int i = 0; i < 250; ++i) {
    b.note_request(t0 + 1s);
  }
  int allowed = 0;
  for (int i = 0; i < 40; ++i) {
    allowed += b.try_retry(t0 + 2s) ? 1 : 0;
  }
  CHECK(allowed == 25);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s);
  b.note_request(t0 + 3s); // 260 requests: 26 allowed
  CHECK(b.try_retry(t0 + 3s));
  CHECK_FALSE(b.try_retry(t0 + 3s));
}

TEST_CASE("retry budget: the window resets only when MORE than 60 s have passed since it started") {
  retry_budget b(t0);
  for (int i = 0; i < 10; ++i) {
    REQUIRE(b.try_retry(t0 + 1s));
  }
  CHECK_FALSE(b.try_retry(t0 + 60s)); // exactly 60 s: same window
  CHECK(b.try_retry(t0 + 60s + 1ms)); // new window starting now
  auto const s = b.snapshot(t0 + 60s + 2ms);
  CHECK(s.retries == 1);
  CHECK(s.window_age == 1ms);
  // The new window started at 60.001 s, so it lasts until 120.001 s.
  for (int i = 0; i < 9; ++i) {
    REQUIRE(b.try_retry(t0 + 120s + 1ms));
  }
  CHECK_FALSE(b.try_retry(t0 + 120s + 1ms));
  CHECK(b.try_retry(t0 + 120s + 2ms));
}

TEST_CASE("retry budget: snapshot reads an expired window as empty without changing it") {
  retry_budget b(t0);
  b.note_request(t0);
  REQUIRE(b.try_retry(t0));
  CHECK(b.snapshot(t0 + 10s).requests == 1);
  CHECK(b.snapshot(t0 + 10s).left == 9);
  CHECK(b.snapshot(t0 + 61s).requests == 0);
  CHECK(b.snapshot(t0 + 61s).left == 10);
  CHECK(b.snapshot(t0 + 10s).retries == 1); // nothing was reset by looking
}

TEST_CASE("retry budget: custom parameters and times before the start") {
  retry_budget b(t0, {.min_retries = 1, .percent = 50, .window = 1s});
  CHECK(b.try_retry(t0 - 5s)); // before the start counts as the start
  CHECK_FALSE(b.try_retry(t0));
  b.note_request(t0);
  b.note_request(t0);
  b.note_request(t0);
  b.note_request(t0); // 50 % of 4 = 2
  CHECK(b.try_retry(t0));
  CHECK_FALSE(b.try_retry(t0));
}

TEST_CASE("retry budget: two threads never get more retries than the rule allows") {
  // Fixed time, so the whole run is one window: the total allowed must be exactly max(10, 10 % of requests), and
  // at no moment may a thread observe more retries than the requests noted so far allow.
  retry_budget b(t0);
  constexpr int requests_per_thread = 5000;
  std::atomic<int> allowed{0};
  std::atomic<bool> go{false};
  auto worker = [&] {
    while (!go.load()) {
    }
    for (int i = 0; i < requests_per_thread; ++i) {
      b.note_request(t0 + 1s);
      if (i % 3 == 0 && b.try_retry(t0 + 1s)) {
        allowed.fetch_add(1);
      }
    }
  };
  std::thread a(worker);
  std::thread c(worker);
  go = true;
  a.join();
  c.join();
  // Every allowed retry was checked against counts of the same window: the total is bounded by the final rule,
  // and since retries were asked for far more often than allowed, the budget is used exactly up to the rule.
  int const total_requests = 2 * requests_per_thread;
  int const rule = std::max(10, total_requests / 10);
  CHECK(allowed.load() <= rule);
  CHECK(allowed.load() >= rule - 2 * 3); // the last few requests may come after the last retry attempts
  CHECK(b.snapshot(t0 + 1s).retries == allowed.load());
  CHECK(b.snapshot(t0 + 1s).requests == total_requests);
}

TEST_CASE("retry budget: two threads racing over window resets never exceed the rule of any window") {
  // Time advances 1 ms per 20 operations from a shared counter and windows are 100 ms, so both threads race over
  // about 20 window resets; TSan checks the atomics, the bound checks that resets never hand out extra retries.
  retry_budget b(t0, {.min_retries = 10, .percent = 10, .window = 100ms});
  std::atomic<std::int64_t> ticks{0};
  std::atomic<int> allowed{0};
  auto worker = [&] {
    for (int i = 0; i < 20000; ++i) {
      auto const now = t0 + std::chrono::milliseconds(ticks.fetch_add(1) / 20);
      if (i % 2 == 0) {
        b.note_request(now);
      } else if (b.try_retry(now)) {
        allowed.fetch_add(1);
      }
    }
  };
  std::thread a(worker);
  std::thread c(worker);
  a.join();
  c.join();
  // 40000 ticks / 20 = 2000 ms of time and windows longer than 100 ms: at most 20 windows. Window w allows
  // max(10, r_w / 10) <= 10 + r_w / 10 retries, so all of them together at most 10 * 20 + 20000 / 10.
  int const windows = 2000 / 100;
  int const total_requests = 20000;
  CHECK(allowed.load() <= 10 * windows + total_requests / 10);
  CHECK(allowed.load() > 0);
}

TEST_CASE("retry budget: a window of 0 ms (or less) lasts 1 ms, the documented least") {
  for (auto const asked : {0ms, -5ms}) {
    INFO("window " << asked.count() << " ms");
    retry_budget b(t0, {.min_retries = 1, .percent = 0, .window = asked});
    CHECK(b.settings().window == 1ms);
    REQUIRE(b.try_retry(t0));
    CHECK_FALSE(b.try_retry(t0 + 1ms)); // exactly one window later: the same window still
    CHECK(b.try_retry(t0 + 2ms));       // more than 1 ms: a new window
  }
}

TEST_CASE("retry budget: min_retries 0 leaves only the percentage, percent 0 only the floor, both 0 no retry") {
  SECTION("min_retries 0: no retry before a request, then percent % of the requests, rounded up") {
    retry_budget b(t0, {.min_retries = 0, .percent = 10});
    CHECK_FALSE(b.try_retry(t0));
    CHECK(b.snapshot(t0).left == 0);
    for (int i = 0; i < 9; ++i) {
      b.note_request(t0);
    }
    CHECK(b.snapshot(t0).left == 1); // 0.9 allowed: retries < 0.9 lets one through
    CHECK(b.try_retry(t0));
    CHECK_FALSE(b.try_retry(t0));
    for (int i = 0; i < 11; ++i) {
      b.note_request(t0);
    }
    CHECK(b.try_retry(t0)); // 20 requests: 2
    CHECK_FALSE(b.try_retry(t0));
  }
  SECTION("percent 0: the floor whatever the requests") {
    retry_budget b(t0, {.min_retries = 3, .percent = 0});
    for (int i = 0; i < 1000; ++i) {
      b.note_request(t0);
    }
    for (int i = 0; i < 3; ++i) {
      REQUIRE(b.try_retry(t0));
    }
    CHECK_FALSE(b.try_retry(t0));
    CHECK(b.snapshot(t0).left == 0);
  }
  SECTION("both 0: never a retry") {
    retry_budget b(t0, {.min_retries = 0, .percent = 0});
    for (int i = 0; i < 1000; ++i) {
      b.note_request(t0);
    }
    CHECK_FALSE(b.try_retry(t0));
    CHECK(b.snapshot(t0).left == 0);
    CHECK(b.snapshot(t0).retries == 0);
  }
}

TEST_CASE("retry budget: retries saturate at 2^24 - 1 per window, even when the rule allows more") {
  // A floor far above the saturation point: only the saturation can stop the retries.
  retry_budget b(t0, {.min_retries = std::int64_t{1} << 30, .percent = 0});
  constexpr std::int64_t saturation = (std::int64_t{1} << 24) - 1;
  std::int64_t allowed = 0;
  for (std::int64_t i = 0; i < saturation + 10; ++i) {
    allowed += b.try_retry(t0) ? 1 : 0;
  }
  CHECK(allowed == saturation);
  CHECK(b.snapshot(t0).retries == saturation);
  CHECK(b.try_retry(t0 + 60s + 1ms)); // a new window starts from zero again
  CHECK(b.snapshot(t0 + 60s + 1ms).retries == 1);
}

TEST_CASE("retry budget: min_retries and percent are taken within [0, 2^30] and [0, 2^20]") {
  SECTION("negative values are 0") {
    retry_budget b(t0, {.min_retries = -5, .percent = -3});
    for (int i = 0; i < 100; ++i) {
      b.note_request(t0);
    }
    CHECK(b.snapshot(t0).left == 0);
    CHECK_FALSE(b.try_retry(t0));
  }
  SECTION("a percent above 2^20 is 2^20: one request allows 2^20 / 100 retries, rounded up") {
    for (std::int64_t const percent : {std::int64_t{1} << 20, std::int64_t{1} << 40}) {
      CAPTURE(percent);
      retry_budget b(t0, {.min_retries = 0, .percent = percent});
      b.note_request(t0);
      CHECK(b.snapshot(t0).left == 10486); // 10,485.76
    }
  }
  SECTION("a min_retries above 2^30 is 2^30 (retries still saturate at 2^24 - 1 first)") {
    retry_budget b(t0, {.min_retries = std::int64_t{1} << 40, .percent = 0});
    CHECK(b.snapshot(t0).left == std::int64_t{1} << 30);
  }
}

TEST_CASE("retry budget: refusals over 256 windows and more never revive an old window's counts") {
  // Counts carry 8 bits of the window's generation: every roll writes zero counts of the new window into the words
  // of older ones, so that no word is a full cycle behind when the generation comes round again.
  retry_budget b(t0, {.min_retries = 0, .percent = 10, .window = 1s});
  for (int i = 0; i < 100; ++i) {
    b.note_request(t0);
  }
  for (int w = 1; w <= 600; ++w) {
    auto const at = t0 + w * 1001ms;
    INFO("window " << w);
    REQUIRE_FALSE(b.try_retry(at)); // no request in this window: 10 % of 0, and no floor
    REQUIRE(b.snapshot(at).requests == 0);
  }
}

TEST_CASE("retry budget: requests counted by more threads than it has stripes are all counted once and every "
          "stripe is cleared by later windows") {
  // Each thread counts into one of `retry_budget::stripes` words; threads beyond them share words. The rule reads
  // their sum, and a window's roll clears the words of threads that counted in the last one and are gone.
  retry_budget b(t0);
  constexpr int threads = static_cast<int>(retry_budget::stripes) + 4;
  constexpr int requests_per_thread = 1000;
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      while (!go.load()) {
      }
      for (int i = 0; i < requests_per_thread; ++i) {
        b.note_request(t0 + 1s);
      }
    });
  }
  go = true;
  for (auto& w : workers) {
    w.join();
  }
  int const total = threads * requests_per_thread;
  CHECK(b.snapshot(t0 + 1s).requests == total);
  int allowed = 0;
  while (allowed <= total && b.try_retry(t0 + 2s)) {
    ++allowed;
  }
  CHECK(allowed == total / 10);
  // The next window: none of those requests (their threads are gone), the floor of 10 only.
  auto const next = t0 + 62s;
  CHECK(b.snapshot(next).requests == 0);
  int later = 0;
  while (later <= total && b.try_retry(next)) {
    ++later;
  }
  CHECK(later == 10);
  CHECK(b.snapshot(next).requests == 0);
  CHECK(b.snapshot(next).retries == 10);
  b.note_request(next);
  CHECK(b.snapshot(next).requests == 1);
}

TEST_CASE("retry budget: the words of threads that are gone are cleared by every roll and never read again as a "
          "later window's") {
  // Threads that counted once and left keep their words; 600 windows later (more than the 256 generations the
  // words carry), a retry must still find none of their requests.
  retry_budget b(t0, {.min_retries = 0, .percent = 100, .window = 1s});
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < retry_budget::stripes; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        b.note_request(t0);
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  REQUIRE(b.snapshot(t0).requests == 50 * static_cast<std::int64_t>(retry_budget::stripes));
  for (int w = 1; w <= 600; ++w) {
    auto const at = t0 + w * 1001ms;
    INFO("window " << w);
    REQUIRE_FALSE(b.try_retry(at)); // no request in this window: 100 % of 0, and no floor
    REQUIRE(b.snapshot(at).requests == 0);
  }
}
