// retry_engine_stats: what the engine's counters count, checked call by call on one engine (a fake transport and a
// hand-stepped clock).
#include "wandura/resilience/retry_engine.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using wandura::call_options;
using wandura::call_result;
using wandura::stop_reason;
using wandura::testing::fake_step;

namespace {

struct engine_setup {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::testing::fake_transport fake{io.get_executor(), *clock};
  std::unique_ptr<wandura::retry_engine> engine;

  engine_setup() {
    wandura::retry_options options;
    options.time_source = clock;
    options.random = [] { return 0.5; };
    engine = std::make_unique<wandura::retry_engine>(fake, std::move(options));
  }

  /// Runs one GET to completion (bounded); the result and how much `deadline_stops` grew during it.
  std::pair<call_result, std::uint64_t> run(call_options const& per_call, wandura::response_reader* reader = nullptr) {
    auto const before = engine->stats().deadline_stops;
    wandura::http_request request;
    request.method = wandura::http_method::get;
    request.url = "http://127.0.0.1:1/v1/config";
    std::optional<call_result> out;
    asio::co_spawn(io, engine->call(std::move(request), {"config", false, 0ms}, engine->settings_for(per_call), reader),
                   [&](std::exception_ptr e, call_result r) {
                     REQUIRE_FALSE(e);
                     out = std::move(r);
                   });
    for (int i = 0; i < 1000 && !out; ++i) {
      io.restart();
      io.poll();
      if (!out) {
        clock->advance_to_next_wakeup();
      }
    }
    REQUIRE(out.has_value());
    return {std::move(*out), engine->stats().deadline_stops - before};
  }
};

/// A policy that waits exactly 1 s before each of up to 10 retries.
wandura::retry_policy one_second_steps() {
  auto policy = wandura::retry_policy::standard();
  policy.backoff = wandura::backoff_kind::exponential;
  policy.initial_delay = 1s;
  policy.max_delay = 1s;
  policy.jitter = 0.0;
  policy.max_retries = 10;
  return policy;
}

/// A reader that asks for one follow-up after the first 2xx, after `retry_after`.
struct one_follow_up final : wandura::response_reader {
  std::chrono::milliseconds retry_after{0};
  int read = 0;
  [[nodiscard]] wandura::follow_up after_success(call_result const&) override {
    wandura::follow_up next;
    if (read++ == 0) {
      next.again = true;
      next.body = "narrowed";
      next.retry_after = retry_after;
      next.http_status = 503;
    }
    return next;
  }
};

} // namespace

TEST_CASE("retry engine stats: deadline_stops counts each call its deadline stopped, once, and no other call") {
  // retry_engine.hpp, retry_engine_stats::deadline_stops: "Calls stopped by their deadline." One engine, one call
  // after another; after each, the counter grew by 1 exactly when the call ended `stopped == deadline_exceeded`.
  engine_setup s;

  SECTION("stopped by the deadline after several retries: counted once, not per attempt") {
    call_options o;
    o.policy = one_second_steps();
    o.total_timeout = 3500ms;
    s.fake.set_default(fake_step::respond(503, "{}"));
    auto const [r, grew] = s.run(o);
    REQUIRE(r.stopped == stop_reason::deadline_exceeded);
    CHECK(r.attempts == 4); // at 0, 1, 2 and 3 s; the next, at 4 s, would end past the deadline
    CHECK(grew == 1);
  }
  SECTION("stopped before any attempt (a deadline of 0)") {
    call_options o;
    o.total_timeout = 0ms;
    auto const [r, grew] = s.run(o);
    REQUIRE(r.stopped == stop_reason::deadline_exceeded);
    CHECK(r.attempts == 0);
    CHECK(grew == 1);
  }
  SECTION("stopped by an attempt that stalled until the deadline") {
    call_options o;
    o.total_timeout = 3s;
    s.fake.push(fake_step::stall());
    auto const [r, grew] = s.run(o);
    REQUIRE(r.stopped == stop_reason::deadline_exceeded);
    CHECK(grew == 1);
  }
  SECTION("calls that ended otherwise are not counted") {
    call_options o;
    o.policy = one_second_steps();
    o.policy->max_retries = 2;
    o.total_timeout = 60s;
    s.fake.push(fake_step::respond(200, "{}"));
    auto const [ok, grew_ok] = s.run(o);
    CHECK(ok.stopped == stop_reason::success);
    CHECK(grew_ok == 0);

    s.fake.push(fake_step::respond(404, R"({"error_code":"not_found"})"));
    auto const [final_status, grew_final] = s.run(o);
    CHECK(final_status.stopped == stop_reason::not_retryable);
    CHECK(grew_final == 0);

    for (int i = 0; i < 3; ++i) {
      s.fake.push(fake_step::respond(503, "{}"));
    }
    auto const [exhausted, grew_exhausted] = s.run(o);
    CHECK(exhausted.stopped == stop_reason::retries_exhausted);
    CHECK(grew_exhausted == 0);

    // A follow-up that cannot be made before the deadline leaves the call with its 2xx: a success, not a stop.
    call_options short_call;
    short_call.total_timeout = 5s;
    one_follow_up reader;
    reader.retry_after = 8000ms;
    s.fake.push(fake_step::respond(200, "{}"));
    auto const [followed, grew_followed] = s.run(short_call, &reader);
    CHECK(followed.stopped == stop_reason::success);
    CHECK(grew_followed == 0);
  }
  CHECK(s.engine->stats().deadline_stops <= 1); // one call per section
}
