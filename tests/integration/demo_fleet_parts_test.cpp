// The parts of the fleet demo that need no process or server: the routing of viewer actions to processes
// (fleet_route.hpp), a worker's report read back by its parent (worker_report.hpp), the totals of the
// processes' runs (run_totals.hpp) and the level of a relayed log line (log_line.hpp).
#include "fleet_route.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "log_line.hpp"
#include "run_totals.hpp"
#include "worker_report.hpp"

namespace {

demo::client_run sample_run(std::uint64_t scale) {
  demo::client_run r;
  auto& s = r.sim.totals;
  s.viewers = 10 * scale;
  s.play_requests = 20 * scale;
  s.play_failures = scale;
  s.play_success_rate = static_cast<double>(19) / 20;
  s.tickets_granted = 50 * scale;
  s.tickets_fresh = 40 * scale;
  s.tickets_reused = 10 * scale;
  s.cache_hits = 7 * scale;
  s.coalesced = scale;
  s.prefetch_requested = 30 * scale;
  s.prefetch_shed = 5 * scale;
  s.retries = 3 * scale;
  s.budget_denied = scale;
  s.requests = 25 * scale;
  s.play_items_sent = 22 * scale;
  s.play_429 = 2 * scale;
  s.duration_s = 12.5 + static_cast<double>(scale);
  s.failures_by_reason = {{"deadline_exceeded", scale}};
  r.sim.failures_by_reason = s.failures_by_reason;
  r.sim.outcomes_by_kind = {{"play granted", 19 * scale}, {"play exception", scale}};
  r.sim.starts = 20 * scale;
  r.sim.failures.push_back({42, "secret \"returns\"\n", 3, "unavailable (status 503 service_unavailable)"});
  for (std::uint64_t i = 0; i < 20 * scale; ++i) {
    r.sim.play_latencies_ms.push_back(static_cast<double>(i + 1) * static_cast<double>(scale));
    r.sim.play_done_s.push_back(0.5 + static_cast<double>(i % 3));
  }
  r.sim.samples.push_back({1.0004, 10, 20, 1.5, 2.5, 8, 4, 1, 0.5});
  r.sim.samples.push_back({2.0011, 11, 21, 1.25, 3.5, 9, 5, 0, 0.25});
  r.calls = 20 * scale;
  r.held_off = scale;
  r.warn_lines = 3 * scale;
  r.cross_process_reuse = 4 * scale;
  r.shared_state_fallbacks = 6 * scale;
  return r;
}

} // namespace

TEST_CASE("fleet route: every process gets actions and a viewer's steps land on several processes") {
  std::vector<std::uint64_t> per_process(4, 0);
  std::uint32_t viewers_on_several = 0;
  for (std::uint32_t viewer = 0; viewer < 1000; ++viewer) {
    std::set<std::uint32_t> seen;
    for (std::size_t step = 0; step < 3; ++step) {
      auto const p = demo::process_of_action(20261130, viewer, step, 4);
      REQUIRE(p < 4);
      REQUIRE(p == demo::process_of_action(20261130, viewer, step, 4)); // the same in every process
      ++per_process[p];
      seen.insert(p);
    }
    viewers_on_several += seen.size() > 1 ? 1U : 0U;
  }
  for (auto const n : per_process) {
    CHECK(n > 650); // 750 each on average
    CHECK(n < 850);
  }
  CHECK(viewers_on_several > 800); // 1 - (1/4)^2 = 94 % expected
  CHECK(demo::process_of_action(1, 5, 0, 1) == 0);
}

TEST_CASE("fleet route: another seed routes differently") {
  int differ = 0;
  for (std::uint32_t viewer = 0; viewer < 100; ++viewer) {
    differ += demo::process_of_action(1, viewer, 0, 4) != demo::process_of_action(2, viewer, 0, 4) ? 1 : 0;
  }
  CHECK(differ > 50);
}

TEST_CASE("worker report: every field reads back as written") {
  auto const run = sample_run(3);
  auto const back = demo::read_worker_report(demo::worker_report_json(run));
  auto const& a = run.sim.totals;
  auto const& b = back.sim.totals;
  CHECK(b.viewers == a.viewers);
  CHECK(b.play_requests == a.play_requests);
  CHECK(b.play_failures == a.play_failures);
  CHECK(b.play_success_rate == a.play_success_rate);
  CHECK(b.tickets_granted == a.tickets_granted);
  CHECK(b.tickets_fresh == a.tickets_fresh);
  CHECK(b.tickets_reused == a.tickets_reused);
  CHECK(b.cache_hits == a.cache_hits);
  CHECK(b.coalesced == a.coalesced);
  CHECK(b.prefetch_requested == a.prefetch_requested);
  CHECK(b.prefetch_shed == a.prefetch_shed);
  CHECK(b.retries == a.retries);
  CHECK(b.budget_denied == a.budget_denied);
  CHECK(b.requests == a.requests);
  CHECK(b.play_items_sent == a.play_items_sent);
  CHECK(b.play_429 == a.play_429);
  CHECK(b.duration_s == a.duration_s);
  CHECK(b.failures_by_reason == a.failures_by_reason);
  CHECK(back.sim.outcomes_by_kind == run.sim.outcomes_by_kind);
  CHECK(back.sim.starts == run.sim.starts);
  CHECK(back.sim.play_latencies_ms == run.sim.play_latencies_ms);
  CHECK(back.sim.play_done_s == run.sim.play_done_s);
  REQUIRE(back.sim.failures.size() == 1);
  CHECK(back.sim.failures[0].film_ref == run.sim.failures[0].film_ref);
  CHECK(back.sim.failures[0].what == run.sim.failures[0].what);
  CHECK(back.sim.failures[0].episode_no == 3);
  REQUIRE(back.sim.samples.size() == 2);
  CHECK(back.sim.samples[1].t_s == run.sim.samples[1].t_s);
  CHECK(back.sim.samples[1].prefetch_429_per_s == run.sim.samples[1].prefetch_429_per_s);
  CHECK(back.calls == run.calls);
  CHECK(back.held_off == run.held_off);
  CHECK(back.warn_lines == run.warn_lines);
  CHECK(back.cross_process_reuse == run.cross_process_reuse);
  CHECK(back.shared_state_fallbacks == run.shared_state_fallbacks);
}

