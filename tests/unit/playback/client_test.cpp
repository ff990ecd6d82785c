#include "wandura/playback/client.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/error.hpp"
#include "wandura/resilience/idempotency.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

#include "client_harness.hpp"

using namespace std::chrono_literals;
using wandura::item_outcome;
using wandura::testing::fake_step;
using namespace client_harness;

TEST_CASE("client: start_episode asks for N as play and N+1, N+2 as prefetch in one request") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5"),
                                                   granted_item("the-heiress-returns", 6, "prefetch", "t6")})));
  auto s = h.start(4, 12);
  REQUIRE(h.fake->attempt_count() == 1);
  auto const seen = h.fake->attempts().front();
  CHECK(seen.request.url == "http://127.0.0.1:1/v1/playback/tickets");
  CHECK(seen.header("Authorization") == "Bearer test-key");
  CHECK(seen.header("Idempotency-Key").size() == 32);
  CHECK(sent_episodes(seen.request.body) == std::vector<std::string>{"the-heiress-returns/4/play",
                                                                     "the-heiress-returns/5/prefetch",
                                                                     "the-heiress-returns/6/prefetch"});
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.play.ticket);
  CHECK(s.play.ticket->ticket_id == "t4");
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[1].ticket->ticket_id == "t6");
  CHECK(s.attempts == 1);
}

TEST_CASE("client: only unlocked episodes are prefetched") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 5);
  CHECK(sent_episodes(h.fake->attempts().front().request.body) ==
        std::vector<std::string>{"the-heiress-returns/4/play", "the-heiress-returns/5/prefetch"});
  CHECK(s.prefetch.size() == 1);
}

TEST_CASE("client: a shed prefetch is reported, not retried, and leaves the play alone") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed", 2),
                       refused_item("the-heiress-returns", 6, "prefetch", 404, "not_ready")})));
  auto s = h.start(4, 12);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch[0].outcome == item_outcome::shed);
  CHECK(s.prefetch[0].retry_after == std::chrono::seconds(2));
  CHECK(s.prefetch[1].outcome == item_outcome::not_ready);
  CHECK(h.warn_lines.empty());
}

TEST_CASE("client: a failed play item is retried alone, with a new key, after its retry_after") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 1),
                       granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto const before = h.clock->now();
  auto s = h.start(4, 5);
  REQUIRE(h.fake->attempt_count() == 2);
  auto const attempts = h.fake->attempts();
  CHECK(sent_episodes(attempts[1].request.body) == std::vector<std::string>{"the-heiress-returns/4/play"});
  CHECK(attempts[0].header("Idempotency-Key") != attempts[1].header("Idempotency-Key"));
  // seed 000: Retry-After (1 s) plus up to 1 s of jitter (u = 0.5).
  CHECK(h.clock->now() - before >= 1500ms);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.play.ticket->ticket_id == "t4");
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.attempts == 2);
  REQUIRE(h.warn_lines.size() == 1);
  CHECK(h.warn_lines[0] ==
        "retry 1/3 in 1500 ms: HTTP 503 code=service_unavailable (POST /v1/playback/tickets on 127.0.0.1:1)");
}

TEST_CASE("client: a failed prefetch item is not retried by default") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 503, "service_unavailable", {}, 1)})));
  auto s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(s.prefetch[0].outcome == item_outcome::unavailable);
}

TEST_CASE("client: a whole-batch 429 is retried after Retry-After and holds prefetches back meanwhile") {
  harness h;
  h.fake->push(fake_step::respond(
      429,
      batch_body({refused_item("the-heiress-returns", 4, "play", 429, "rate_limited", {}, 2),
                  refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed", 2)}),
      {{"Retry-After", "2"}}));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 2);
  CHECK(s.play.outcome == item_outcome::granted);
  // Same logical request: same key on the retry.
  auto const attempts = h.fake->attempts();
  CHECK(attempts[0].header("Idempotency-Key") == attempts[1].header("Idempotency-Key"));
}

TEST_CASE("client: while the playback counter is held off after a 429, prefetches are shed and not sent") {
  harness h;
  // A play refused for rate, not retried: the counter is held for the server's 3 s.
  wandura::call_options no_retries;
  no_retries.disable_retries = true;
  h.fake->push(
      fake_step::respond(429, batch_body({refused_item("the-heiress-returns", 1, "play", 429, "rate_limited", {}, 3)}),
                         {{"Retry-After", "3"}}));
  CHECK(h.start(1, 1, "dev-1", no_retries).play.outcome == item_outcome::rate_limited);
  auto const before = h.clock->now();
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto s = h.start(4, 6);
  REQUIRE(h.fake->attempt_count() == 2);
  CHECK(sent_episodes(h.fake->attempts()[1].request.body) == std::vector<std::string>{"the-heiress-returns/4/play"});
  CHECK(h.clock->now() - before == 3000ms); // the play waited for the hold-off
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[0].outcome == item_outcome::shed);
  CHECK(s.prefetch[1].outcome == item_outcome::shed);
  CHECK(s.prefetch[0].status == 0); // nothing was sent for it
  CHECK(s.prefetch[0].reason == "prefetch_shed");
}

TEST_CASE("client: a granted ticket is reused for the same viewer and device, never for another device") {
  harness h;
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto first = h.start(4, 0);
  CHECK_FALSE(first.play.reused);
  auto again = h.start(4, 0);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(again.play.reused);
  CHECK(again.play.ticket->ticket_id == "t4");
  CHECK(again.attempts == 0);
  auto other_device = h.start(4, 0, "dev-2");
  CHECK(h.fake->attempt_count() == 2);
  CHECK_FALSE(other_device.play.reused);
  CHECK(h.api->stats().metrics.cache_hits == 1);
}

