#include "wandura/resilience/admission_gate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "resilience/admission_gate_metrics.hpp"
#include "wandura/error.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using wandura::admission;
using wandura::admission_verdict;
using wandura::counter_feedback;
using wandura::request_class;

namespace {

/// A 429 that refused `units` for rate, with the rate-limit headers of SPEC §1.
counter_feedback refused(std::uint32_t limit_per_min, std::chrono::milliseconds retry_after, std::uint32_t units = 1) {
  counter_feedback f;
  f.status = 429;
  f.refused = units;
  f.retry_after = retry_after;
  f.limit = limit_per_min;
  f.window = 60s;
  return f;
}

counter_feedback granted(std::uint32_t units) {
  counter_feedback f;
  f.status = 200;
  f.granted = units;
  return f;
}

/// A gate on a manual clock, requests spawned as coroutines on one io_context, completions recorded in order.
/// Members in this order: the gate goes first, then the clock (whose pending sleeps are aborted onto a live
/// io_context), then the io_context.
struct gate_harness {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::admission_gate gate;

  struct done {
    int id = 0;
    admission result;
    wandura::clock::time_point at;
  };
  std::vector<done> completed;

  explicit gate_harness(wandura::admission_gate_options options = {}) : gate(clock, std::move(options)) {}

  wandura::clock::time_point now() const { return clock->now(); }

  void spawn(int id, request_class cls, std::uint32_t cost, wandura::clock::time_point deadline,
             asio::cancellation_signal* cancel = nullptr,
             std::optional<wandura::clock::time_point> first_asked = std::nullopt) {
    auto record = [this, id](std::exception_ptr e, admission a) {
      REQUIRE_FALSE(e);
      completed.push_back({id, a, clock->now()});
    };
    auto op = gate.admit("playback", cls, cost, deadline, first_asked);
    if (cancel != nullptr) {
      asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(cancel->slot(), record));
    } else {
      asio::co_spawn(io, std::move(op), record);
    }
  }
  void spawn(int id, request_class cls = request_class::play) { spawn(id, cls, 1, now() + 60s); }

  void settle() {
    io.restart();
    io.poll();
  }
  void advance(wandura::clock::duration d) {
    clock->advance(d);
    settle();
  }
  /// Advances in `step`s for `total`, settling after each.
  void run_for(wandura::clock::duration total, wandura::clock::duration step = 10ms) {
    for (auto t = wandura::clock::duration::zero(); t < total; t += step) {
      advance(step);
    }
  }
  /// As `run_for`, reporting each request released as granted (one unit), as a client's responses would.
  void run_granting_for(wandura::clock::duration total, wandura::clock::duration step = 10ms) {
    for (auto t = wandura::clock::duration::zero(); t < total; t += step) {
      auto const before = completed.size();
      advance(step);
      for (auto i = before; i < completed.size(); ++i) {
        gate.observe("playback", granted(1));
      }
    }
  }
  std::vector<int> order() const {
    std::vector<int> ids;
    for (auto const& d : completed) {
      ids.push_back(d.id);
    }
    return ids;
  }
  wandura::admission_counter_stats playback() const {
    for (auto& s : gate.stats()) {
      if (s.counter == "playback") {
        return s;
      }
    }
    FAIL("no playback counter");
    return {};
  }
};

} // namespace

TEST_CASE("admission gate: uncongested, every request is admitted at once and nothing waits") {
  gate_harness h;
  for (int i = 0; i < 20; ++i) {
    h.spawn(i, i % 2 == 0 ? request_class::play : request_class::prefetch);
  }
  h.gate.observe("playback", granted(3));
  h.settle();
  REQUIRE(h.completed.size() == 20);
  for (auto const& d : h.completed) {
    CHECK(d.result.verdict == admission_verdict::admitted);
    CHECK(d.result.queued == 0s);
  }
  CHECK_FALSE(h.gate.congested("playback"));
  CHECK(h.clock->pending_sleeps() == 0);
  CHECK(h.playback().released == 0); // counted only while congested
}

TEST_CASE("admission gate: plays are released before prefetches, first come first served within a class") {
  gate_harness h;
  h.gate.observe("playback", refused(60, 1s)); // 1 ticket per second, held for 1 s
  REQUIRE(h.gate.congested("playback"));
  h.spawn(1, request_class::prefetch);
  h.spawn(2, request_class::play);
  h.spawn(3, request_class::prefetch);
  h.spawn(4, request_class::play);
  h.spawn(5, request_class::play);
  h.settle();
  CHECK(h.completed.empty());
  CHECK(h.playback().queued_play == 3);
  CHECK(h.playback().queued_prefetch == 2);
  h.run_for(10s);
  CHECK(h.order() == std::vector<int>{2, 4, 5, 1, 3});
  for (auto const& d : h.completed) {
    CHECK(d.result.verdict == admission_verdict::admitted);
  }
}

TEST_CASE("admission gate: after a 429 with X-RateLimit-Limit, the queue drains at the refill rate") {
  gate_harness h;
  auto const start = h.now();
  h.gate.observe("playback", refused(600, 2s)); // 10 tickets/s; room returns after 2 s
  CHECK(h.playback().pacing_rate == Approx(10.0));
  for (int i = 0; i < 100; ++i) {
    h.spawn(i);
  }
  h.run_for(12s);
  REQUIRE(h.completed.size() == 100);
  auto released_by = [&](wandura::clock::duration since_start) {
    return std::count_if(h.completed.begin(), h.completed.end(),
                         [&](auto const& d) { return d.at <= start + since_start; });
  };
  CHECK(released_by(1990ms) == 0); // nothing before Retry-After
  // Never all at once when the hold ends: at most the 0.5 s burst the server refilled, then 10 per second.
  CHECK(released_by(2010ms) <= 6);
  for (int s = 3; s <= 11; ++s) {
    auto const expected = 10.0 * (s - 2);
    auto const got = static_cast<double>(released_by(std::chrono::seconds(s) + 10ms));
    INFO("after " << s << " s: " << got);
    CHECK(got >= expected - 1);
    CHECK(got <= expected + 6);
  }
  CHECK(h.playback().waited == 100);
  CHECK_FALSE(h.gate.congested("playback")); // queue empty and 10 s without a 429: the fast path again
}

