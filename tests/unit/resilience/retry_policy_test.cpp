#include "wandura/resilience/retry_policy.hpp"

#include <cmath>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

using namespace std::chrono_literals;
using wandura::backoff_kind;
using wandura::compute_backoff;
using wandura::delay_source;
using wandura::retry_policy;

TEST_CASE("retry policy: presets carry the values of SPEC section 3") {
  auto const i = retry_policy::interactive();
  CHECK(i.max_retries == 3);
  CHECK(i.initial_delay == 500ms);
  CHECK(i.max_delay == 8s);
  CHECK(i.attempt_timeout == 8s);
  CHECK(i.total_timeout == 15s);
  CHECK(i.backoff == backoff_kind::full_jitter);

  auto const b = retry_policy::background();
  CHECK(b.max_retries == 5);
  CHECK(b.initial_delay == 1s);
  CHECK(b.max_delay == 30s);
  CHECK(b.attempt_timeout == 15s);
  CHECK(b.total_timeout == 120s);

  auto const s = retry_policy::standard();
  CHECK(s.max_retries == 2);
  CHECK(s.initial_delay == 200ms);
  CHECK(s.multiplier == 2.0);
  CHECK(s.max_delay == 4s);
  CHECK(s.jitter == 0.3);
  CHECK(s.respect_retry_after);
  CHECK(s.max_retry_after == 30s);
  CHECK(s.total_timeout == 300s);
  CHECK(s.backoff == backoff_kind::exponential);
  CHECK(s.classifier == wandura::retry_classifier::standard);

  auto const n = retry_policy::none();
  CHECK(n.max_retries == 0);
  CHECK(n.total_timeout == i.total_timeout);
}

TEST_CASE("backoff: full jitter draws under min(cap, base * 2^(retry-1))") {
  auto const p = retry_policy::interactive();
  CHECK(compute_backoff(p, 1, std::nullopt, 0.5).delay.count() == Approx(250.0));
  CHECK(compute_backoff(p, 2, std::nullopt, 0.5).delay.count() == Approx(500.0));
  CHECK(compute_backoff(p, 5, std::nullopt, 0.5).delay.count() == Approx(4000.0)); // 500*16 = 8000 = cap
  CHECK(compute_backoff(p, 6, std::nullopt, 0.5).delay.count() == Approx(4000.0)); // capped
  CHECK(compute_backoff(p, 1, std::nullopt, 0.0).delay.count() == 0.0);
  CHECK(compute_backoff(p, 1, std::nullopt, 0.5).source == delay_source::backoff);
}

TEST_CASE("backoff: seed 000 Retry-After plus up to 1 s of jitter wins when above zero") {
  auto const p = retry_policy::interactive();
  auto const d = compute_backoff(p, 1, 2000ms, 0.25);
  CHECK(d.delay.count() == Approx(2250.0));
  CHECK(d.source == delay_source::retry_after);
  // Retry-After: 0 is a statement, but in seed 000's formula it falls back to full jitter.
  auto const zero = compute_backoff(p, 1, 0ms, 0.5);
  CHECK(zero.delay.count() == Approx(250.0));
  CHECK(zero.source == delay_source::backoff);
}

TEST_CASE("backoff: seed 004 grows by the multiplier with proportional jitter and respects capped Retry-After") {
  auto const p = retry_policy::standard();
  CHECK(compute_backoff(p, 1, std::nullopt, 0.5).delay.count() == Approx(200.0));
  CHECK(compute_backoff(p, 2, std::nullopt, 0.5).delay.count() == Approx(400.0));
  CHECK(compute_backoff(p, 1, std::nullopt, 0.0).delay.count() == Approx(140.0)); // x0.7
  CHECK(compute_backoff(p, 10, std::nullopt, 0.5).delay.count() == Approx(4000.0));
  auto const ra = compute_backoff(p, 1, 5000ms, 0.5);
  CHECK(ra.delay.count() == Approx(5000.0));
  CHECK(ra.source == delay_source::retry_after);
  CHECK(compute_backoff(p, 1, 60000ms, 0.5).delay.count() == Approx(30000.0)); // capped at maxRetryAfterMs
  auto const small = compute_backoff(p, 1, 100ms, 0.5);
  CHECK(small.delay.count() == Approx(200.0));
  CHECK(small.source == delay_source::backoff);
}

TEST_CASE("backoff: ignoring Retry-After when the policy says so") {
  auto p = retry_policy::standard();
  p.respect_retry_after = false;
  CHECK(compute_backoff(p, 1, 5000ms, 0.5).delay.count() == Approx(200.0));
}