TEST_CASE("client: a ticket the server reused is stored too, so the next call for it sends nothing") {
  // A process restarted (or a shared store that lost its keys) asks for a ticket the server issued before: the
  // server answers it reused. Not storing it sent every later call for it to the API until it expired.
  bool const reuse = GENERATE(true, false);
  INFO("reuse_tickets = " << reuse);
  wandura::client_options options;
  options.reuse_tickets = reuse;
  harness h(options);
  h.fake->set_default(
      fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4", /*reused=*/true)})));
  auto first = h.start(4, 0);
  CHECK(first.play.outcome == item_outcome::granted);
  CHECK(first.play.reused);
  CHECK(first.attempts == 1);
  auto again = h.start(4, 0);
  CHECK(again.play.reused);
  REQUIRE(again.play.ticket);
  CHECK(again.play.ticket->ticket_id == "t4");
  CHECK(h.fake->attempt_count() == (reuse ? 1U : 2U)); // from the store when reuse is on; asked again when off
  CHECK(again.attempts == (reuse ? 0 : 1));
  CHECK(h.api->stats().metrics.cache_hits == (reuse ? 1U : 0U));
}

TEST_CASE("client: a ticket whose expires_at has passed by the local clock is granted, and not kept for reuse") {
  // ticket.hpp: the server's clock decides; a local clock ahead of it must not turn grants into errors.
  harness h;
  h.fake->set_default(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4", false, "2000-01-01T00:00:00Z")})));
  auto first = h.start(4, 0);
  CHECK(first.play.outcome == item_outcome::granted);
  REQUIRE(first.play.ticket);
  CHECK(first.play.ticket->ticket_id == "t4");
  CHECK(first.play.ticket->expires_at_text == "2000-01-01T00:00:00Z");
  auto again = h.start(4, 0);
  CHECK(h.fake->attempt_count() == 2); // asked again: the expired ticket was not reused
  CHECK_FALSE(again.play.reused);
  CHECK(h.api->stats().metrics.cache_hits == 0);
}

TEST_CASE("client: concurrent identical requests share one request") {
  harness h;
  auto step = fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")}));
  step.latency = 100ms;
  h.fake->push(step);
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev-1";
  batch.drm_kek = "kek";
  std::vector<asio::awaitable<wandura::ticket_batch_result>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(h.api->issue_tickets(batch));
  }
  auto const results = h.run_together(std::move(calls));
  CHECK(h.fake->attempt_count() == 1);
  int fresh = 0;
  for (auto const& r : results) {
    CHECK(r.items[0].outcome == item_outcome::granted);
    fresh += r.items[0].reused ? 0 : 1;
  }
  CHECK(fresh == 1); // the other two joined it: nothing is counted twice
  CHECK(h.api->stats().metrics.coalesced == 2);
}

TEST_CASE("client: a start that joined a prefetch request which failed as a whole reports 0 attempts, as on success") {
  // The play comes from the store; the prefetches go out as one request, shared by two identical starts, and a
  // proxy's 503 (no items) fails it: each start gets its prefetches failed and its play, and only the start that
  // sent the request made its attempt.
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  h.start(4, 4);
  auto proxy = fake_step::respond(503, "<html>proxy</html>");
  proxy.latency = 100ms;
  h.fake->set_default(proxy);
  std::vector<asio::awaitable<wandura::episode_start>> calls;
  for (int i = 0; i < 2; ++i) {
    calls.push_back(h.api->start_episode(harness::viewer_on("dev-1"), "the-heiress-returns", 4, 6));
  }
  auto const results = h.run_together(std::move(calls));
  CHECK(h.fake->attempt_count() == 2); // the first start's request, then one shared prefetch request
  CHECK(h.api->stats().metrics.coalesced == 1);
  REQUIRE(results.size() == 2);
  std::vector<int> attempts;
  for (auto const& r : results) {
    CHECK(r.play.reused);
    REQUIRE(r.prefetch.size() == 2);
    CHECK(r.prefetch[0].outcome == item_outcome::unavailable); // what a 503 means for an item
    attempts.push_back(r.attempts);
  }
  std::sort(attempts.begin(), attempts.end());
  CHECK(attempts == std::vector<int>{0, 1});
}

TEST_CASE("client: identical concurrent starts take the viewer's allowance once: the joiners share the request's "
          "tickets and its refusals") {
  // A limit of 1 or 2 tickets a minute, three identical starts of episode 4 with `limit` episodes each (the play,
  // and a prefetch at 2), and a third episode beyond the limit for the case without coalescing.
  int const limit = GENERATE(1, 2);
  bool const coalesce = GENERATE(true, false);
  INFO("limit " << limit << ", coalesce " << coalesce);
  wandura::client_options options;
  options.viewer_tickets_per_minute = static_cast<std::uint32_t>(limit);
  options.coalesce = coalesce;
  harness h(options);
  std::vector<std::string> granted{granted_item("the-heiress-returns", 4, "play", "t4")};
  if (limit == 2) {
    granted.push_back(granted_item("the-heiress-returns", 5, "prefetch", "t5"));
  }
  auto step = fake_step::respond(200, batch_body(granted));
  step.latency = 100ms;
  h.fake->set_default(step);
  std::vector<asio::awaitable<wandura::episode_start>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(h.api->start_episode(harness::viewer_on(), "the-heiress-returns", 4, 4 + limit - 1));
  }
  auto const starts = h.run_together(std::move(calls));
  CHECK(h.fake->attempt_count() == 1); // joined, or refused before sending
  auto const counts = h.api->stats().metrics;
  if (coalesce) {
    CHECK(counts.coalesced == 2);
    for (auto const& s : starts) {
      CHECK(s.play.outcome == item_outcome::granted);
      for (auto const& prefetch : s.prefetch) {
        CHECK(prefetch.outcome == item_outcome::granted);
      }
    }
    CHECK(counts.outcome(item_outcome::viewer_limited) == 0);
  } else {
    CHECK(counts.coalesced == 0); // each call its own request: the first takes the allowance, the others are refused
    auto const plays = [&](item_outcome o) {
      return std::count_if(starts.begin(), starts.end(), [&](auto const& s) { return s.play.outcome == o; });
    };
    CHECK(plays(item_outcome::granted) == 1);
    CHECK(plays(item_outcome::viewer_limited) == 2);
  }
  // The request took `limit` tickets once, and they were granted: the allowance is spent, whoever joined.
  auto const after = h.start(9, 9);
  CHECK(after.play.outcome == item_outcome::viewer_limited);
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: a request refused by the viewer limit is refused for the calls that joined it too") {
  // The first of two identical starts takes the viewer's last ticket for its play and is refused its prefetch; the
  // second joins it: the same answer, nothing more taken, one request of the play alone.
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1;
  harness h(options);
  auto step = fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")}));
  step.latency = 100ms;
  h.fake->push(step);
  std::vector<asio::awaitable<wandura::episode_start>> calls;
  for (int i = 0; i < 2; ++i) {
    calls.push_back(h.api->start_episode(harness::viewer_on(), "the-heiress-returns", 4, 5));
  }
  auto const starts = h.run_together(std::move(calls));
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK(sent_episodes(h.fake->attempts()[0].request.body) == std::vector<std::string>{"the-heiress-returns/4/play"});
  for (auto const& s : starts) {
    CHECK(s.play.outcome == item_outcome::granted);
    REQUIRE(s.prefetch.size() == 1);
    CHECK(s.prefetch[0].outcome == item_outcome::viewer_limited);
    CHECK(s.prefetch[0].film_ref == "the-heiress-returns");
    CHECK(s.prefetch[0].episode_no == 5);
    CHECK(s.prefetch[0].retry_after.has_value());
  }
  CHECK(starts[0].play.reused != starts[1].play.reused); // one fresh ticket, counted once
}

TEST_CASE("client: the per-viewer limit refuses tickets before anything is sent") {
  wandura::client_options options;
  options.viewer_tickets_per_minute = 2;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 12);
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK(sent_episodes(h.fake->attempts()[0].request.body).size() == 2);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch[1].outcome == item_outcome::viewer_limited);
  CHECK(s.prefetch[1].status == 0);
  // The allowance is spent: the next start is refused whole, without a request.
  auto refused = h.start(7, 7);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(refused.play.outcome == item_outcome::viewer_limited);
  CHECK(refused.play.retry_after.has_value());
}

TEST_CASE("client: invalid batches are refused before sending") {
  harness h;
  wandura::ticket_batch batch;
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  for (int i = 1; i <= 4; ++i) {
    batch.episodes.push_back({"f", i, wandura::intent::play});
  }
  try {
    (void)h.run(h.api->issue_tickets(batch));
    FAIL("expected invalid_argument");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
  }
  batch.episodes.resize(1);
  batch.union_info.clear();
  CHECK_THROWS_AS(h.run(h.api->issue_tickets(batch)), wandura::error);
  CHECK(h.fake->attempt_count() == 0);
}

TEST_CASE("client: a 401 fails the whole call as unauthorized, without retries") {
  harness h;
  h.fake->push(fake_step::respond(401, R"({"error":"no","error_code":"unauthorized"})"));
  try {
    (void)h.start(4, 4);
    FAIL("expected unauthorized");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::unauthorized);
    CHECK(e.http_status() == 401);
    CHECK(e.attempts() == 1);
  }
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: a garbage 200 body is a typed invalid_response error") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"request_id":"req_1","items":[{"film_ref":)"));
  try {
    (void)h.start(4, 4);
    FAIL("expected invalid_response");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_response);
  }
}

TEST_CASE("client: network errors on every attempt end the call with the last real error") {
  harness h;
  h.fake->set_default(fake_step::fail(wandura::errc::connection_reset));
  try {
    (void)h.start(4, 4);
    FAIL("expected connection_reset");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::connection_reset);
    CHECK(e.attempts() == 4); // INTERACTIVE: 3 retries
  }
  CHECK(h.warn_lines.size() == 3);
}