TEST_CASE("admission gate: a request whose deadline passes while queued ends deadline_exceeded, nothing sent") {
  gate_harness h;
  h.gate.observe("playback", refused(60, 2s)); // held 2 s, then one ticket a second
  for (int id = 10; id < 13; ++id) {
    h.spawn(id, request_class::play, 1, h.now() + 30s); // released at 2 s, 3 s and 4 s
  }
  h.spawn(1, request_class::play, 1, h.now() + 4200ms); // its turn would come at 5 s
  h.spawn(2, request_class::play, 1, h.now() + 30s);
  h.settle();
  h.run_for(4500ms);
  REQUIRE(h.completed.size() == 4);
  auto const d = std::find_if(h.completed.begin(), h.completed.end(), [](auto const& c) { return c.id == 1; });
  REQUIRE(d != h.completed.end());
  CHECK(d->result.verdict == admission_verdict::deadline_exceeded);
  CHECK(d->result.queued == 4200ms); // woken at its deadline exactly, not at the next release
  CHECK(wandura::describe(d->result, "playback") == "queued behind the playback counter's limit for 4200 ms");
  CHECK(h.playback().queued_play == 1);
  CHECK(h.playback().deadline_exceeded == 1);
}

TEST_CASE("admission gate: a 429 hold-off known to outlast a request's deadline refuses it at once") {
  gate_harness h;
  h.gate.observe("playback", refused(60, 10s));
  h.spawn(1, request_class::play, 1, h.now() + 4200ms); // could not be sent before 10 s
  h.spawn(2, request_class::play, 1, h.now() + 30s);
  h.settle();
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].id == 1);
  CHECK(h.completed[0].result.verdict == admission_verdict::deadline_exceeded);
  CHECK(h.completed[0].result.queued == 0s);
  CHECK(h.gate.held_until("playback") == h.now() + 10s);
  CHECK(h.playback().queued_play == 1);
}

TEST_CASE("admission gate: one hold-off per counter, and a hold-off only ever moves later") {
  gate_harness h;
  auto const t = h.now();
  CHECK(h.gate.held_until("playback") == wandura::clock::time_point::min());
  h.gate.observe("playback", refused(60, 2s));
  CHECK(h.gate.held_until("playback") == t + 2s);
  CHECK(h.gate.held_until("catalog") == wandura::clock::time_point::min());
  h.gate.observe("playback", refused(60, 1s)); // an earlier 429 answer arriving late does not shorten the wait
  CHECK(h.gate.held_until("playback") == t + 2s);
  h.gate.observe("playback", refused(60, 5s));
  CHECK(h.gate.held_until("playback") == t + 5s);
}

TEST_CASE("admission gate: a request past its deadline is refused at once while congested") {
  gate_harness h;
  h.gate.observe("playback", refused(60, 5s));
  h.spawn(1, request_class::play, 1, h.now());
  h.settle();
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].result.verdict == admission_verdict::deadline_exceeded);
  CHECK(h.completed[0].result.queued == 0s);
}

TEST_CASE("admission gate: cancellation while queued leaves the queue at once and keeps the order of the rest") {
  gate_harness h;
  h.gate.observe("playback", refused(60, 2s));
  asio::cancellation_signal cancel;
  h.spawn(1);
  h.spawn(2, request_class::play, 1, h.now() + 60s, &cancel);
  h.spawn(3);
  h.settle();
  h.advance(300ms);
  cancel.emit(asio::cancellation_type::terminal);
  h.settle(); // no time passes
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].id == 2);
  CHECK(h.completed[0].result.verdict == admission_verdict::cancelled);
  CHECK(h.completed[0].result.queued == 300ms);
  CHECK(h.playback().queued_play == 2);
  CHECK(h.playback().cancelled == 1);
  h.run_for(6s);
  CHECK(h.order() == std::vector<int>{2, 1, 3});
}

TEST_CASE("admission gate: destroying the gate completes queued requests with cancelled") {
  asio::io_context io;
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  std::vector<admission_verdict> verdicts;
  {
    wandura::admission_gate gate(clock);
    gate.observe("playback", refused(60, 5s));
    for (int i = 0; i < 3; ++i) {
      asio::co_spawn(io, gate.admit("playback", request_class::play, 1, clock->now() + 60s),
                     [&](std::exception_ptr, admission a) { verdicts.push_back(a.verdict); });
    }
    io.poll();
    CHECK(verdicts.empty());
  }
  io.restart();
  io.poll();
  CHECK(verdicts == std::vector<admission_verdict>(3, admission_verdict::cancelled));
}

TEST_CASE("admission gate: a 429 while pacing cuts the rate, and grants grow it back up to the refill") {
  gate_harness h;
  auto const start = h.now();
  h.gate.observe("playback", refused(600, 1s)); // 10/s
  CHECK(h.playback().pacing_rate == Approx(10.0));
  h.advance(1500ms);
  h.gate.observe("playback", refused(600, 1s)); // while pacing: the server knows better
  CHECK(h.playback().pacing_rate == Approx(7.0));
  CHECK(h.playback().decreases == 1);
  h.gate.observe("playback", refused(600, 1s)); // the same round: not cut twice
  CHECK(h.playback().pacing_rate == Approx(7.0));

  // Released at the new rate: 7 per second once the hold is over.
  for (int i = 0; i < 60; ++i) {
    h.spawn(i);
  }
  h.run_for(6s);
  auto const after_hold = start + 2500ms;
  auto const in_5s = std::count_if(h.completed.begin(), h.completed.end(), [&](auto const& d) {
    return d.at > after_hold + 500ms && d.at <= after_hold + 4500ms;
  });
  CHECK(in_5s >= 27);
  CHECK(in_5s <= 29);

  // Grants move it back: a second of grants adds 5 % of the refill; never above the refill.
  for (int i = 0; i < 7; ++i) {
    h.gate.observe("playback", granted(1));
  }
  CHECK(h.playback().pacing_rate == Approx(7.5).margin(0.05));
  for (int i = 0; i < 200; ++i) {
    h.gate.observe("playback", granted(1));
  }
  CHECK(h.playback().pacing_rate == Approx(10.0));
}

TEST_CASE("admission gate: prefetches are shed without sending while the counter is under its reserve") {
  gate_harness h;
  h.gate.observe("playback", refused(600, 2s));
  h.spawn(1, request_class::prefetch);
  h.spawn(2, request_class::play);
  h.settle();
  CHECK(h.completed.empty());
  CHECK_FALSE(h.gate.under_reserve("playback"));

  counter_feedback shed;
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 2;
  shed.retry_after = 3s; // back above the reserve in 3 s
  h.gate.observe("playback", shed);
  h.settle();
  CHECK(h.gate.under_reserve("playback"));
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].id == 1);
  CHECK(h.completed[0].result.verdict == admission_verdict::shed);

  h.spawn(3, request_class::prefetch);
  h.settle();
  REQUIRE(h.completed.size() == 2);
  CHECK(h.completed[1].result.verdict == admission_verdict::shed); // at once, not queued
  CHECK(wandura::describe(h.completed[1].result, "playback") ==
        "prefetch shed: the playback counter is under its reserve");

  h.run_for(2500ms); // plays still go
  REQUIRE(h.completed.size() == 3);
  CHECK(h.completed[2].id == 2);
  CHECK(h.completed[2].result.verdict == admission_verdict::admitted);

  h.run_for(1s); // the reserve is back: prefetches queue and go again
  CHECK_FALSE(h.gate.under_reserve("playback"));
  h.spawn(4, request_class::prefetch);
  h.run_for(2s);
  REQUIRE(h.completed.size() == 4);
  CHECK(h.completed[3].result.verdict == admission_verdict::admitted);
  CHECK(h.playback().shed == 2);
}

