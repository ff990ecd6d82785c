// What call_options.hpp promises about a client's calls: the order of the retry hooks against the backoff sleep,
// with and without coalescing, and a total deadline of 0 or less ending every kind of call before any attempt.
#include "wandura/playback/client.hpp"

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/resilience/call_options.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

#include "client_harness.hpp"

using namespace std::chrono_literals;
using wandura::testing::fake_step;

namespace {

/// One call of a retry hook, as the hook saw the world: which hook, the clock's sleepers and the time it had
/// advanced, and the attempts sent so far.
struct hook_call {
  std::string hook;
  std::size_t pending_sleeps = 0;
  wandura::clock::duration elapsed{};
  std::size_t attempts_sent = 0;
};

/// A client on a fake transport and a hand-stepped clock whose `on_retry` and `log` both write to one vector.
struct hooked_client {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  std::shared_ptr<wandura::testing::fake_transport> fake =
      std::make_shared<wandura::testing::fake_transport>(io.get_executor(), *clock);
  std::vector<hook_call> calls;
  std::unique_ptr<wandura::client> api;

  explicit hooked_client(bool coalesce) {
    wandura::client_options options;
    options.base_url = "http://127.0.0.1:1/";
    options.api_key = "test-key";
    options.coalesce = coalesce;
    options.retry.time_source = clock;
    options.retry.random = [] { return 0.5; };
    options.retry.on_retry = [this](wandura::retry_event const&) { note("on_retry"); };
    options.retry.log = [this](wandura::log_level, std::string_view) { note("log"); };
    api = std::make_unique<wandura::client>(fake, std::move(options));
  }

  void note(char const* hook) {
    calls.push_back({hook, clock->pending_sleeps(), clock->elapsed(), fake->attempt_count()});
  }

  /// Runs `ops` together (all spawned before any runs) to completion; how many failed.
  template <typename T> int run_together(std::vector<asio::awaitable<T>> ops) {
    std::size_t done = 0;
    int failed = 0;
    for (auto& op : ops) {
      asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T) {
        failed += e ? 1 : 0;
        ++done;
      });
    }
    for (int i = 0; i < 1000 && done < ops.size(); ++i) {
      io.restart();
      io.poll();
      if (done < ops.size()) {
        clock->advance_to_next_wakeup();
      }
    }
    REQUIRE(done == ops.size());
    return failed;
  }
};

constexpr char const* unavailable = R"({"error_code":"service_unavailable"})";

/// Checks that `calls` holds, for each of `retries` retries, `on_retry` then `log`, both run before the backoff
/// sleep of that retry started (no sleeper on the clock, the clock where the failed attempt left it) and after
/// that retry's failed attempt was sent.
void check_hooks_before_sleep(std::vector<hook_call> const& calls, std::size_t retries) {
  REQUIRE(calls.size() == 2 * retries);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CAPTURE(i);
    CHECK(calls[i].hook == (i % 2 == 0 ? "on_retry" : "log"));
    CHECK(calls[i].pending_sleeps == 0);
    CHECK(calls[i].attempts_sent == i / 2 + 1);
  }
  CHECK(calls[0].elapsed == wandura::clock::duration::zero()); // the first attempt failed at once: no time slept
  for (std::size_t i = 0; i + 1 < calls.size(); i += 2) {
    CHECK(calls[i].elapsed == calls[i + 1].elapsed); // the log ran before the sleep ended, too
    if (i >= 2) {
      CHECK(calls[i].elapsed > calls[i - 2].elapsed); // a backoff was slept between two retries
    }
  }
}

} // namespace

TEST_CASE("client call options: on_retry runs before log, and both before the backoff sleep starts, with "
          "coalescing on and off") {
  // call_options.hpp, retry_options::log: "Called on the call's coroutine, before the backoff sleep"; on_retry:
  // "Called once per retry with the structured event, before `log`". Two 503s then an answer, for a ticket call
  // (coalesced by default) and a typed read, with coalescing on and off.
  bool const coalesce = GENERATE(true, false);
  bool const tickets = GENERATE(true, false);
  CAPTURE(coalesce, tickets);
  hooked_client c(coalesce);
  c.fake->push(fake_step::respond(503, unavailable));
  c.fake->push(fake_step::respond(503, unavailable));
  if (tickets) {
    c.fake->push(fake_step::respond(
        200, client_harness::batch_body({client_harness::granted_item("the-heiress-returns", 4, "play", "t4")})));
    std::vector<asio::awaitable<wandura::ticket_batch_result>> ops;
    ops.push_back(c.api->issue_tickets(client_harness::single_play_batch()));
    CHECK(c.run_together(std::move(ops)) == 0);
  } else {
    c.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
    std::vector<asio::awaitable<wandura::org_config>> ops;
    ops.push_back(c.api->get_config());
    CHECK(c.run_together(std::move(ops)) == 0);
  }
  CHECK(c.fake->attempt_count() == 3);
  check_hooks_before_sleep(c.calls, 2);
}

