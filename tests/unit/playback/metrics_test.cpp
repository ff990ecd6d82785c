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

TEST_CASE("metrics: the Prometheus exposition has HELP, TYPE and labelled outcomes") {
  playback_metrics m;
  m.add_call();
  m.add_outcome(item_outcome::not_ready);
  auto const text = m.to_prometheus();
  CHECK(contains_line(text, "# HELP wandura_calls_total Logical calls started."));
  CHECK(contains_line(text, "# TYPE wandura_calls_total counter"));
  CHECK(contains_line(text, "wandura_calls_total 1"));
  CHECK(contains_line(text, "wandura_retries_total 0"));
  CHECK(contains_line(text, "wandura_hook_errors_total 0"));
  CHECK(contains_line(text, "wandura_store_errors_total 0"));
  CHECK(contains_line(text, "# TYPE wandura_item_outcomes_total counter"));
  CHECK(contains_line(text, "wandura_item_outcomes_total{outcome=\"not_ready\"} 1"));
  CHECK(contains_line(text, "wandura_item_outcomes_total{outcome=\"granted\"} 0"));
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
  CHECK(samples == 10 + 9); // ten counters, nine item outcomes
}

TEST_CASE("metrics: counts past a billion are written in every digit") {
  wandura::metrics_snapshot s;
  s.calls = 1'000'000'007;
  s.outcomes[static_cast<std::size_t>(item_outcome::granted)] = 18'446'744'073'709'551'615u; // 2^64 - 1
  auto const text = wandura::to_prometheus(s);
  CHECK(contains_line(text, "wandura_calls_total 1000000007"));
  CHECK(contains_line(text, "wandura_item_outcomes_total{outcome=\"granted\"} 18446744073709551615"));
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
        m.add_outcome(i % 2 == 0 ? item_outcome::granted : item_outcome::shed);
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  auto s = m.snapshot();
  CHECK(s.calls == 40000);
  CHECK(s.outcome(item_outcome::granted) + s.outcome(item_outcome::shed) == 40000);
}

TEST_CASE("metrics: call durations are not measured twice: only the telemetry's per-call histogram has them") {
  playback_metrics m;
  m.add_call();
  CHECK(m.to_prometheus().find("duration") == std::string::npos);
}