TEST_CASE("admission gate: after sheds alone plays are not paced, the first refusal paces them at the refill") {
  gate_harness h;
  h.gate.set_limit("playback", {600, 60s, wandura::refill_kind::continuous}); // 10/s
  counter_feedback shed;
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 1;
  shed.retry_after = 3s; // under the reserve for 3 s: prefetches are shed, plays still granted by the server
  h.gate.observe("playback", shed);
  REQUIRE(h.gate.congested("playback"));
  for (int i = 0; i < 100; ++i) {
    h.spawn(i);
  }
  h.settle();
  CHECK(h.completed.size() == 100); // at once: the server grants them from room the gate cannot see

  counter_feedback refused_play;
  refused_play.status = 200;
  refused_play.refused = 1; // a play refused for rate: the counter is out of room now
  h.gate.observe("playback", refused_play);
  for (int i = 100; i < 120; ++i) {
    h.spawn(i);
  }
  h.settle();
  CHECK(h.completed.size() == 100);
  h.run_for(1050ms);
  CHECK(h.completed.size() >= 109); // then at the refill rate
  CHECK(h.completed.size() <= 111);
}

TEST_CASE("admission gate: a fixed-window counter releases its allowance at the window's start") {
  gate_harness h;
  counter_feedback f = refused(5, 20s); // `config`: 5 requests per UTC minute; 20 s of the window left
  std::vector<admission> results;
  h.gate.observe("config", f);
  for (int i = 0; i < 8; ++i) {
    asio::co_spawn(h.io, h.gate.admit("config", request_class::play, 1, h.now() + 200s),
                   [&](std::exception_ptr, admission a) { results.push_back(a); });
  }
  h.run_for(19900ms, 100ms);
  CHECK(results.empty());
  h.run_for(200ms, 100ms);
  CHECK(results.size() == 5); // the window's five, together
  h.run_for(59s, 100ms);
  CHECK(results.size() == 5);
  h.run_for(2s, 100ms);
  CHECK(results.size() == 8);
}

TEST_CASE("admission gate: the limit from GET /v1/config sets the pacing rate before any header") {
  gate_harness h;
  h.gate.set_limit("playback", {1200, 60s, wandura::refill_kind::continuous});
  counter_feedback bare;
  bare.status = 429;
  bare.refused = 3;
  bare.retry_after = 1s;
  h.gate.observe("playback", bare);
  CHECK(h.playback().limit == 1200);
  CHECK(h.playback().pacing_rate == Approx(20.0));
}

TEST_CASE("admission gate: long waits are reported to the hook, with the queue left behind") {
  std::vector<wandura::admission_wait_event> events;
  wandura::admission_gate_options options;
  options.long_wait = 1500ms;
  options.on_long_wait = [&](wandura::admission_wait_event const& e) { events.push_back(e); };
  gate_harness h(options);
  h.gate.observe("playback", refused(60, 1s)); // one per second
  for (int i = 0; i < 3; ++i) {
    h.spawn(i);
  }
  h.run_for(5s);
  REQUIRE(h.completed.size() == 3);
  REQUIRE(events.size() == 2); // released after ~1 s (no), ~2 s, ~3 s
  CHECK(events[0].counter == "playback");
  CHECK(events[0].queued >= 1500ms);
  CHECK(events[0].queue_length == 1);
  CHECK(events[1].queue_length == 0);
}

TEST_CASE("admission gate: metrics text has queue length, wait histogram and released per second per counter") {
  gate_harness h;
  h.gate.observe("playback", refused(600, 1s));
  for (int i = 0; i < 40; ++i) {
    h.spawn(i);
  }
  h.run_for(3500ms); // 5 at once when the hold ends at 1 s, then 10 a second
  auto const s = h.playback();
  auto const text = h.gate.metrics_text();
  INFO(text);
  CHECK(s.released_last_second >= 9);
  CHECK(s.released_last_second <= 11);
  CHECK(text.find("wandura_gate_queue_length{counter=\"playback\",class=\"play\"} " + std::to_string(s.queued_play) +
                  "\n") != std::string::npos);
  CHECK(s.queued_play > 0);
  CHECK(text.find("wandura_gate_released_per_second{counter=\"playback\"} " + std::to_string(s.released_last_second) +
                  "\n") != std::string::npos);
  CHECK(text.find("wandura_gate_wait_seconds_count{counter=\"playback\"} " + std::to_string(s.wait_count) + "\n") !=
        std::string::npos);
  CHECK(text.find("wandura_gate_wait_seconds_bucket{counter=\"playback\",le=\"+Inf\"} ") != std::string::npos);
  CHECK(text.find("wandura_gate_congested{counter=\"catalog\"} 0\n") != std::string::npos);
  CHECK(s.wait_buckets.back() == s.wait_count); // every wait was under 30 s
}

TEST_CASE("admission gate: a counter reads uncongested once its calm period has passed, without a request to calm it") {
  // The calm was applied by the next request only: an idle counter read congested, held and under its reserve for
  // ever, in `congested`, `held_until`, `under_reserve`, `stats` and the metrics' gauge alike.
  gate_harness h;        // calm period 10 s
  counter_feedback shed; // a shed prefetch: under the reserve for 2 s, and a pressure
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 1;
  shed.retry_after = 2s;
  h.gate.observe("playback", refused(600, 2s));
  h.gate.observe("playback", shed);
  CHECK(h.gate.congested("playback"));
  CHECK(h.gate.held_until("playback") == h.now() + 2s);
  CHECK(h.gate.under_reserve("playback"));
  h.run_for(9900ms); // 9.9 s after the last pressure: still congested, the hold-off and the reserve over
  CHECK(h.gate.congested("playback"));
  CHECK(h.gate.held_until("playback") < h.now());
  CHECK_FALSE(h.gate.under_reserve("playback"));
  CHECK(h.playback().congested);
  CHECK(h.gate.metrics_text().find("wandura_gate_congested{counter=\"playback\"} 1\n") != std::string::npos);
  h.run_for(100ms); // the calm period is over; nothing was asked of the gate meanwhile
  SECTION("read by congested") {
    CHECK_FALSE(h.gate.congested("playback"));
  }
  SECTION("read by held_until") {
    CHECK(h.gate.held_until("playback") == wandura::clock::time_point::min());
  }
  SECTION("read by stats") {
    auto const s = h.playback();
    CHECK_FALSE(s.congested);
    CHECK(s.pacing_rate == 0);
  }
  SECTION("read by the metrics") {
    auto const text = h.gate.metrics_text();
    INFO(text);
    CHECK(text.find("wandura_gate_congested{counter=\"playback\"} 0\n") != std::string::npos);
  }
  // Whichever read came first, every reader agrees now, and a request goes at once.
  CHECK_FALSE(h.gate.congested("playback"));
  CHECK(h.gate.held_until("playback") == wandura::clock::time_point::min());
  CHECK_FALSE(h.playback().congested);
  h.spawn(1);
  h.advance(0ms);
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].result.verdict == admission_verdict::admitted);
  CHECK(h.completed[0].at == h.now());
}