TEST_CASE("client: a call that ends on an answer worth retrying later matches condition::retryable, a final answer "
          "does not") {
  // error.hpp: `unavailable` is a status the call's policy retries with no retry left, `http_error` a final status;
  // `condition::retryable` matches the first (and `rate_limited`), never the second.
  struct row {
    char const* name;
    char const* call;
    int status;
    bool standard_policy;
    bool keys_off;
    wandura::errc code;
    int attempts;
  };
  auto const r = GENERATE(values<row>({
      {"503 on every attempt", "get_config", 503, false, false, wandura::errc::unavailable, 4},
      {"503 without items to a batch", "issue_tickets", 503, false, false, wandura::errc::unavailable, 4},
      {"503 to a write without a key", "issue_tickets", 503, false, true, wandura::errc::unavailable, 1},
      {"429 on every attempt", "get_config", 429, false, false, wandura::errc::rate_limited, 4},
      {"504 under STANDARD", "get_config", 504, true, false, wandura::errc::unavailable, 3},
      {"504 under the default policy", "get_config", 504, false, false, wandura::errc::http_error, 1},
      {"404", "get_config", 404, false, false, wandura::errc::http_error, 1},
  }));
  CAPTURE(r.name);
  wandura::client_options client_options;
  client_options.retry.auto_idempotency_keys = !r.keys_off;
  harness h(client_options);
  h.fake->set_default(fake_step::respond(r.status, "<html>proxy</html>"));
  wandura::call_options options;
  if (r.standard_policy) {
    options.policy = wandura::retry_policy::standard();
  }
  try {
    if (std::string_view(r.call) == "issue_tickets") {
      (void)h.start(4, 4, "dev-1", options);
    } else {
      (void)h.run(h.api->get_config(options));
    }
    FAIL("expected a failed call");
  } catch (wandura::error const& e) {
    INFO(e.what());
    CHECK(e.code() == r.code);
    CHECK((e.code() == wandura::condition::retryable) == (r.code != wandura::errc::http_error));
    CHECK(e.http_status() == r.status);
    CHECK(e.attempts() == r.attempts);
    if (r.keys_off) {
      CHECK(std::string(e.what()).find("not retried: write without idempotency key: HTTP 503") != std::string::npos);
    }
  }
  CHECK(h.fake->attempt_count() == static_cast<std::size_t>(r.attempts));
}

TEST_CASE("client: cancelling a call during a per-item backoff ends it with operation_aborted") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 5)})));
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  asio::cancellation_signal signal;
  std::exception_ptr failure;
  bool done = false;
  asio::co_spawn(h.io, h.api->issue_tickets(batch),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, wandura::ticket_batch_result) {
                   failure = e;
                   done = true;
                 }));
  h.io.poll();
  REQUIRE_FALSE(done);
  REQUIRE(h.clock->pending_sleeps() == 1); // sleeping before the per-item retry
  signal.emit(asio::cancellation_type::terminal);
  h.io.restart();
  h.io.poll();
  REQUIRE(done);
  REQUIRE(failure);
  try {
    std::rethrow_exception(failure);
  } catch (wandura::error const& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: typed reads parse their bodies and percent-encode path segments") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"film_ref":"a b/c","title":"T","episodes":12})"));
  auto f = h.run(h.api->get_film("a b/c"));
  CHECK(f.episode_count == 12);
  CHECK(h.fake->attempts()[0].request.url == "http://127.0.0.1:1/v1/catalog/films/a%20b%2Fc");
  CHECK(h.fake->attempts()[0].header("Idempotency-Key").empty());
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000,"catalog":1200}})"));
  auto cfg = h.run(h.api->get_config());
  CHECK(cfg.limit("playback") == 6000);
  h.fake->push(fake_step::respond(404, R"({"error":"x","error_code":"not_found"})"));
  CHECK_THROWS_AS(h.run(h.api->get_video("nope")), wandura::error);
}

TEST_CASE("client: a typed read of one film or video answered for another is retried, then invalid_response") {
  // client.hpp get_film: the answer's ref must be the one asked for, byte for byte.
  harness h;
  h.fake->push(fake_step::respond(200, R"({"film_ref":"the-heiress","title":"T","episodes":3})"));
  h.fake->push(fake_step::respond(200, R"({"film_ref":"the-heiress-returns","title":"T","episodes":12})"));
  auto const f = h.run(h.api->get_film("the-heiress-returns"));
  CHECK(f.film_ref == "the-heiress-returns");
  CHECK(f.episode_count == 12);
  CHECK(h.fake->attempt_count() == 2);

  for (int call = 0; call < 2; ++call) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      h.fake->push(fake_step::respond(200, call == 0 ? R"({"film_ref":"The-Heiress-Returns","episodes":12})"
                                                     : R"({"video_ref":"trailer\r\n","title":"T"})"));
    }
    auto const before = h.fake->attempt_count();
    try {
      (void)(call == 0 ? h.run(h.api->get_film("the-heiress-returns")).film_ref
                       : h.run(h.api->get_video("trailer")).video_ref);
      FAIL("expected invalid_response");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_response);
      CHECK(e.attempts() == 4);
      CHECK(std::string(e.what()).find(call == 0 ? R"(film_ref: the answer is for "The-Heiress-Returns", not the )"
                                                   R"("the-heiress-returns" asked for)"
                                                 : R"(video_ref: the answer is for "trailer\x0d\x0a", not the )"
                                                   R"("trailer" asked for)") != std::string::npos);
    }
    CHECK(h.fake->attempt_count() == before + 4);
  }
  // Reads of lists name no one resource: nothing to compare.
  h.fake->push(fake_step::respond(200, R"({"videos":[{"video_ref":"a"},{"video_ref":"b"}]})"));
  CHECK(h.run(h.api->list_videos()).size() == 2);
}

namespace {
/// What `get_film` and `get_video` throw for `ref`, each checked to be `invalid_argument`: their messages.
std::array<std::string, 2> refused_typed_reads(harness& h, std::string const& ref) {
  std::array<std::string, 2> messages;
  for (std::size_t call = 0; call < messages.size(); ++call) {
    try {
      (void)(call == 0 ? h.run(h.api->get_film(ref)).film_ref : h.run(h.api->get_video(ref)).video_ref);
      FAIL("expected invalid_argument");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      messages[call] = e.what();
    }
  }
  return messages;
}
} // namespace

TEST_CASE("client: a typed read refused for an empty or dot path segment is counted as a call that failed") {
  // client.hpp get_film: invalid_argument, nothing sent, for an empty ref or a dot segment, which the URL's path
  // would lose ("films/.." is "/v1/catalog/"): another resource.
  auto const ref = GENERATE(as<std::string>{}, "", ".", "..");
  CAPTURE(ref);
  harness h;
  auto const before = h.api->stats().metrics;
  auto const messages = refused_typed_reads(h, ref);
  CHECK(messages[0].starts_with("get_film: film_ref must not be empty"));
  CHECK(messages[1].starts_with("get_video: video_ref must not be empty"));
  auto const after = h.api->stats().metrics;
  CHECK(after.calls == before.calls + 2);
  CHECK(after.call_failures == before.call_failures + 2);
  CHECK(h.fake->attempt_count() == 0);
  // Dots within a ref are bytes like any other.
  h.fake->push(fake_step::respond(200, R"({"film_ref":"...","title":"T","episodes":12})"));
  CHECK(h.run(h.api->get_film("...")).episode_count == 12);
  CHECK(h.fake->attempts()[0].request.url == "http://127.0.0.1:1/v1/catalog/films/...");
}