TEST_CASE("worker report: a cut or foreign line is refused with the field it lacks") {
  auto const json = demo::worker_report_json(sample_run(1));
  CHECK_THROWS_WITH(demo::read_worker_report(json.substr(0, json.size() / 2)),
                    Catch::Matchers::StartsWith("worker report: not JSON"));
  CHECK_THROWS_WITH(demo::read_worker_report("{\"viewers\": 3}"), Catch::Matchers::Contains("no \"play_requests\""));
  CHECK_THROWS_AS(demo::read_worker_report("[]"), std::runtime_error);
}

TEST_CASE("run totals: counts add up, rates and percentiles are computed over every play") {
  std::vector<demo::client_run> runs{sample_run(1), sample_run(2)};
  auto const total = demo::combine_runs(runs, 25);
  auto const& t = total.sim.totals;
  CHECK(t.viewers == 25);
  CHECK(t.play_requests == 60);
  CHECK(t.play_failures == 3);
  CHECK(t.play_success_rate == Approx(57.0 / 60));
  CHECK(t.tickets_fresh == 120);
  CHECK(t.play_items_sent == 66);
  CHECK(t.play_429 == 6);
  CHECK(t.failures_by_reason.at("deadline_exceeded") == 3);
  CHECK(total.sim.outcomes_by_kind.at("play granted") == 57);
  CHECK(total.calls == 60);
  CHECK(total.cross_process_reuse == 12);
  CHECK(total.shared_state_fallbacks == 18);
  CHECK(t.duration_s == 14.5);
  // Latencies 1..20 and 2, 4, ..., 80: 60 plays, the median by nearest rank is the 30th smallest.
  std::vector<double> all;
  for (auto const& r : runs) {
    all.insert(all.end(), r.sim.play_latencies_ms.begin(), r.sim.play_latencies_ms.end());
  }
  std::sort(all.begin(), all.end());
  CHECK(t.p50_ms == all[29]);
  CHECK(t.max_ms == 80);
  // Samples: summed per second of the run.
  REQUIRE(total.sim.samples.size() == 2);
  CHECK(total.sim.samples[0].t_s == 1);
  CHECK(total.sim.samples[0].tickets_per_s == 20);
  CHECK(total.sim.samples[1].play_sent_per_s == 18);
  CHECK(total.sim.samples[0].play_p95_ms > 0);
}

TEST_CASE("run totals: one run comes back as it is") {
  auto const one = sample_run(2);
  auto const total = demo::combine_runs({one}, 99);
  CHECK(total.sim.totals.viewers == one.sim.totals.viewers);
  CHECK(total.sim.samples.size() == one.sim.samples.size());
  CHECK(total.sim.samples[0].t_s == one.sim.samples[0].t_s);
}

TEST_CASE("fleet demo log lines: each relayed line keeps its own level") {
  using wandura::log_level;
  // The fleet's fallback log writes the level as the first word; the parent prints it once, as the line's level.
  auto const back = demo::split_level("INFO fleet ticket_cache: redis 127.0.0.1:6379 is back after 42 local answers",
                                      log_level::warn);
  CHECK(back.level == log_level::info);
  CHECK(back.text == "fleet ticket_cache: redis 127.0.0.1:6379 is back after 42 local answers");
  auto const down =
      demo::split_level("WARN fleet counter_pace playback: redis 127.0.0.1:6379 unavailable", log_level::info);
  CHECK(down.level == log_level::warn);
  CHECK(down.text == "fleet counter_pace playback: redis 127.0.0.1:6379 unavailable");
  // A line without a level (the retry loop's) keeps the level it came with, whole.
  auto const retry = demo::split_level("retry 1/3 in 1042 ms: HTTP 503", log_level::warn);
  CHECK(retry.level == log_level::warn);
  CHECK(retry.text == "retry 1/3 in 1042 ms: HTTP 503");
  CHECK(demo::split_level("INFORMATION only", log_level::error).level == log_level::error);
  CHECK(demo::split_level("INFO", log_level::warn).text == "INFO");
  // What a worker sends (`log LEVEL text`) reads back to the same level and text, for every level.
  for (auto const level : {log_level::debug, log_level::info, log_level::warn, log_level::error}) {
    std::string const sent = std::string(demo::level_name(level)) + " fleet x: y";
    auto const read = demo::split_level(sent, log_level::warn);
    CHECK(read.level == level);
    CHECK(read.text == "fleet x: y");
    CHECK(demo::level_from_name(demo::level_name(level)) == level);
  }
  CHECK_FALSE(demo::level_from_name("warn").has_value());
}