TEST_CASE("admission gate: metrics text reads back as the statistics, the pacing rate and wait sum to the last digit") {
  gate_harness h;
  h.gate.observe("playback", refused(4000, 1s)); // 66.666... a second after the hold
  for (int i = 0; i < 30; ++i) {
    h.spawn(i);
  }
  h.run_for(1500ms, 7ms);
  auto const s = h.playback();
  auto const text = h.gate.metrics_text();
  INFO(text);
  auto const value_of = [&text](std::string const& series) {
    auto const at = text.find("\n" + series + " ");
    REQUIRE(at != std::string::npos);
    return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
  };
  REQUIRE(s.pacing_rate == 4000.0 / 60);
  REQUIRE(s.wait_count > 0);
  CHECK(value_of(R"(wandura_gate_pacing_rate{counter="playback"})") == s.pacing_rate);
  CHECK(value_of(R"(wandura_gate_wait_seconds_sum{counter="playback"})") == s.wait_sum_s);
}

TEST_CASE("admission gate: metrics text writes counts past a billion in every digit and a 17-digit sum exactly") {
  wandura::admission_counter_stats s;
  s.counter = "playback";
  s.congested = true;
  s.pacing_rate = 0.1 + 0.2;
  s.released = 1'000'000'007;
  s.wait_buckets.fill(999'999'999);
  s.wait_buckets.back() = 1'000'000'007;
  s.wait_count = 1'000'000'007;
  s.wait_sum_s = 1097448.8000000003;
  auto const text = wandura::detail::admission_gate_metrics_text({s});
  INFO(text);
  auto const has = [&text](std::string const& line) { return text.find("\n" + line + "\n") != std::string::npos; };
  CHECK(has(R"(wandura_gate_pacing_rate{counter="playback"} 0.30000000000000004)"));
  CHECK(has(R"(wandura_gate_outcomes_total{counter="playback",outcome="admitted"} 1000000007)"));
  CHECK(has(R"(wandura_gate_wait_seconds_bucket{counter="playback",le="10"} 999999999)"));
  CHECK(has(R"(wandura_gate_wait_seconds_bucket{counter="playback",le="30"} 1000000007)"));
  CHECK(has(R"(wandura_gate_wait_seconds_bucket{counter="playback",le="+Inf"} 1000000007)"));
  CHECK(has(R"(wandura_gate_wait_seconds_sum{counter="playback"} 1097448.8000000003)"));
  CHECK(has(R"(wandura_gate_wait_seconds_count{counter="playback"} 1000000007)"));
}

TEST_CASE("admission gate: the rate-limit headers are read when well formed, ignored otherwise") {
  counter_feedback f;
  wandura::read_rate_limit_headers(" 4000 ", "60", f);
  CHECK(f.limit == 4000u);
  CHECK(f.window == 60s);
  for (std::string_view junk : {"", "-1", "0", "1e3", "12abc", "4294967296", "+5"}) {
    counter_feedback g;
    wandura::read_rate_limit_headers(junk, junk, g);
    INFO("'" << junk << "'");
    CHECK_FALSE(g.limit);
    CHECK_FALSE(g.window);
  }
  counter_feedback absent;
  wandura::read_rate_limit_headers(std::nullopt, "86401", absent);
  CHECK_FALSE(absent.limit);
  CHECK_FALSE(absent.window);
}

TEST_CASE("admission gate: try_admit decides at once what admit would decide at once, and nothing that must queue") {
  gate_harness h;
  auto const ex = h.io.get_executor();
  auto const later = h.now() + 60s;
  auto calm = h.gate.try_admit("playback", request_class::play, 3, later, ex);
  REQUIRE(calm.has_value());
  CHECK(calm->verdict == admission_verdict::admitted);

  h.gate.observe("playback", refused(600, 2s)); // held for 2 s: nothing goes before
  CHECK_FALSE(h.gate.try_admit("playback", request_class::play, 1, later, ex).has_value());
  auto too_late = h.gate.try_admit("playback", request_class::play, 1, h.now() + 1s, ex);
  REQUIRE(too_late.has_value()); // the known hold outlasts the deadline
  CHECK(too_late->verdict == admission_verdict::deadline_exceeded);

  counter_feedback shed;
  shed.status = 200;
  shed.shed = 2;
  shed.retry_after = 5s;
  h.gate.observe("playback", shed);
  auto prefetch = h.gate.try_admit("playback", request_class::prefetch, 1, later, ex);
  REQUIRE(prefetch.has_value());
  CHECK(prefetch->verdict == admission_verdict::shed);

  h.spawn(1); // queued behind the hold: try_admit never jumps it
  h.settle();
  CHECK_FALSE(h.gate.try_admit("playback", request_class::play, 1, later, ex).has_value());
  h.run_for(2500ms); // the hold ends, the queued play goes; room is left at the refill
  CHECK(h.completed.size() == 1);
  auto room = h.gate.try_admit("playback", request_class::play, 1, later, ex);
  REQUIRE(room.has_value());
  CHECK(room->verdict == admission_verdict::admitted);
  CHECK(h.playback().released == 2); // the queued play, and the one try_admit let through while pacing
}

TEST_CASE("admission gate: a congestion begun before the limit was known paces at the limit once it is known") {
  gate_harness h;
  counter_feedback shed;
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 1;
  shed.retry_after = 20s; // no rate-limit headers: congested at a guessed rate, plays not paced yet
  h.gate.observe("playback", shed);
  REQUIRE(h.gate.congested("playback"));
  counter_feedback refused_no_hold;
  refused_no_hold.status = 429;
  refused_no_hold.refused = 1;
  refused_no_hold.limit = 600; // 10 a second
  refused_no_hold.window = 60s;
  h.gate.observe("playback", refused_no_hold);
  for (int i = 0; i < 40; ++i) {
    h.spawn(i);
  }
  h.run_for(2s);
  // At the refill (10/s) about 20 go in 2 s; at the guess (unknown_limit_rate, 1/s) only 2 would.
  CHECK(h.completed.size() >= 18);
  CHECK(h.completed.size() <= 26);
  CHECK(h.playback().pacing_rate >= 9.0);
  CHECK(h.playback().pacing_rate <= 10.0 + 1e-9);
}