TEST_CASE("client: a typed read whose path segment encodes to more than max_path_segment_bytes is refused unsent") {
  // client.hpp get_film: invalid_argument, nothing sent; libcurl would fail such a request line as "out of memory"
  // past 1 MiB, and servers refuse one past ~8 KiB anyway. The bound is on the encoded form: '/' takes three bytes.
  harness h;
  auto const at_bound = std::string(wandura::client::max_path_segment_bytes, 'a');
  auto const encoded_over = std::string(wandura::client::max_path_segment_bytes / 3 + 1, '/');
  for (auto const& ref : {at_bound + "a", encoded_over, std::string(std::size_t{1} << 20U, 'x')}) {
    for (auto const& message : refused_typed_reads(h, ref)) {
      CHECK_THAT(message, Catch::Contains("bytes percent-encoded; at most 8000 are sent"));
    }
  }
  CHECK(h.fake->attempt_count() == 0);
  // At the bound it is sent.
  h.fake->push(fake_step::respond(200, R"({"film_ref":")" + at_bound + R"(","title":"T","episodes":12})"));
  CHECK(h.run(h.api->get_film(at_bound)).episode_count == 12);
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: metrics count outcomes and render as Prometheus text") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed", 2)})));
  (void)h.start(4, 5);
  auto const st = h.api->stats();
  CHECK(st.metrics.calls == 1);
  CHECK(st.metrics.attempts == 1);
  CHECK(st.metrics.outcome(item_outcome::granted) == 1);
  CHECK(st.metrics.outcome(item_outcome::shed) == 1);
  auto const text = h.api->metrics_text();
  CHECK(text.find("wandura_") != std::string::npos);
  CHECK(text.find("shed") != std::string::npos);
}

TEST_CASE("client: a request of prefetches only is not retried and does not hold plays back") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  (void)h.start(4, 5);
  // Restarting episode 4 with 6 now unlocked: 4 and 5 come from the store, only 6 is asked for, and shed.
  // A non-200 batch carries the flat error fields too (SPEC §1); all-shed says reason prefetch_shed.
  std::string shed =
      batch_body({refused_item("the-heiress-returns", 6, "prefetch", 429, "rate_limited", "prefetch_shed", 2)});
  shed.insert(1, R"("error":"prefetch paused","error_code":"rate_limited","reason":"prefetch_shed",)");
  h.fake->push(fake_step::respond(429, shed, {{"Retry-After", "2"}}));
  auto again = h.start(4, 6);
  CHECK(h.fake->attempt_count() == 2);
  CHECK(again.play.reused);
  REQUIRE(again.prefetch.size() == 2);
  CHECK(again.prefetch[1].outcome == item_outcome::shed);
  CHECK(h.warn_lines.empty());
  // The shed prefetch did not hold the playback counter: the next play goes out at once.
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 9, "play", "t9")})));
  auto const before = h.clock->now();
  auto next = h.start(9, 9);
  CHECK(next.play.outcome == item_outcome::granted);
  CHECK(h.clock->now() == before);
}

TEST_CASE("client: attempts and retries are counted once, whether the engine or a per-item round made them") {
  harness h;
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 1)})));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto s = h.start(4, 4);
  CHECK(s.play.outcome == item_outcome::granted);
  auto const st = h.api->stats();
  CHECK(st.metrics.attempts == 3);
  CHECK(st.metrics.retries == 2); // one by the engine (whole 503), one per-item round
  CHECK(h.warn_lines.size() == 2);
}

TEST_CASE("client: a call that fails as a whole gives the viewer's allowance back only when nothing was issued") {
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1;
  harness h(options);
  SECTION("a final refusal of the whole request (400): the server issued nothing") {
    h.fake->push(fake_step::respond(400, R"({"error_code":"invalid_request"})"));
    CHECK_THROWS_AS(h.start(4, 4), wandura::error);
    h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
    CHECK(h.start(4, 4).play.outcome == item_outcome::granted);
  }
  SECTION("2xx answers that cannot be read: the server may have issued the ticket, which stays counted") {
    h.fake->set_default(fake_step::respond(200, R"({"request_id":"req_1","items":[{"film_ref":)")); // truncated
    CHECK_THROWS_AS(h.start(4, 4), wandura::error);
    auto const attempts = h.fake->attempt_count();
    CHECK(h.start(5, 5).play.outcome == item_outcome::viewer_limited);
    CHECK(h.fake->attempt_count() == attempts); // refused before sending
  }
}

TEST_CASE("client: whole-request and per-item retries share one count: at most max_retries + 1 attempts") {
  harness h; // INTERACTIVE: 3 retries
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->set_default(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 1),
                       granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 4);
  CHECK(s.play.outcome == item_outcome::unavailable);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  REQUIRE(h.warn_lines.size() == 3);
  CHECK(h.warn_lines[0].rfind("retry 1/3 ", 0) == 0);
  CHECK(h.warn_lines[1].rfind("retry 2/3 ", 0) == 0);
  CHECK(h.warn_lines[2].rfind("retry 3/3 ", 0) == 0);
}

TEST_CASE("client: a final 503 with items is reported as it is, without per-item retries after it") {
  harness h;
  h.fake->set_default(fake_step::respond(
      503, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 1)})));
  auto s = h.start(4, 4);
  CHECK(h.fake->attempt_count() == 4); // the engine's 3 retries, then nothing more
  CHECK(s.play.outcome == item_outcome::unavailable);
}

TEST_CASE("client: a base_url that is not http(s) with a host is refused when the client is made") {
  asio::io_context io;
  wandura::testing::manual_clock clock;
  auto fake = std::make_shared<wandura::testing::fake_transport>(io.get_executor(), clock);
  for (char const* bad : {"ftp://127.0.0.1:1", "not-a-url", "http://", "http:///v1", "http://127.0.0.1:1 x", ""}) {
    wandura::client_options options;
    options.base_url = bad;
    options.api_key = "test-key";
    try {
      wandura::client api(fake, options);
      FAIL("accepted " << bad);
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
    }
  }
  wandura::client_options ok;
  ok.base_url = "https://api.wandura.example/";
  ok.api_key = "test-key";
  CHECK_NOTHROW(wandura::client(fake, ok));
}

TEST_CASE("client: an unreadable 200 batch is retried with the same key until retries run out, then names what "
          "was wrong") {
  harness h;
  h.fake->set_default(fake_step::respond(200, "\xff\xfe not json"));
  try {
    (void)h.start(4, 4);
    FAIL("expected invalid_response");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_response);
    INFO(e.what());
    CHECK(std::string(e.what()).rfind("start_episode: retries exhausted after 4 attempts: HTTP 200: invalid response "
                                      "body: ",
                                      0) == 0);
    CHECK(e.attempts() == 4);
  }
  auto const attempts = h.fake->attempts();
  REQUIRE(attempts.size() == 4);
  CHECK(attempts[0].header("Idempotency-Key") == attempts[3].header("Idempotency-Key")); // the server replays
  REQUIRE(h.warn_lines.size() == 3);
  CHECK(h.warn_lines[0].find(": invalid response body") != std::string::npos);
}