TEST_CASE("backoff: absurd inputs stay finite and bounded") {
  auto p = retry_policy::standard();
  auto const huge_retry = compute_backoff(p, 1'000'000, std::nullopt, 0.999);
  CHECK(huge_retry.delay.count() <= 4000.0 * 1.3 + 1e-6);
  auto f = retry_policy::interactive();
  CHECK(compute_backoff(f, 5000, std::nullopt, 0.5).delay.count() == Approx(4000.0));
  CHECK(compute_backoff(f, 1, std::nullopt, -3.0).delay.count() == 0.0);         // u clamped
  CHECK(compute_backoff(f, 1, std::nullopt, 7.0).delay.count() < 500.0);         // u clamped below 1
  CHECK(compute_backoff(f, 1, std::nullopt, std::nan("")).delay.count() == 0.0); // NaN treated as 0
  CHECK(compute_backoff(f, 1, std::chrono::hours(24 * 365), 0.0).delay.count() == Approx(24.0 * 3600 * 1000));
}

TEST_CASE("backoff: an initial delay of 0 waits 0 at every retry, however many, under both kinds") {
  for (auto kind : {backoff_kind::full_jitter, backoff_kind::exponential}) {
    auto p = kind == backoff_kind::full_jitter ? retry_policy::interactive() : retry_policy::standard();
    p.initial_delay = 0ms;
    for (int retry : {1, 2, 1024, 1025, 5000, 1'000'000}) {
      INFO(static_cast<int>(kind) << " retry " << retry);
      auto const d = compute_backoff(p, retry, std::nullopt, 0.999);
      CHECK(d.delay.count() == 0.0); // 0 * 2^1024 (inf) once read as NaN, which min() turned into max_delay
      CHECK(d.source == delay_source::backoff);
    }
  }
}

TEST_CASE("backoff: a jitter of NaN reads as none, as a negative one does") {
  auto p = retry_policy::standard();
  p.jitter = std::nan("");
  auto const d = compute_backoff(p, 1, std::nullopt, 0.9);
  CHECK(std::isfinite(d.delay.count()));
  CHECK(d.delay.count() == Approx(200.0));
  p.jitter = -0.5;
  CHECK(compute_backoff(p, 1, std::nullopt, 0.9).delay.count() == Approx(200.0));
}

TEST_CASE("retry policy: check_retry_policy takes the presets and refuses each field out of range by name") {
  for (auto const& preset :
       {retry_policy::interactive(), retry_policy::background(), retry_policy::standard(), retry_policy::none()}) {
    CHECK_NOTHROW(wandura::check_retry_policy(preset));
  }
  struct bad_value {
    char const* field;
    void (*spoil)(retry_policy&);
  };
  bad_value const cases[] = {
      {"max_retries", [](retry_policy& p) { p.max_retries = -1; }},
      {"backoff", [](retry_policy& p) { p.backoff = static_cast<backoff_kind>(7); }},
      {"classifier", [](retry_policy& p) { p.classifier = static_cast<wandura::retry_classifier>(-1); }},
      {"initial_delay", [](retry_policy& p) { p.initial_delay = -1ms; }},
      {"max_delay", [](retry_policy& p) { p.max_delay = -1ms; }},
      {"max_retry_after", [](retry_policy& p) { p.max_retry_after = -1ms; }},
      {"multiplier", [](retry_policy& p) { p.multiplier = 0.5; }},
      {"multiplier", [](retry_policy& p) { p.multiplier = std::nan(""); }},
      {"multiplier", [](retry_policy& p) { p.multiplier = INFINITY; }},
      {"jitter", [](retry_policy& p) { p.jitter = 1.0; }},
      {"jitter", [](retry_policy& p) { p.jitter = -0.1; }},
      {"jitter", [](retry_policy& p) { p.jitter = std::nan(""); }},
  };
  for (auto const& c : cases) {
    INFO(c.field);
    auto p = retry_policy::standard();
    c.spoil(p);
    try {
      wandura::check_retry_policy(p);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(c.field));
    }
  }
  // The edges of each range, and the time limits' documented meanings for 0 and less, are accepted.
  auto edge = retry_policy::standard();
  edge.max_retries = 0;
  edge.initial_delay = 0ms;
  edge.max_delay = 0ms;
  edge.max_retry_after = 0ms;
  edge.multiplier = 1.0;
  edge.jitter = 0.0;
  edge.attempt_timeout = -5ms;
  edge.total_timeout = 0ms;
  CHECK_NOTHROW(wandura::check_retry_policy(edge));
  edge.jitter = std::nextafter(1.0, 0.0);
  CHECK_NOTHROW(wandura::check_retry_policy(edge));
}