TEST_CASE("client call options: a call that joins a retried request does not call the retry hooks again") {
  // call_options.hpp: on_retry is "Called once per retry"; log receives "one WARN line per retry". A joiner of a
  // coalesced request (client.hpp `coalesce`, on by default) shares its retries: two identical calls, one request
  // retried once, one on_retry and one log, in that order, before the sleep.
  hooked_client c(true);
  auto slow_refusal = fake_step::respond(503, unavailable);
  slow_refusal.latency = 100ms; // the second call joins while the first attempt is in flight
  c.fake->push(slow_refusal);
  c.fake->push(fake_step::respond(
      200, client_harness::batch_body({client_harness::granted_item("the-heiress-returns", 4, "play", "t4")})));
  std::vector<asio::awaitable<wandura::ticket_batch_result>> ops;
  ops.push_back(c.api->issue_tickets(client_harness::single_play_batch()));
  ops.push_back(c.api->issue_tickets(client_harness::single_play_batch()));
  CHECK(c.run_together(std::move(ops)) == 0);
  REQUIRE(c.api->stats().metrics.coalesced == 1);
  CHECK(c.fake->attempt_count() == 2);
  REQUIRE(c.calls.size() == 2);
  CHECK(c.calls[0].hook == "on_retry");
  CHECK(c.calls[1].hook == "log");
  for (auto const& call : c.calls) {
    CHECK(call.pending_sleeps == 0);
    CHECK(call.attempts_sent == 1);
    CHECK(call.elapsed == 100ms); // when the first attempt's answer came, before any backoff
  }
}

namespace {

/// Runs `op` on the harness; the `wandura::error` it fails with, or fails the test if it succeeds.
template <typename T> wandura::error failure_of(client_harness::harness& h, asio::awaitable<T> op) {
  try {
    (void)h.run(std::move(op));
  } catch (wandura::error const& e) {
    return e;
  }
  FAIL("the call succeeded");
  return wandura::error(wandura::errc::invalid_argument, "unreachable");
}

} // namespace

TEST_CASE("client call options: a total_timeout of 0 or less ends a ticket call before any attempt") {
  // call_options.hpp, total_timeout: "0 or less: the call ends with `errc::deadline_exceeded` before any attempt".
  // For issue_tickets and start_episode (get_config is covered in client_test.cpp), at 0 and below it.
  auto const timeout = GENERATE(0ms, -1ms, -60'000ms);
  bool const start = GENERATE(true, false);
  CAPTURE(timeout.count(), start);
  client_harness::harness h;
  wandura::call_options options;
  options.total_timeout = timeout;
  auto const e = start ? failure_of(h, h.api->start_episode(client_harness::harness::viewer_on(), "the-heiress-returns",
                                                            4, 6, options))
                       : failure_of(h, h.api->issue_tickets(client_harness::single_play_batch(), options));
  CHECK(e.code() == wandura::errc::deadline_exceeded);
  CHECK(e.attempts() == 0);
  CHECK(h.fake->attempt_count() == 0);
  CHECK(h.clock->elapsed() == wandura::clock::duration::zero());
}

TEST_CASE("client call options: a negative total_timeout ends a typed read before any attempt") {
  // call_options.hpp, total_timeout: "0 or less"; client_test.cpp covers 0 only.
  client_harness::harness h;
  wandura::call_options options;
  options.total_timeout = -1ms;
  auto const e = failure_of(h, h.api->get_config(options));
  CHECK(e.code() == wandura::errc::deadline_exceeded);
  CHECK(e.attempts() == 0);
  CHECK(h.fake->attempt_count() == 0);
}

TEST_CASE("client call options: a call that would join a request in flight ends at once with a total_timeout of 0") {
  // call_options.hpp, total_timeout 0: "the call ends with `errc::deadline_exceeded` before any attempt"; client.hpp
  // `issue_tickets`: "the joiner still waits under its own deadline". The joiner of an identical request in flight
  // ends without waiting for its answer; the request and its first caller go on untouched.
  client_harness::harness h;
  auto slow = fake_step::respond(
      200, client_harness::batch_body({client_harness::granted_item("the-heiress-returns", 4, "play", "t4")}));
  slow.latency = 100ms;
  h.fake->push(slow);
  std::optional<wandura::ticket_batch_result> first;
  std::exception_ptr joiner_failure;
  bool joiner_done = false;
  wandura::clock::duration joiner_ended{};
  asio::co_spawn(h.io, h.api->issue_tickets(client_harness::single_play_batch()),
                 [&](std::exception_ptr e, wandura::ticket_batch_result r) {
                   REQUIRE_FALSE(e);
                   first = std::move(r);
                 });
  wandura::call_options options;
  options.total_timeout = 0ms;
  asio::co_spawn(h.io, h.api->issue_tickets(client_harness::single_play_batch(), options),
                 [&](std::exception_ptr e, wandura::ticket_batch_result) {
                   joiner_failure = e;
                   joiner_done = true;
                   joiner_ended = h.clock->elapsed();
                 });
  for (int i = 0; i < 1000 && !(first && joiner_done); ++i) {
    h.io.restart();
    h.io.poll();
    if (!(first && joiner_done)) {
      h.clock->advance_to_next_wakeup();
    }
  }
  REQUIRE(first.has_value());
  REQUIRE(joiner_done);
  CHECK(first->items.at(0).outcome == wandura::item_outcome::granted);
  CHECK(h.fake->attempt_count() == 1);                     // the joiner sent nothing of its own
  CHECK(joiner_ended == wandura::clock::duration::zero()); // it did not wait for the request's 100 ms answer
  CHECK(h.api->stats().metrics.coalesced == 0);            // nor did it join the request (metrics.hpp)
  REQUIRE(joiner_failure);
  try {
    std::rethrow_exception(joiner_failure);
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::deadline_exceeded);
  }
}