TEST_CASE("client: an item it cannot read fails alone, is not asked again, and its ticket stays counted") {
  // ticket_result.hpp, unreadable_item_code. With the per-viewer limit on and off.
  bool const limited = GENERATE(true, false);
  CAPTURE(limited);
  wandura::client_options options;
  if (limited) {
    options.viewer_tickets_per_minute = 3;
  }
  harness h(options);
  std::string const film = "the-heiress-returns";
  // Episode 5 granted with a ticket that cannot be read (the server may have issued it), episode 6 a 503 whose
  // retry_after is not a number (not asked again: the same answer reads the same way).
  std::string const unreadable_grant = R"({"film_ref":")" + film +
                                       R"(","episode_no":5,"intent":"prefetch","status":200,)"
                                       R"("ticket":{"ticket_id":"t5","expires_at":"tomorrow"}})";
  std::string const unreadable_refusal =
      R"({"film_ref":")" + film + R"(","episode_no":6,"intent":"prefetch","status":503,"retry_after":"soon"})";
  h.fake->push(
      fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4"), unreadable_grant, unreadable_refusal})));
  auto const s = h.start(4, 6);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.play.ticket);
  CHECK(s.play.ticket->ticket_id == "t4");
  REQUIRE(s.prefetch.size() == 2);
  for (auto const& item : s.prefetch) {
    CHECK(item.outcome == item_outcome::failed);
    CHECK(item.error == wandura::errc::invalid_response);
    CHECK(item.error_code == wandura::unreadable_item_code);
    CHECK_FALSE(item.ticket);
  }
  CHECK(s.prefetch[0].detail == "items[1].ticket.expires_at: not an RFC 3339 date-time within the clock's range");
  CHECK(s.prefetch[0].episode_no == 5);
  CHECK(s.prefetch[1].detail == "items[2].retry_after: expected a number of seconds");
  CHECK(s.prefetch[1].status == 503);
  CHECK(h.api->stats().metrics.call_failures == 0);

  // The play's ticket and episode 5's (maybe issued) stay taken; episode 6 was answered without one.
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 7, "play", "t7")})));
  auto const next = h.start(7, 7);
  CHECK(next.play.outcome == item_outcome::granted);
  auto const after = h.start(8, 8);
  if (limited) {
    CHECK(after.play.outcome == item_outcome::viewer_limited);
    CHECK(h.fake->attempt_count() == 2);
  } else {
    CHECK(h.fake->attempt_count() == 3);
  }
}

TEST_CASE("client: a retry of the play that ends without an answer for it fails the play alone, and the prefetches "
          "granted before stand and are stored") {
  // client.hpp and docs/protocol.md §3: one item's failure never takes another's result. The play is retried alone
  // (a new request); that request ends in a flat 400, in resets until the retries run out, or in an answer without
  // the play.
  auto const ending =
      GENERATE(as<std::string>{}, "flat 400", "resets", "flat 503s", "unreadable 200s", "no play in the answer");
  CAPTURE(ending);
  wandura::client_options options;
  options.viewer_tickets_per_minute = 6;
  harness h(options);
  std::string const film = "the-heiress-returns";
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item(film, 4, "play", 503, "service_unavailable", "slow", 1),
                       granted_item(film, 5, "prefetch", "t5"), granted_item(film, 6, "prefetch", "t6")})));
  if (ending == "flat 400") {
    h.fake->push(fake_step::respond(400, R"({"error":"bad","error_code":"invalid_request"})"));
  } else if (ending == "resets") {
    h.fake->set_default(fake_step::fail(wandura::errc::connection_reset));
  } else if (ending == "flat 503s") {
    h.fake->set_default(fake_step::respond(503, R"({"error":"busy","error_code":"service_unavailable"})"));
  } else if (ending == "unreadable 200s") {
    h.fake->set_default(fake_step::respond(200, "<html>not json</html>"));
  } else {
    h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 9, "play", "t9")})));
  }
  auto const s = h.start(4, 6);
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.prefetch[1].outcome == item_outcome::granted);
  CHECK(s.play.outcome == (ending == "flat 503s" ? item_outcome::unavailable : item_outcome::failed));
  CHECK(s.play.film_ref == film);
  CHECK(s.play.episode_no == 4);
  CHECK_FALSE(s.play.ticket);
  CHECK(s.play.reason.empty()); // nothing of the first answer's 503 is left on it
  CHECK_FALSE(s.play.retry_after);
  CHECK_FALSE(s.play.detail.empty());
  if (ending == "flat 400") {
    CHECK(s.play.error == wandura::errc::http_error);
    CHECK(s.play.status == 400);
    CHECK(s.play.error_code == "invalid_request");
  } else if (ending == "resets") {
    CHECK(s.play.error == wandura::errc::connection_reset);
    CHECK(s.play.status == 0);
  } else if (ending == "unreadable 200s") { // a 2xx without a readable ticket is no grant
    CHECK(s.play.error == wandura::errc::invalid_response);
    CHECK(s.play.status == 200);
  } else if (ending == "flat 503s") { // what a 503 means for an item, as for a prefetch-only request's failure
    CHECK(s.play.outcome == item_outcome::unavailable);
    CHECK(s.play.status == 503);
    CHECK(s.play.error_code == "service_unavailable");
  } else {
    CHECK(s.play.error == wandura::errc::invalid_response);
    CHECK(s.play.error_code == wandura::missing_item_code);
  }
  CHECK(h.api->stats().metrics.call_failures == 0);

  // The prefetches were stored: the same start again sends the play alone.
  auto const attempts_before = h.fake->attempt_count();
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  auto const again = h.start(4, 6);
  CHECK(again.play.outcome == item_outcome::granted);
  CHECK(again.prefetch[0].reused);
  CHECK(again.prefetch[1].reused);
  REQUIRE(h.fake->attempt_count() == attempts_before + 1);
  CHECK(sent_episodes(h.fake->attempts().back().request.body) == std::vector<std::string>{film + "/4/play"});
}

TEST_CASE("client: a 2xx whose items array is empty fails each episode as missing_item, without retrying") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"request_id":"r","items":[]})"));
  auto const s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 1);
  for (auto const* item : {&s.play, &s.prefetch.at(0)}) {
    CHECK(item->outcome == item_outcome::failed);
    CHECK(item->error == wandura::errc::invalid_response);
    CHECK(item->error_code == wandura::missing_item_code);
  }
}

TEST_CASE("client: an unreadable item keeps its place: a bad episode_no is that episode's unreadable_item, and a "
          "2xx item inside a non-2xx answer keeps its viewer allowance") {
  wandura::client_options options;
  options.viewer_tickets_per_minute = 3;
  harness h(options);
  std::string const film = "the-heiress-returns";
  // A whole 503 whose play item says 200 without a readable ticket (the server may have issued it), a prefetch
  // whose episode_no is not a number, and one refused.
  h.fake->push(fake_step::respond(
      503, batch_body({R"({"film_ref":")" + film + R"(","episode_no":4,"intent":"play","status":200})",
                       R"({"film_ref":")" + film + R"(","episode_no":"5","intent":"prefetch","status":503})",
                       refused_item(film, 6, "prefetch", 404, "not_ready")})));
  wandura::call_options once; // the 503 is final: its items are the call's answer
  once.disable_retries = true;
  auto const s = h.start(4, 6, "dev-1", once);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(s.play.outcome == item_outcome::failed);
  CHECK(s.play.error_code == wandura::unreadable_item_code);
  CHECK(s.play.detail.find("without a ticket") != std::string::npos);
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[0].error_code == wandura::unreadable_item_code);
  CHECK(s.prefetch[0].detail == "items[1].episode_no: expected an integer");
  CHECK(s.prefetch[0].episode_no == 5);
  CHECK(s.prefetch[0].film_ref == film);
  CHECK(s.prefetch[1].outcome == item_outcome::not_ready);
  // The play's ticket stays counted (a 2xx item), episode 5's and 6's come back (a 503 and a 404): two of three left.
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 7, "play", "t7")})));
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 8, "play", "t8")})));
  CHECK(h.start(7, 7).play.outcome == item_outcome::granted);
  CHECK(h.start(8, 8).play.outcome == item_outcome::granted);
  CHECK(h.start(9, 9).play.outcome == item_outcome::viewer_limited);
  CHECK(h.fake->attempt_count() == 3);
}

TEST_CASE("client: a truncated 200 batch is retried like a reset and the retry's tickets stand") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"request_id":"req_1","items":[{"film_ref":)"));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto s = h.start(4, 4);
  CHECK(s.play.outcome == item_outcome::granted);
  auto const attempts = h.fake->attempts();
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[0].header("Idempotency-Key") == attempts[1].header("Idempotency-Key"));
  CHECK(attempts[0].request.body == attempts[1].request.body);
}