TEST_CASE("admission gate: the rate-limit headers' extreme valid values are kept: limit 1 and 2^32 - 1, window 1 and "
          "86400 s") {
  counter_feedback least;
  wandura::read_rate_limit_headers("1", "1", least);
  CHECK(least.limit == 1u);
  CHECK(least.window == 1s);
  counter_feedback most;
  wandura::read_rate_limit_headers("4294967295", "86400", most);
  CHECK(most.limit == 4294967295u);
  CHECK(most.window == 86400s);
  counter_feedback past; // one past each end: left empty
  wandura::read_rate_limit_headers("4294967296", "86401", past);
  CHECK_FALSE(past.limit);
  CHECK_FALSE(past.window);
}

TEST_CASE("admission gate: at most max_counters counters are tracked, requests to a further name are never queued") {
  gate_harness h;
  // The docs/protocol.md counters are tracked from the start; fill the rest of the table with names of our own.
  std::vector<std::string> names;
  for (std::size_t i = h.gate.stats().size(); i < wandura::admission_gate::max_counters; ++i) {
    names.push_back("counter-" + std::to_string(i));
  }
  for (auto const& name : names) {
    h.gate.observe(name, refused(60, 5s));
    REQUIRE(h.gate.congested(name));
  }
  REQUIRE(h.gate.stats().size() == wandura::admission_gate::max_counters);

  std::string const extra = "one-too-many";
  h.gate.observe(extra, refused(60, 5s)); // a 429 on it: still not tracked
  h.gate.set_limit(extra, {.limit = 60});
  CHECK(h.gate.stats().size() == wandura::admission_gate::max_counters);
  CHECK_FALSE(h.gate.congested(extra));
  CHECK(h.gate.held_until(extra) == wandura::clock::time_point::min());
  auto const at_once = h.gate.try_admit(extra, request_class::play, 1, h.now() + 1s, h.io.get_executor());
  REQUIRE(at_once);
  CHECK(at_once->verdict == admission_verdict::admitted);
  std::optional<admission> awaited;
  asio::co_spawn(h.io, h.gate.admit(extra, request_class::prefetch, 1, h.now() + 1s),
                 [&](std::exception_ptr e, admission a) {
                   REQUIRE_FALSE(e);
                   awaited = a;
                 });
  h.settle();
  REQUIRE(awaited);
  CHECK(awaited->verdict == admission_verdict::admitted);
  CHECK(awaited->queued == 0s);
  // The last tracked counter still queues: the table is full, not broken.
  CHECK_FALSE(h.gate.try_admit(names.back(), request_class::play, 1, h.now() + 30s, h.io.get_executor()));
}

TEST_CASE("admission gate: a wait of exactly long_wait is reported, a shorter one is not") {
  std::vector<wandura::admission_wait_event> events;
  wandura::admission_gate_options options;
  options.long_wait = 1000ms;
  options.on_long_wait = [&](wandura::admission_wait_event const& e) { events.push_back(e); };
  gate_harness h(options);
  h.gate.observe("playback", refused(60, 1s)); // held 1 s, then one a second
  h.spawn(1);
  h.settle();
  h.advance(999ms);
  CHECK(h.completed.empty());
  h.advance(1ms); // the hold ends: released after exactly 1000 ms queued
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0].result.queued == 1000ms);
  REQUIRE(events.size() == 1);
  CHECK(events[0].queued == 1000ms);

  h.advance(500ms); // next room at 2 s: one queued from now on waits 500 ms, under the threshold
  h.spawn(2);
  h.run_for(1s);
  REQUIRE(h.completed.size() == 2);
  CHECK(h.completed[1].result.queued < 1000ms);
  CHECK(events.size() == 1);
}

TEST_CASE("admission gate: a long_wait of 0 reports every queued request, none admitted at once") {
  std::vector<wandura::admission_wait_event> events;
  wandura::admission_gate_options options;
  options.long_wait = 0ms;
  options.on_long_wait = [&](wandura::admission_wait_event const& e) { events.push_back(e); };
  gate_harness h(options);
  h.gate.observe("playback", granted(1)); // uncongested: admitted at once, not a wait
  h.spawn(1);
  h.settle();
  REQUIRE(h.completed.size() == 1);
  CHECK(events.empty());
  h.gate.observe("playback", refused(60, 1s));
  h.spawn(2);
  h.spawn(3);
  h.run_for(3s);
  REQUIRE(h.completed.size() == 3);
  CHECK(events.size() == 2);
}

TEST_CASE("admission gate: when the last queued request leaves or the gate goes, its release timer goes too") {
  // A release timer that outlived every waiter slept until the hold-off ended (up to max_holdoff), keeping the
  // io_context's run() from returning after a client was destroyed or shut down. Nobody waiting: no timer.
  bool const destroy_gate = GENERATE(false, true);
  CAPTURE(destroy_gate);
  asio::io_context io;
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  auto gate = std::make_unique<wandura::admission_gate>(clock);
  gate->observe("playback", refused(60, 3600s));
  asio::cancellation_signal cancel;
  std::vector<admission_verdict> verdicts;
  auto op = gate->admit("playback", request_class::play, 1, clock->now() + 7200s);
  asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, admission a) {
                   REQUIRE_FALSE(e);
                   verdicts.push_back(a.verdict);
                 }));
  io.poll();
  REQUIRE(clock->pending_sleeps() == 1); // the timer that releases it after the hour's hold-off
  if (destroy_gate) {
    gate.reset();
  } else {
    cancel.emit(asio::cancellation_type::terminal);
  }
  io.restart();
  io.poll();
  CHECK(verdicts == std::vector<admission_verdict>{admission_verdict::cancelled});
  CHECK(clock->pending_sleeps() == 0);
  io.restart();
  CHECK(io.run_for(std::chrono::seconds(1)) == 0); // nothing left to run: run() would return
  CHECK(io.stopped());
  CHECK(clock->elapsed() == 0ms);

  // A gate that outlives its waiters still releases the next one after the hold-off (a new timer).
  if (!destroy_gate) {
    verdicts.clear();
    auto next = gate->admit("playback", request_class::play, 1, clock->now() + 7200s);
    asio::co_spawn(io, std::move(next), [&](std::exception_ptr, admission a) { verdicts.push_back(a.verdict); });
    io.restart();
    io.poll();
    CHECK(verdicts.empty());
    CHECK(clock->pending_sleeps() == 1);
    clock->advance(3600s);
    io.restart();
    io.poll();
    CHECK(verdicts == std::vector<admission_verdict>{admission_verdict::admitted});
  }
}

