#include "wandura/playback/metrics.hpp"

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "playback/metrics_recorder.hpp"

using namespace std::chrono;
using wandura::item_outcome;
using wandura::detail::playback_metrics;

namespace {

bool contains_line(std::string const& text, std::string const& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("metrics: counters and outcomes are counted") {
  playback_metrics m;
  m.add_call();
  m.add_call();
  m.add_cache_hit();
  m.add_coalesced();
  m.add_call_failure();
  m.add_outcome(item_outcome::granted);
  m.add_outcome(item_outcome::granted);
  m.add_outcome(item_outcome::shed);
  m.add_outcome(static_cast<item_outcome>(99));
  auto s = m.snapshot();
  CHECK(s.calls == 2);
  CHECK(s.held_off == 0); // the admission gate's count, added by client::stats
  CHECK(s.cache_hits == 1);
  CHECK(s.coalesced == 1);
  CHECK(s.call_failures == 1);
  CHECK(s.outcome(item_outcome::granted) == 2);
  CHECK(s.outcome(item_outcome::shed) == 1);
  CHECK(s.outcome(item_outcome::failed) == 0);
}

TEST_CASE("metrics: latencies land in the first power-of-two millisecond bucket that holds them") {
  playback_metrics m;
  m.observe_latency(microseconds(500));  // <= 1 ms
  m.observe_latency(milliseconds(1));    // <= 1 ms
  m.observe_latency(microseconds(1001)); // <= 2 ms
  m.observe_latency(milliseconds(3));    // <= 4 ms
  m.observe_latency(milliseconds(1024)); // <= 1.024 s
  m.observe_latency(seconds(40));        // +Inf
  m.observe_latency(nanoseconds(-5));    // counted as 0
  auto s = m.snapshot();
  CHECK(s.latency_buckets[0] == 3);
  CHECK(s.latency_buckets[1] == 1);
  CHECK(s.latency_buckets[2] == 1);
  CHECK(s.latency_buckets[10] == 1);
  CHECK(s.latency_buckets[wandura::latency_bucket_count] == 1);
  CHECK(s.latency_count == 7);
  CHECK(s.latency_sum == microseconds(500 + 1000 + 1001 + 3000 + 1'024'000 + 40'000'000));
}

TEST_CASE("metrics: the Prometheus exposition has HELP, TYPE, labelled outcomes and a cumulative histogram") {
  playback_metrics m;
  m.add_call();
  m.add_outcome(item_outcome::not_ready);
  m.observe_latency(microseconds(1500));
  m.observe_latency(milliseconds(300));
  auto const text = m.to_prometheus();
  CHECK(contains_line(text, "# HELP wandura_calls_total Logical calls started."));
  CHECK(contains_line(text, "# TYPE wandura_calls_total counter"));
  CHECK(contains_line(text, "wandura_calls_total 1"));
  CHECK(contains_line(text, "wandura_retries_total 0"));
  CHECK(contains_line(text, "wandura_hook_errors_total 0"));
  CHECK(contains_line(text, "# TYPE wandura_item_outcomes_total counter"));
  CHECK(contains_line(text, "wandura_item_outcomes_total{outcome=\"not_ready\"} 1"));
  CHECK(contains_line(text, "wandura_item_outcomes_total{outcome=\"granted\"} 0"));
  CHECK(contains_line(text, "# TYPE wandura_request_duration_seconds histogram"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"0.001\"} 0"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"0.002\"} 1"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"0.256\"} 1"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"0.512\"} 2"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"32.768\"} 2"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_bucket{le=\"+Inf\"} 2"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_sum 0.3015"));
  CHECK(contains_line(text, "wandura_request_duration_seconds_count 2"));
  CHECK(text.back() == '\n');

  // Every sample line is "name[{labels}] value" and each metric's TYPE precedes its samples.
  std::istringstream in(text);
  std::string declared;
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      declared = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      continue;
    }
    INFO(line);
    REQUIRE_FALSE(declared.empty());
    CHECK(line.rfind(declared, 0) == 0);
    auto const space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    CHECK(line.find_first_not_of("0123456789.", space + 1) == std::string::npos);
    ++samples;
  }
  CHECK(samples == 9 + 9 + 17 + 2);
}

TEST_CASE("metrics: a custom prefix names every metric") {
  playback_metrics m;
  auto const text = m.to_prometheus("svc_wandura");
  CHECK(contains_line(text, "svc_wandura_calls_total 0"));
  CHECK(text.find("\nwandura_") == std::string::npos);
}

TEST_CASE("metrics: concurrent updates are all counted") {
  playback_metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        m.add_call();
        m.observe_latency(milliseconds(i % 50));
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  auto s = m.snapshot();
  CHECK(s.calls == 40000);
  CHECK(s.latency_count == 40000);
  std::uint64_t in_buckets = 0;
  for (auto b : s.latency_buckets) {
    in_buckets += b;
  }
  CHECK(in_buckets == 40000);
}