TEST_CASE("client: an unreadable 200 to a write without a key is final: it may have been executed") {
  wandura::client_options options;
  options.retry.auto_idempotency_keys = false;
  harness h(options);
  h.fake->set_default(fake_step::respond(200, "\xff\xfe not json"));
  try {
    (void)h.start(4, 4);
    FAIL("expected invalid_response");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_response);
    INFO(e.what());
    CHECK(std::string(e.what()).rfind("start_episode: not retried: write without idempotency key: HTTP 200: ", 0) == 0);
    CHECK(e.attempts() == 1);
  }
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: an unreadable 200 to a typed read is retried, and the next readable answer is the result") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":)"));
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
  CHECK(h.run(h.api->get_config()).limit("playback") == 6000);
  CHECK(h.fake->attempt_count() == 2);
  h.fake->set_default(fake_step::respond(200, "<html>proxy</html>"));
  try {
    (void)h.run(h.api->get_config());
    FAIL("expected invalid_response");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_response);
    CHECK(e.attempts() == 4);
    CHECK(std::string(e.what()).find("get_config: retries exhausted after 4 attempts: HTTP 200: invalid response") ==
          0);
  }
}

TEST_CASE("client: an unreadable 200 whose retry would end past the deadline stops as deadline_exceeded and names "
          "the body") {
  // The code says why the call ended (the deadline); the message and error_info keep the last answer.
  harness h;
  h.fake->set_default(fake_step::respond(200, "\xff\xfe not json"));
  wandura::call_options options;
  auto policy = wandura::retry_policy::interactive();
  policy.backoff = wandura::backoff_kind::exponential;
  policy.jitter = 0;
  policy.initial_delay = std::chrono::milliseconds(2000);
  options.policy = policy;
  options.total_timeout = std::chrono::milliseconds(1000);
  try {
    (void)h.start(4, 4, "dev-1", options);
    FAIL("expected deadline_exceeded");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::deadline_exceeded);
    INFO(e.what());
    CHECK(std::string(e.what()).find("HTTP 200: invalid response body") != std::string::npos);
    CHECK(e.info().http_status == 200);
    CHECK(e.attempts() == 1);
  }
}

TEST_CASE("client: an item is retried by the policy's own rule on its status: a 504 play only under STANDARD") {
  for (bool const standard : {false, true}) {
    INFO((standard ? "standard" : "seed 000 interactive"));
    harness h;
    h.fake->push(fake_step::respond(
        200, batch_body({refused_item("the-heiress-returns", 4, "play", 504, "gateway_timeout", {}, 1)})));
    h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
    wandura::call_options options;
    if (standard) {
      options.policy = wandura::retry_policy::standard();
    }
    auto s = h.start(4, 4, "dev-1", options);
    CHECK(h.fake->attempt_count() == (standard ? 2U : 1U));
    CHECK(s.play.outcome == (standard ? item_outcome::granted : item_outcome::unavailable));
  }
}

TEST_CASE("client: with retry_prefetch on, a failed prefetch item is retried alone, with a new key, and granted") {
  // client.hpp: items "needed (play, and prefetch when `retry_prefetch`)" and retryable are retried alone. The play
  // was granted: only the prefetch may be in the retry's request.
  wandura::client_options options;
  options.retry_prefetch = true;
  harness h(options);
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 503, "service_unavailable", {}, 1)})));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 5);
  REQUIRE(h.fake->attempt_count() == 2);
  auto const attempts = h.fake->attempts();
  CHECK(sent_episodes(attempts[1].request.body) == std::vector<std::string>{"the-heiress-returns/5/prefetch"});
  CHECK(attempts[0].header("Idempotency-Key") != attempts[1].header("Idempotency-Key"));
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.prefetch.size() == 1);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.attempts == 2);
}

TEST_CASE("client: a request of prefetches only is retried as a whole only with retry_prefetch on") {
  // The play comes from the store; the request left carries prefetches only and is answered 503 as a whole. Off
  // (the default) it is sent once and reported; on, it is retried like a play's, with the same key.
  bool const retry_prefetch = GENERATE(false, true);
  CAPTURE(retry_prefetch);
  wandura::client_options options;
  options.retry_prefetch = retry_prefetch;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  (void)h.start(4, 4);
  // A non-200 batch carries its items and the flat error fields (docs/protocol.md §1).
  std::string unavailable =
      batch_body({refused_item("the-heiress-returns", 5, "prefetch", 503, "service_unavailable", {}, 1)});
  unavailable.insert(1, R"("error":"try again","error_code":"service_unavailable",)");
  h.fake->push(fake_step::respond(503, unavailable, {{"Retry-After", "1"}}));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto s = h.start(4, 5);
  CHECK(s.play.reused);
  REQUIRE(s.prefetch.size() == 1);
  auto const attempts = h.fake->attempts();
  REQUIRE(attempts.size() == (retry_prefetch ? 3U : 2U));
  CHECK(sent_episodes(attempts[1].request.body) == std::vector<std::string>{"the-heiress-returns/5/prefetch"});
  if (retry_prefetch) {
    CHECK(attempts[2].header("Idempotency-Key") == attempts[1].header("Idempotency-Key"));
    CHECK(s.prefetch[0].outcome == item_outcome::granted);
    CHECK(h.warn_lines.size() == 1);
  } else {
    CHECK(s.prefetch[0].outcome != item_outcome::granted);
    CHECK(h.warn_lines.empty());
  }
}

TEST_CASE("client: call_options::idempotency_key is ignored for reads: nothing validated, no key sent") {
  // call_options.hpp: the key is for writes, "Ignored for reads". An invalid key (a space) would fail a write with
  // invalid_idempotency_key before sending; a read sends as usual, without an Idempotency-Key header, valid key or
  // not, retries included.
  auto const key = GENERATE(as<std::string>{}, "order-20261008-0001", "not valid", "");
  CAPTURE(key);
  harness h;
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->set_default(fake_step::respond(200, R"({"videos":[]})"));
  wandura::call_options options;
  options.idempotency_key = key;
  auto const videos = h.run(h.api->list_videos(options));
  CHECK(videos.empty());
  auto const attempts = h.fake->attempts();
  REQUIRE(attempts.size() == 2);
  for (auto const& a : attempts) {
    CHECK(a.request.method == wandura::http_method::get);
    CHECK(a.header("Idempotency-Key").empty());
  }
  // The same key on a write is validated and sent (or refused): the read really ignored it.
  if (key == "order-20261008-0001") {
    h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
    (void)h.start(4, 4, "dev-1", options);
    CHECK(h.fake->attempts().back().header("Idempotency-Key") == key);
  } else {
    CHECK_THROWS_MATCHES(h.start(4, 4, "dev-1", options), wandura::error,
                         Catch::Predicate<wandura::error>([](wandura::error const& e) {
                           return e.code() == wandura::errc::invalid_idempotency_key;
                         }));
    CHECK(h.fake->attempt_count() == 2);
  }
}