TEST_CASE("admission gate: once every request from a context has left, the timers run on a context with one queued") {
  // The timers ran on the executor of the latest request to queue and stayed there: after a request from a second
  // io_context queued, then left and that context stopped running, the requests still queued from the first were
  // released only when the second ran again, their deadlines not kept either (a trial: a play held 20 s past a
  // hold-off of 3 s, its deadline 15 s).
  asio::io_context mine;
  asio::io_context other; // its request leaves, then it never runs again
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::admission_gate gate(clock);
  gate.observe("playback", refused(60, 3s)); // held 3 s, then a ticket a second
  std::vector<std::pair<char, admission_verdict>> verdicts;
  auto spawn = [&](asio::io_context& io, char who, wandura::clock::time_point deadline,
                   asio::cancellation_signal* cancel) {
    auto record = [&verdicts, who](std::exception_ptr e, admission a) {
      REQUIRE_FALSE(e);
      verdicts.emplace_back(who, a.verdict);
    };
    auto op = gate.admit("playback", request_class::play, 1, deadline);
    if (cancel != nullptr) {
      asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(cancel->slot(), record));
    } else {
      asio::co_spawn(io, std::move(op), record);
    }
  };
  auto poll = [](asio::io_context& io) {
    io.restart();
    io.poll();
  };
  asio::cancellation_signal cancel_a;
  spawn(other, 'A', clock->now() + 60s, &cancel_a);
  poll(other);
  spawn(mine, 'B', clock->now() + 15s, nullptr);
  poll(mine);
  spawn(mine, 'C', clock->now() + 3500ms, nullptr); // the release after B's comes past its deadline
  poll(mine);
  REQUIRE(verdicts.empty());
  cancel_a.emit(asio::cancellation_type::terminal); // on `other`'s thread, which runs it once more to complete A
  poll(other);
  REQUIRE(verdicts == std::vector<std::pair<char, admission_verdict>>{{'A', admission_verdict::cancelled}});
  // From here on only `mine` runs.
  for (int i = 0; i < 60 && verdicts.size() < 3; ++i) {
    clock->advance(100ms);
    poll(mine);
  }
  CHECK(verdicts == std::vector<std::pair<char, admission_verdict>>{{'A', admission_verdict::cancelled},
                                                                    {'B', admission_verdict::admitted},
                                                                    {'C', admission_verdict::deadline_exceeded}});
  CHECK(clock->elapsed() <= 3600ms);
}

namespace {

/// The gate's constructor's verdict on `options`: the message of the `invalid_argument` it threw, or "" if none.
std::string refusal_of(wandura::admission_gate_options const& options) {
  try {
    wandura::admission_gate gate(std::make_shared<wandura::testing::manual_clock>(), options);
    return {};
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    return e.what();
  }
}

} // namespace

TEST_CASE("admission gate: options outside their range are refused by name, NaN and infinities included") {
  using opts = wandura::admission_gate_options;
  double const nan = std::nan("");
  double const inf = HUGE_VAL;
  struct bad {
    void (*set)(opts&, double);
    double value;
    std::string_view field;
  };
  auto const decrease = [](opts& o, double v) { o.decrease = v; };
  auto const increase = [](opts& o, double v) { o.increase = v; };
  auto const floor = [](opts& o, double v) { o.min_rate_fraction = v; };
  auto const unknown = [](opts& o, double v) { o.unknown_limit_rate = v; };
  std::vector<bad> const cases{{decrease, 0.0, "decrease"},           {decrease, 1.0, "decrease"},
                               {decrease, 1.5, "decrease"},           {decrease, -0.5, "decrease"},
                               {decrease, nan, "decrease"},           {increase, -0.01, "increase"},
                               {increase, inf, "increase"},           {increase, nan, "increase"},
                               {floor, -0.1, "min_rate_fraction"},    {floor, 1.01, "min_rate_fraction"},
                               {floor, nan, "min_rate_fraction"},     {unknown, 0.0, "unknown_limit_rate"},
                               {unknown, -1.0, "unknown_limit_rate"}, {unknown, inf, "unknown_limit_rate"},
                               {unknown, nan, "unknown_limit_rate"}};
  for (auto const& c : cases) {
    opts o;
    c.set(o, c.value);
    INFO(c.field << " = " << c.value);
    CHECK_THAT(refusal_of(o), Catch::Contains(std::string(c.field)));
  }
  using ms = std::chrono::milliseconds;
  std::vector<std::pair<ms opts::*, std::string_view>> const durations{
      {&opts::calm_period, "calm_period"},
      {&opts::burst, "burst"},
      {&opts::long_wait, "long_wait"},
      {&opts::shared_pace_refresh, "shared_pace_refresh"},
      {&opts::shared_pace_timeout, "shared_pace_timeout"},
      {&opts::shared_pace_retry, "shared_pace_retry"}};
  for (auto const& [field, name] : durations) {
    opts o;
    o.*field = -1ms;
    INFO(name);
    CHECK_THAT(refusal_of(o), Catch::Contains(std::string(name)));
    o.*field = 0ms;
    CHECK(refusal_of(o).empty());
  }
  CHECK(refusal_of(opts{}).empty()); // the defaults
}

TEST_CASE("admission gate: a calm period of milliseconds::max() keeps a counter congested, not calm at once") {
  // Compared with the clock's nanoseconds, a calm period over ~292 years overflowed and read as already passed.
  for (auto const calm :
       {std::chrono::milliseconds::max(), std::chrono::milliseconds(std::chrono::hours(24 * 365 * 300))}) {
    wandura::admission_gate_options o;
    o.calm_period = calm;
    gate_harness h(o);
    h.gate.observe("playback", refused(600, 1s));
    h.advance(2s);
    CHECK(h.gate.congested("playback"));
    CHECK(h.playback().congested);
    h.advance(std::chrono::hours(24 * 365));
    CHECK(h.gate.congested("playback"));
  }
}