TEST_CASE("client: a Retry-After longer than the default deadline ends the call at once as deadline_exceeded, with "
          "the last answer") {
  // issue_tickets @throws: deadline_exceeded when "the retries stopped for the deadline ... whatever the last answer
  // was; the message names it". Default options: INTERACTIVE's 15 s deadline, and a server asking for 60 s. Waiting
  // 15 s for a retry that cannot be made helps no viewer: the call ends without the clock moving.
  int const status = GENERATE(429, 503);
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(status, call);
  harness h;
  h.fake->push(fake_step::respond(status, R"({"error_code":"busy","request_id":"req_9"})", {{"Retry-After", "60"}}));
  h.fake->set_default(fake_step::respond(500, "{}")); // never reached
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  try {
    if (call == "issue_tickets") {
      (void)h.run(h.api->issue_tickets(batch));
    } else {
      (void)h.run(h.api->get_config());
    }
    FAIL("expected deadline_exceeded");
  } catch (wandura::error const& e) {
    INFO(e.what());
    CHECK(e.code() == wandura::errc::deadline_exceeded);
    CHECK(e.attempts() == 1);
    CHECK(e.info().http_status == status);
    CHECK(std::string(e.what()).rfind(call + ": deadline of 15000 ms reached", 0) == 0);
    CHECK(std::string(e.what()).find("HTTP " + std::to_string(status)) != std::string::npos);
  }
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.clock->elapsed() == 0ms);
  CHECK(h.clock->pending_sleeps() == 0);
}

TEST_CASE("client: a play item whose retry_after outlasts the deadline is reported as answered, without a wait") {
  // issue_tickets: per-item retries are made "within the same deadline"; a follow-up that cannot be made leaves the
  // 2xx as the result. The item keeps what the server said, and no exception is thrown for one item's failure.
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 60),
                       granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  h.fake->set_default(fake_step::respond(500, "{}")); // never reached
  auto const s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(s.attempts == 1);
  CHECK(s.play.outcome != item_outcome::granted);
  CHECK(s.play.status == 503);
  CHECK(s.play.retry_after == std::chrono::seconds(60));
  REQUIRE(s.prefetch.size() == 1);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(h.clock->elapsed() == 0ms);
  CHECK(h.warn_lines.empty());
}

TEST_CASE("client: an automatic idempotency key is reused on every retry of a request and never across calls") {
  // issue_tickets, Retries and idempotency: "one automatic key per request (reused on every retry of that request)".
  // Two identical calls one after the other are two requests: a server that saw the first key again would replay
  // the first call's answer instead of issuing. No viewer_ref, so nothing is reused from the store.
  harness h;
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  for (int call = 0; call < 2; ++call) {
    h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
    h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
    auto const r = h.run(h.api->issue_tickets(batch));
    CHECK(r.items[0].outcome == item_outcome::granted);
  }
  auto const attempts = h.fake->attempts();
  REQUIRE(attempts.size() == 4);
  auto const key = [&](std::size_t i) { return attempts[i].header("Idempotency-Key"); };
  CHECK(key(0).size() == wandura::auto_idempotency_key_length);
  CHECK(key(1) == key(0));
  CHECK(key(2).size() == wandura::auto_idempotency_key_length);
  CHECK(key(3) == key(2));
  CHECK(key(2) != key(0));
  CHECK(attempts[1].request.body == attempts[0].request.body);
  CHECK(attempts[2].request.body == attempts[0].request.body); // same bytes, another key: a new request
}

TEST_CASE("client: a caller's key of 1 or 200 visible characters is sent on every retry, and 0, 201 or a space is "
          "refused before sending") {
  // call_options::idempotency_key: "1-200 characters 0x21-0x7E, else the call fails with
  // errc::invalid_idempotency_key (90010) and nothing is sent"; issue_tickets: the caller's key is used for the first
  // request, reused on its retries.
  harness h;
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  for (std::string const& key : {std::string("k"), std::string(wandura::max_idempotency_key_length, '~')}) {
    CAPTURE(key.size());
    auto const before = h.fake->attempt_count();
    h.fake->push(fake_step::respond(502, R"({"error_code":"bad_gateway"})"));
    h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
    wandura::call_options options;
    options.idempotency_key = key;
    auto const r = h.run(h.api->issue_tickets(batch, options));
    CHECK(r.items[0].outcome == item_outcome::granted);
    auto const attempts = h.fake->attempts();
    REQUIRE(attempts.size() == before + 2);
    CHECK(attempts[before].header("Idempotency-Key") == key);
    CHECK(attempts[before + 1].header("Idempotency-Key") == key);
  }
  auto const sent = h.fake->attempt_count();
  for (std::string const& key :
       {std::string(), std::string(wandura::max_idempotency_key_length + 1, 'a'), std::string("order 1")}) {
    CAPTURE(key);
    wandura::call_options options;
    options.idempotency_key = key;
    try {
      (void)h.run(h.api->issue_tickets(batch, options));
      FAIL("expected invalid_idempotency_key");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_idempotency_key);
      CHECK(e.attempts() == 0);
    }
  }
  CHECK(h.fake->attempt_count() == sent);
}

TEST_CASE("client: an invalid caller key is refused when the store or the viewer limit would answer every episode "
          "too") {
  // call_options::idempotency_key: an invalid key fails the call with invalid_idempotency_key. It was checked only
  // by the retry engine: a start answered wholly from the ticket store, or refused wholly by the per-viewer limit,
  // sent nothing and succeeded with the same key (a soak trial: 17 of 154 such calls returned a ticket).
  bool const from_store = GENERATE(true, false);
  CAPTURE(from_store);
  wandura::client_options client_options;
  client_options.viewer_tickets_per_minute = 1;
  harness h(client_options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  REQUIRE(h.start(4, 4).play.outcome == item_outcome::granted); // stored; the viewer's ticket of the minute taken
  int const episode = from_store ? 4 : 5;                       // 4: in the store; 5: refused by the limit
  REQUIRE(h.start(episode, episode).play.outcome ==
          (from_store ? item_outcome::granted : item_outcome::viewer_limited));
  REQUIRE(h.fake->attempt_count() == 1);
  wandura::call_options options;
  options.idempotency_key = "has space";
  try {
    (void)h.start(episode, episode, "dev-1", options);
    FAIL("expected invalid_idempotency_key");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_idempotency_key);
    CHECK(e.attempts() == 0);
    CHECK_THAT(e.what(), Catch::Contains("start_episode: the idempotency key must be 1-200 characters 0x21-0x7E"));
  }
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("client: a per-viewer limit at the largest viewer_tickets_per_minute lets every episode through") {
  // client_options::viewer_tickets_per_minute: 0 is refused, any other value is a rate; its largest value is a rate
  // too, not a wrapped-around small one.
  wandura::client_options options;
  options.viewer_tickets_per_minute = std::numeric_limits<std::uint32_t>::max();
  harness h(options);
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                          granted_item("the-heiress-returns", 5, "prefetch", "t5"),
                                                          granted_item("the-heiress-returns", 6, "prefetch", "t6")})));
  for (int device = 0; device < 20; ++device) { // fresh devices: nothing reused, three tickets taken each time
    auto const s = h.start(4, 6, "dev-" + std::to_string(device));
    CHECK(s.play.outcome == item_outcome::granted);
    for (auto const& prefetch : s.prefetch) {
      CHECK(prefetch.outcome == item_outcome::granted);
    }
  }
  CHECK(h.fake->attempt_count() == 20);
  CHECK(h.api->stats().metrics.outcome(item_outcome::viewer_limited) == 0);
}