TEST_CASE("admission gate: the ranges' edges are taken and pace as documented") {
  SECTION("decrease just under 1 and a floor of the whole refill: a 429 while pacing leaves the rate at the refill") {
    wandura::admission_gate_options o;
    o.decrease = std::nextafter(1.0, 0.0);
    o.min_rate_fraction = 1.0;
    gate_harness h(o);
    h.gate.observe("playback", refused(600, 1s)); // 10 units/s
    h.advance(2s);
    h.gate.observe("playback", refused(600, 1s)); // pacing now: cut, down to the floor at most
    CHECK(h.playback().pacing_rate == Approx(10.0));
  }
  SECTION("a tiny decrease, no floor and no increase: the rate falls with each cut and grants do not raise it") {
    wandura::admission_gate_options o;
    o.decrease = 0.001;
    o.min_rate_fraction = 0.0;
    o.increase = 0.0;
    gate_harness h(o);
    h.gate.observe("playback", refused(600, 1s));
    h.advance(2s);
    h.gate.observe("playback", refused(600, 1s));
    auto const cut = h.playback().pacing_rate;
    CHECK(cut == Approx(0.01));
    h.gate.observe("playback", granted(50));
    CHECK(h.playback().pacing_rate == Approx(cut));
  }
  SECTION("a small unknown_limit_rate paces a counter whose limit is unknown at that rate") {
    wandura::admission_gate_options o;
    o.unknown_limit_rate = 0.5;
    gate_harness h(o);
    counter_feedback f;
    f.status = 429;
    f.refused = 1;
    h.gate.observe("playback", f); // no limit, no Retry-After
    CHECK(h.playback().pacing_rate == Approx(0.5));
  }
}

TEST_CASE("admission gate: only counter names are tracked, 1-64 characters of [A-Za-z0-9._:-]") {
  gate_harness h;
  std::string const longest(64, 'c');
  std::vector<std::string> const refused_names{
      "",    std::string(65, 'c'),   "a b",        "a\"b", "a\\b", "a\nb", "a\rb", "a{b}",
      "a=b", std::string("a\0b", 3), "caf\xc3\xa9"};
  for (auto const& name : refused_names) {
    h.gate.observe(name, refused(60, 30s));
    h.gate.set_limit(name, {60, 60s, wandura::refill_kind::continuous});
    CHECK_FALSE(h.gate.congested(name));
  }
  h.gate.observe(longest, refused(60, 30s));
  h.gate.observe("video.v2:read-x_1", refused(60, 30s));
  CHECK(h.gate.congested(longest));
  CHECK(h.gate.congested("video.v2:read-x_1"));
  auto const stats = h.gate.stats();
  REQUIRE(stats.size() == 8); // the protocol's six, then the two counter names
  CHECK(stats[6].counter == longest);
  CHECK(stats[7].counter == "video.v2:read-x_1");
  // A request to a name not tracked is admitted at once, whatever was observed on it.
  bool admitted = false;
  asio::co_spawn(h.io, h.gate.admit("a b", request_class::play, 1, h.now() + 1s),
                 [&](std::exception_ptr e, admission a) { admitted = !e && a.admitted(); });
  h.settle();
  CHECK(admitted);
}

TEST_CASE("admission gate: a 429 after the last cut's hold-off cuts again, whatever its own Retry-After") {
  gate_harness h;
  h.gate.observe("playback", refused(600, 200ms)); // 10/s, pacing from here
  h.advance(1500ms);
  h.gate.observe("playback", refused(600, 5s)); // past the 200 ms hold-off: a cut, though 5 s > 1.5 s since
  CHECK(h.playback().decreases == 1);
  CHECK(h.playback().pacing_rate == Approx(7.0));
  h.advance(3s); // within that cut's 5 s hold-off: the same round
  h.gate.observe("playback", refused(600, 5s));
  CHECK(h.playback().decreases == 1);
  h.advance(2500ms); // 5.5 s after the cut, past its hold-off: refused again at the cut rate
  h.gate.observe("playback", refused(600, 5s));
  CHECK(h.playback().decreases == 2);
  CHECK(h.playback().pacing_rate == Approx(4.9));
}

TEST_CASE("admission gate: sheds do not pace plays, so the first 429 after them starts pacing and cuts nothing") {
  gate_harness h;
  counter_feedback shed_item;
  shed_item.status = 200;
  shed_item.shed = 1;
  shed_item.retry_after = 1s;
  shed_item.limit = 600;
  shed_item.window = 60s;
  h.gate.observe("playback", shed_item);
  h.advance(1500ms);
  h.gate.observe("playback", refused(600, 1s));
  CHECK(h.playback().decreases == 0);
  CHECK(h.playback().pacing_rate == Approx(10.0));
  h.advance(1500ms); // now pacing, past the first 429's hold-off
  h.gate.observe("playback", refused(600, 1s));
  CHECK(h.playback().decreases == 1);
  CHECK(h.playback().pacing_rate == Approx(7.0));
}

TEST_CASE("admission gate: with the limit unknown, a run of 429s cuts the pacing rate no lower than its floor") {
  wandura::admission_gate_options options;
  options.unknown_limit_rate = 2.0;
  options.min_rate_fraction = 0.1;
  gate_harness h(options);
  counter_feedback bare; // a 429 from a proxy: a Retry-After, no rate-limit headers
  bare.status = 429;
  bare.refused = 1;
  bare.retry_after = 1s;
  h.gate.observe("playback", bare);
  CHECK(h.playback().pacing_rate == Approx(2.0));
  for (int i = 0; i < 40; ++i) { // 0.7^40 of the rate would be 1e-6 of it
    h.advance(1500ms);
    h.gate.observe("playback", bare);
  }
  CHECK(h.playback().decreases == 40);
  CHECK(h.playback().pacing_rate == Approx(0.2)); // 10 % of the 2/s assumed for the unknown limit
}

TEST_CASE("admission gate: a retry keeps its call's place: it goes before the requests that first asked after it") {
  gate_harness h;
  auto const first_call = h.now();
  h.gate.observe("playback", refused(60, 1s)); // 1 ticket per second, held for 1 s
  h.advance(100ms);
  auto const between = h.now();
  h.advance(100ms);
  h.spawn(1);
  h.spawn(2);
  h.advance(100ms);
  h.spawn(3);
  auto const later = h.now() + 1h; // a time after now counts as now: it never jumps the queue
  h.spawn(4, request_class::play, 1, h.now() + 60s, nullptr, later);
  // Retries of calls that first asked before 1, 2 and 3 queued: the one that asked first goes first; a prefetch
  // that asked earliest still goes after every play.
  h.spawn(5, request_class::prefetch, 1, h.now() + 60s, nullptr, first_call - 1s);
  h.spawn(6, request_class::play, 1, h.now() + 60s, nullptr, between);
  h.spawn(7, request_class::play, 1, h.now() + 60s, nullptr, first_call);
  h.run_for(10s);
  CHECK(h.order() == std::vector<int>{7, 6, 1, 2, 3, 4, 5});
}