TEST_CASE("client: each invalid batch field is refused with invalid_argument before anything is sent") {
  // issue_tickets @throws invalid_argument, "nothing sent": more than 3 episodes, empty union_info, drm_kek or
  // film_ref, episode_no < 1, invalid UTF-8, an episode named twice. start_episode throws as issue_tickets.
  auto const what =
      GENERATE(as<std::string>{}, "empty drm_kek", "empty film_ref", "episode 0", "episode -1", "film_ref not UTF-8",
               "union_info not UTF-8", "viewer_ref not UTF-8", "episode named twice");
  CAPTURE(what);
  wandura::client_options options;
  options.viewer_tickets_per_minute = 3; // nothing may be taken for a batch that is refused
  harness h(options);
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "dev";
  batch.drm_kek = "kek";
  batch.viewer_ref = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";
  if (what == "empty drm_kek") {
    batch.drm_kek.clear();
  } else if (what == "empty film_ref") {
    batch.episodes[0].film_ref.clear();
  } else if (what == "episode 0") {
    batch.episodes[0].episode_no = 0;
  } else if (what == "episode -1") {
    batch.episodes[0].episode_no = -1;
  } else if (what == "film_ref not UTF-8") {
    batch.episodes[0].film_ref = "the-heiress\xff";
  } else if (what == "union_info not UTF-8") {
    batch.union_info = "dev\xc3";
  } else if (what == "episode named twice") {
    batch.episodes.push_back(batch.episodes[0]); // the server would issue, and count, a ticket for each
  } else {
    batch.viewer_ref = "viewer\xed\xa0\x80"; // an encoded surrogate is not UTF-8
  }
  try {
    (void)h.run(h.api->issue_tickets(batch));
    FAIL("expected invalid_argument");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    CHECK(e.attempts() == 0);
  }
  if (what == "episode 0" || what == "episode -1" || what == "empty drm_kek" || what == "union_info not UTF-8") {
    wandura::viewer v{batch.viewer_ref.value_or(""), batch.union_info, batch.drm_kek};
    auto const& episode = batch.episodes[0];
    CHECK_THROWS_MATCHES(h.run(h.api->start_episode(v, episode.film_ref, episode.episode_no, 6)), wandura::error,
                         Catch::Predicate<wandura::error>(
                             [](wandura::error const& e) { return e.code() == wandura::errc::invalid_argument; }));
  }
  CHECK(h.fake->attempt_count() == 0);
  // The viewer's allowance is whole: a valid start of three episodes is sent whole.
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                   granted_item("the-heiress-returns", 5, "prefetch", "t5"),
                                                   granted_item("the-heiress-returns", 6, "prefetch", "t6")})));
  auto const s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  for (auto const& prefetch : s.prefetch) {
    CHECK(prefetch.outcome == item_outcome::granted);
  }
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK(sent_episodes(h.fake->attempts()[0].request.body).size() == 3);
}

TEST_CASE(
    "client: a total_timeout of 0 ends the call before any attempt, and an attempt_timeout of 0 leaves the deadline "
    "as the only limit") {
  SECTION("total_timeout 0") {
    harness h;
    wandura::call_options options;
    options.total_timeout = std::chrono::milliseconds(0);
    try {
      (void)h.run(h.api->get_config(options));
      FAIL("get_config succeeded");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::deadline_exceeded);
      CHECK(e.attempts() == 0);
    }
    CHECK(h.fake->attempt_count() == 0);
  }
  SECTION("attempt_timeout 0") {
    harness h;
    wandura::call_options options;
    options.attempt_timeout = std::chrono::milliseconds(0);
    options.total_timeout = std::chrono::milliseconds(20'000);
    h.fake->push(fake_step::respond(404, R"({"error_code":"not_found"})"));
    CHECK_THROWS(h.run(h.api->get_config(options)));
    REQUIRE(h.fake->attempt_count() == 1);
    CHECK(h.fake->attempts().front().options.timeout == std::chrono::milliseconds(20'000));
  }
}

TEST_CASE("client: when the play came from the store, a failed request of prefetches fails the prefetches only") {
  harness h; // the default options: coalescing and ticket reuse on
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  REQUIRE(h.start(4, 4).play.outcome == item_outcome::granted);

  SECTION("a 503 without items (a proxy's): each prefetch is what a 503 means for an item") {
    h.fake->push(fake_step::respond(503, "<html>Service Unavailable</html>"));
    auto const s = h.start(4, 6);
    REQUIRE(h.fake->attempt_count() == 2);
    CHECK(sent_episodes(h.fake->attempts()[1].request.body) ==
          std::vector<std::string>{"the-heiress-returns/5/prefetch", "the-heiress-returns/6/prefetch"});
    CHECK(s.play.outcome == item_outcome::granted);
    CHECK(s.play.reused);
    REQUIRE(s.play.ticket);
    CHECK(s.play.ticket->ticket_id == "t4");
    REQUIRE(s.prefetch.size() == 2);
    for (auto const& item : s.prefetch) {
      CHECK(item.outcome == item_outcome::unavailable);
      CHECK(item.status == 503);
      CHECK(item.episode_no >= 5);
    }
  }
  SECTION("no response at all: each prefetch is failed with the transport's code") {
    h.fake->push(fake_step::fail(wandura::errc::connection_reset));
    auto const s = h.start(4, 5);
    CHECK(s.play.outcome == item_outcome::granted);
    REQUIRE(s.prefetch.size() == 1);
    CHECK(s.prefetch[0].outcome == item_outcome::failed);
    CHECK(s.prefetch[0].error == wandura::errc::connection_reset);
    CHECK(s.prefetch[0].status == 0);
  }
  SECTION("the same failure throws when the request carries the play") {
    h.fake->push(fake_step::respond(503, "<html>Service Unavailable</html>"));
    wandura::call_options no_retries;
    no_retries.disable_retries = true;
    CHECK_THROWS_AS(h.start(7, 9, "dev-1", no_retries), wandura::error);
  }
}

TEST_CASE("client: while the playback counter is congested, prefetches left after a stored play are not sent") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  REQUIRE(h.start(4, 4).play.outcome == item_outcome::granted);
  // Another play refused for rate, not retried: the counter is held for 1 s, then congested (paced) until calm.
  wandura::call_options no_retries;
  no_retries.disable_retries = true;
  h.fake->push(
      fake_step::respond(429, batch_body({refused_item("the-heiress-returns", 9, "play", 429, "rate_limited", {}, 1)}),
                         {{"Retry-After", "1"}}));
  REQUIRE(h.start(9, 9, "dev-1", no_retries).play.outcome == item_outcome::rate_limited);
  h.clock->advance(2s); // past the hold-off, within the calm period
  REQUIRE(h.api->metrics_text().find("wandura_gate_congested{counter=\"playback\"} 1") != std::string::npos);

  auto const s = h.start(4, 6);
  CHECK(h.fake->attempt_count() == 2); // nothing sent for the prefetches
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.play.reused);
  REQUIRE(s.prefetch.size() == 2);
  for (auto const& item : s.prefetch) {
    CHECK(item.outcome == item_outcome::deferred);
    CHECK(item.status == 0);
    CHECK(item.error_code.empty());
  }
}

TEST_CASE("client: a 429 the gate reads as prefetches shed does not make a play's retry skip its Retry-After") {
  harness h;
  // A play-only request refused as a whole with reason prefetch_shed (no items): the counter still grants plays,
  // so the gate holds nothing; the retry waits the Retry-After itself.
  h.fake->push(fake_step::respond(429,
                                  R"({"error":"shed","error_code":"rate_limited","reason":"prefetch_shed","items":[]})",
                                  {{"Retry-After", "2"}}));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto const before = h.clock->now();
  auto const s = h.start(4, 4);
  REQUIRE(h.fake->attempt_count() == 2);
  CHECK(h.clock->now() - before >= 2000ms);
  CHECK(s.play.outcome == item_outcome::granted);
}

TEST_CASE("client: with automatic keys off, items that failed in a 2xx are not asked for again") {
  wandura::client_options options;
  options.retry.auto_idempotency_keys = false;
  harness h(options);
  h.fake->push(fake_step::respond(
      200, batch_body({refused_item("the-heiress-returns", 4, "play", 503, "service_unavailable", {}, 1),
                       granted_item("the-heiress-returns", 5, "prefetch", "t5")})));
  auto const s = h.start(4, 5);
  CHECK(h.fake->attempt_count() == 1); // the write has no key: no second request
  CHECK(h.fake->attempts()[0].header("Idempotency-Key").empty());
  CHECK(s.play.outcome == item_outcome::unavailable);
  REQUIRE(s.prefetch.size() == 1);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.attempts == 1);
  CHECK(h.api->stats().engine.retries == 0);
}