TEST_CASE("admission gate: paced at its refill for a calm period without a refusal, a counter with requests queued "
          "probes past the refill until a 429 ends it") {
  gate_harness h;
  h.gate.observe("playback", refused(600, 1s)); // 10/s learnt
  for (int i = 0; i < 2000; ++i) {
    h.spawn(i);
  }
  h.run_granting_for(9s);
  CHECK(h.playback().pacing_rate == Approx(10.0)); // within the calm period: never past the refill
  auto const released_at_9s = h.completed.size();

  SECTION("no refusal: the rate grows past the refill (a limit raised where only a 429 would say so)") {
    h.run_granting_for(15s);
    CHECK(h.playback().pacing_rate > 15.0); // 5 % of the rate per second of grants: 10 * 1.05^14 is 19.8
    CHECK(h.playback().pacing_rate < 25.0);
    CHECK(h.completed.size() - released_at_9s > 15 * 10 + 40); // more than the old refill let through

    // A 429 ends the probe: the rate comes back to the refill, cut, and grows back only up to it.
    h.gate.observe("playback", refused(600, 0s));
    CHECK(h.playback().pacing_rate <= 10.0 + 1e-9);
    h.run_granting_for(5s);
    CHECK(h.playback().pacing_rate <= 10.0 + 1e-9);
  }
  SECTION("sheds say the counter is under its reserve: no probe") {
    for (int s = 0; s < 8; ++s) {
      counter_feedback shed;
      shed.status = 200;
      shed.granted = 1;
      shed.shed = 1;
      shed.retry_after = 1s;
      h.gate.observe("playback", shed);
      h.run_granting_for(2s);
    }
    CHECK(h.playback().pacing_rate == Approx(10.0));
  }
  SECTION("a lower limit from GET /v1/config caps a probe at once") {
    h.run_granting_for(10s);
    REQUIRE(h.playback().pacing_rate > 12.0);
    h.gate.set_limit("playback", {360, 60s}); // 6/s
    CHECK(h.playback().pacing_rate == Approx(6.0));
  }
}

TEST_CASE("admission gate: a 429 without rate-limit headers paces at the guess in slow start, doubling with grants, "
          "until a 429 cuts it") {
  gate_harness h;        // unknown_limit_rate 1/s
  counter_feedback bare; // a 429 through a proxy that drops the rate-limit headers
  bare.status = 429;
  bare.refused = 1;
  h.gate.observe("playback", bare);
  CHECK(h.playback().pacing_rate == Approx(1.0));
  for (int i = 0; i < 400; ++i) {
    h.spawn(i);
  }
  h.run_granting_for(5s);
  // Each granted unit adds one per second: 1, 2, 4, 8, 16 over the first seconds (about 2^5 after five).
  CHECK(h.playback().pacing_rate >= 16.0);
  CHECK(h.completed.size() >= 25);
  auto const at_cut = h.playback().pacing_rate;
  h.gate.observe("playback", bare); // the server's room is found: cut, and slow start ends
  CHECK(h.playback().pacing_rate == Approx(at_cut * 0.7));
  h.run_granting_for(1s);
  // Then 5 % of the rate per second of grants, no longer doubling.
  CHECK(h.playback().pacing_rate <= at_cut * 0.7 * 1.06);
}

TEST_CASE("admission gate: a fixed-window counter never probes past its window's allowance") {
  gate_harness h;
  h.gate.set_limit("playback", {60, 60s, wandura::refill_kind::fixed_window}); // 60 per 60 s window
  h.gate.observe("playback", refused(60, 30s));                                // the rest of the window: 30 s
  for (int i = 0; i < 1000; ++i) {
    h.spawn(i, request_class::play, 1, h.now() + 10h);
  }
  auto const first_window = h.now() + 30s;
  std::map<long, int> released;              // per window, from the first whole one
  for (int step = 0; step < 30000; ++step) { // 300 s: five windows, each past the calm period
    auto const before = h.completed.size();
    h.advance(10ms);
    for (auto i = before; i < h.completed.size(); ++i) {
      REQUIRE(h.completed[i].result.admitted());
      auto const since = h.now() - first_window;
      long const w =
          since < 0s ? -1 : static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(since).count() / 60);
      h.gate.observe("playback", granted(1)); // a server that grants each window's 60 (the gate sends no more)
      ++released[w];
    }
  }
  REQUIRE(released.size() >= 5);
  for (auto const& [w, n] : released) {
    INFO("window " << w);
    CHECK(n <= 60); // it was 240 every other window: the allowance is the rate times the window
  }
}

TEST_CASE("admission gate: a rate cut below the refill grows back additively, not as a probe, after a calm period") {
  wandura::admission_gate_options o;
  o.min_rate_fraction = 0.1;
  gate_harness h(o);
  h.gate.observe("playback", refused(600, 0s)); // 10/s
  for (int i = 0; i < 2000; ++i) {
    h.spawn(i);
  }
  h.run_granting_for(2s);
  for (int k = 0; k < 8; ++k) {
    h.gate.observe("playback", refused(600, 0s));
    h.run_granting_for(1100ms);
  }
  auto const cut = h.playback().pacing_rate;
  REQUIRE(cut < 5.0);
  h.run_granting_for(11s); // past the calm period, still under the refill
  auto const r1 = h.playback().pacing_rate;
  REQUIRE(r1 > cut + 4.0);
  REQUIRE(r1 < 8.0);
  h.run_granting_for(2s);
  // Additive: 5 % of the refill (0.5/s) per second of grants, about 1.0 in 2 s; as a probe (5 % of the rate) it
  // would be about 0.1 * r1, under 0.8.
  CHECK(h.playback().pacing_rate - r1 > 0.9);
  CHECK(h.playback().pacing_rate <= 10.0 + 1e-9);
}

TEST_CASE("admission gate: a 429 that may not cut the rate still ends a probe at the refill") {
  gate_harness h;
  h.gate.observe("playback", refused(600, 1s)); // 10/s
  for (int i = 0; i < 3000; ++i) {
    h.spawn(i);
  }
  h.run_granting_for(25s);
  REQUIRE(h.playback().pacing_rate > 12.0);     // probing
  h.gate.observe("playback", refused(600, 0s)); // cut, and back to the refill
  REQUIRE(h.playback().pacing_rate <= 10.0 + 1e-9);
  auto const decreases = h.playback().decreases;
  h.run_granting_for(12s); // probing again
  REQUIRE(h.playback().pacing_rate > 10.0);
  h.gate.observe("playback", refused(600, 30s)); // a cut, to 0.7 of the probe's rate, at most the refill
  REQUIRE(h.playback().decreases == decreases + 1);
  auto const cut_to = h.playback().pacing_rate;
  CHECK(cut_to <= 10.0 + 1e-9);
  h.advance(20s); // within that cut's 30 s hold-off: the same round, no cut
  h.gate.observe("playback", refused(600, 30s));
  CHECK(h.playback().decreases == decreases + 1);
  CHECK(h.playback().pacing_rate == Approx(cut_to));
}
