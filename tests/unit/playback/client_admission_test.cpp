// The admission gate on the client's request path: what a viewer's calls see while the playback counter is short
// of room (docs/adr/0006). Hand-stepped clock and scripted responses: zero real time.
#include "wandura/playback/client.hpp"

#include <catch2/catch.hpp>

#include "client_harness.hpp"
#include "wandura/error.hpp"

namespace {

using namespace std::chrono_literals;
using wandura::item_outcome;
using wandura::testing::fake_step;
using namespace client_harness;

/// A 429 for one play item: the counter refills 60 tickets a minute, room returns in `retry_after_s`.
fake_step play_refused(int episode, int retry_after_s) {
  return fake_step::respond(
      429, batch_body({refused_item("the-heiress-returns", episode, "play", 429, "rate_limited", {}, retry_after_s)}),
      {{"Retry-After", std::to_string(retry_after_s)}, {"X-RateLimit-Limit", "60"}, {"X-RateLimit-Window", "60"}});
}

fake_step play_granted(int episode, std::string id) {
  return fake_step::respond(200, batch_body({granted_item("the-heiress-returns", episode, "play", std::move(id))}));
}

} // namespace

TEST_CASE("admission: prefetches are shed without a request while the counter is under its reserve") {
  harness h;
  // The server sheds episode 5 and says the counter is back above its reserve in 4 s.
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed", 4)})));
  auto first = h.start(4, 5);
  REQUIRE(first.prefetch.size() == 1);
  CHECK(first.prefetch[0].outcome == item_outcome::shed);
  CHECK(first.prefetch[0].status == 429); // the server's answer

  // Within those 4 s the client answers prefetches itself: only the play is sent.
  h.fake->push(play_granted(7, "t7"));
  auto second = h.start(7, 9, "dev-2");
  REQUIRE(h.fake->attempt_count() == 2);
  CHECK(sent_episodes(h.fake->attempts()[1].request.body) == std::vector<std::string>{"the-heiress-returns/7/play"});
  CHECK(second.play.outcome == item_outcome::granted);
  REQUIRE(second.prefetch.size() == 2);
  for (auto const& p : second.prefetch) {
    CHECK(p.outcome == item_outcome::shed);
    CHECK(p.status == 0); // never sent
    CHECK(p.reason == "prefetch_shed");
  }
  // A batch of prefetches only sends nothing at all.
  wandura::ticket_batch only_prefetch;
  only_prefetch.union_info = "dev-3";
  only_prefetch.drm_kek = "kek";
  only_prefetch.episodes.push_back({"the-heiress-returns", 8, wandura::intent::prefetch});
  auto third = h.run(h.api->issue_tickets(only_prefetch));
  CHECK(h.fake->attempt_count() == 2);
  CHECK(third.items.at(0).outcome == item_outcome::shed);
  CHECK(third.attempts == 0);

  // Once the reserve is back, prefetches go again.
  h.clock->advance(4s);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 10, "play", "t10"),
                                                   granted_item("the-heiress-returns", 11, "prefetch", "t11")})));
  auto fourth = h.start(10, 11, "dev-4");
  CHECK(sent_episodes(h.fake->attempts()[2].request.body) ==
        std::vector<std::string>{"the-heiress-returns/10/play", "the-heiress-returns/11/prefetch"});
  CHECK(fourth.prefetch.at(0).outcome == item_outcome::granted);
}

TEST_CASE("admission: a play refused for rate is retried in its turn at the gate, with no sleep of its own") {
  harness h;
  h.fake->push(play_refused(4, 2));
  h.fake->push(play_granted(4, "t4"));
  auto const before = h.clock->now();
  auto s = h.start(4, 4);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.attempts == 2);
  // Retry-After 2 s held the counter; the retry went when the hold ended, without the backoff's jitter on top.
  CHECK(h.clock->now() - before == 2s);
  REQUIRE(h.warn_lines.size() == 1);
  CHECK(h.warn_lines[0] == "retry 1/3 in 2000 ms: HTTP 429 (POST /v1/playback/tickets on 127.0.0.1:1)");
  auto const stats = h.api->stats();
  CHECK(stats.engine.retries == 1);
  CHECK(stats.engine.budget_denied == 0);
  CHECK(h.api->metrics_text().find("wandura_gate_") != std::string::npos);
}

TEST_CASE("admission: calls queued behind the counter go one per refill, and one past its deadline fails saying so") {
  harness h;
  h.fake->push(play_refused(1, 1)); // limit 60/min: one ticket a second once the 1 s hold ends
  wandura::call_options once;
  once.disable_retries = true;
  CHECK(h.start(1, 1, "dev-0", once).play.outcome == item_outcome::rate_limited);
  h.fake->set_default(play_granted(2, "t2"));

  // Three plays arrive together; the third may wait 2.5 s at most.
  std::vector<wandura::clock::time_point> sent_at;
  std::optional<wandura::error> third_error;
  int done = 0;
  auto start_at = h.clock->now();
  for (int i = 0; i < 3; ++i) {
    wandura::call_options o;
    if (i == 2) {
      o.total_timeout = 2500ms;
    }
    wandura::viewer v{"viewer-" + std::to_string(i), "dev-" + std::to_string(i + 1), "kek"};
    asio::co_spawn(h.io, h.api->start_episode(v, "the-heiress-returns", 2, 2, o),
                   [&, i](std::exception_ptr e, wandura::episode_start) {
                     ++done;
                     if (e) {
                       try {
                         std::rethrow_exception(e);
                       } catch (wandura::error const& err) {
                         CHECK(i == 2);
                         third_error = err;
                       }
                     } else {
                       sent_at.push_back(h.clock->now());
                     }
                   });
  }
  for (int i = 0; i < 1000 && done < 3; ++i) {
    h.io.restart();
    h.io.poll();
    if (done < 3) {
      h.clock->advance_to_next_wakeup();
    }
  }
  REQUIRE(done == 3);
  REQUIRE(sent_at.size() == 2);
  CHECK(sent_at[0] - start_at == 1s); // the hold-off's end
  CHECK(sent_at[1] - start_at >= 2s); // one refill later (to the microsecond the gate rounds up to), not together
  CHECK(sent_at[1] - start_at < 2001ms);
  REQUIRE(third_error.has_value());
  // Held back by the rate limit, nothing sent: matched as rate_limited, not as a timeout (error.hpp).
  CHECK(third_error->code() == wandura::errc::rate_limited);
  CHECK(third_error->code() == wandura::condition::rate_limited);
  CHECK_FALSE(third_error->code() == wandura::condition::timeout);
  CHECK(third_error->attempts() == 0);
  CHECK(std::string(third_error->what()) ==
        "start_episode: deadline of 2500 ms reached before any attempt (queued behind the playback counter's limit "
        "for 1500 ms; not sent in the deadline's last 1000 ms) (POST /v1/playback/tickets on 127.0.0.1:1)");
  CHECK(h.fake->attempt_count() == 3); // the 429, then one request per released play
  // held_off counts the requests sent after queuing at the gate: the two released, not the one that left at its
  // deadline (the gate's own deadline_exceeded counts that one).
  CHECK(h.api->stats().metrics.held_off == 2);
  CHECK(h.api->metrics_text().find("wandura_held_off_total 2\n") != std::string::npos);
}

TEST_CASE("telemetry: a failed call and each of its attempts are in metrics_text under the OpenTelemetry names") {
  harness h;
  h.fake->set_default(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  CHECK_THROWS_AS(h.run(h.api->get_config()), wandura::error);
  CHECK(h.fake->attempt_count() == 4);
  auto const text = h.api->metrics_text();
  INFO(text);
  // The logical call, failed, with its operation.
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"get_config\"") != std::string::npos);
  // Every attempt, with the HTTP status and how many times the request was sent before.
  CHECK(text.find("http_client_request_duration_seconds_count{") != std::string::npos);
  CHECK(text.find("http_response_status_code=\"503\"") != std::string::npos);
  CHECK(text.find("wandura_http_client_attempts_total") != std::string::npos);
}

TEST_CASE("admission: a prefetch refused for rate is a shed, not the counter running out") {
  harness h;
  // No "prefetch_shed" reason: the server refused the prefetch first for lack of room, and granted the play.
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", {}, 3)})));
  auto s = h.start(4, 5);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch.at(0).outcome == item_outcome::shed);
  auto& gate = h.api->engine().gate();
  CHECK(gate.held_until("playback") <= h.clock->now()); // plays are not held back...
  CHECK(gate.under_reserve("playback"));                // ...prefetches are, for the 3 s the item said
  for (auto const& c : gate.stats()) {
    if (c.counter == "playback") {
      CHECK(c.decreases == 0);
    }
  }
}

TEST_CASE("admission: the limits of GET /v1/config are kept only for counter names, so metrics_text stays "
          "well formed whatever the server names") {
  harness h;
  // JSON escapes make a quote, a backslash, a newline and a space in the names the server keys its limits by.
  h.fake->push(
      fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000,"catalog\"} 1\nwandura_fake 9":600,)"
                              R"("a\\b":5,"with space":5,"":5,"video.v2:read-x_1":120}})"));
  auto const config = h.run(h.api->get_config());
  CHECK(config.limits.size() == 6); // the call answers what the server said, every limit
  std::vector<std::string> tracked;
  for (auto const& s : h.api->engine().gate().stats()) {
    tracked.push_back(s.counter);
  }
  // The protocol's six counters from the start, and the one new name that is a counter name.
  CHECK(tracked ==
        std::vector<std::string>{"playback", "catalog", "creatives", "videos", "video", "config", "video.v2:read-x_1"});
  for (auto const& s : h.api->engine().gate().stats()) {
    if (s.counter == "playback") {
      CHECK(s.limit == 6000);
    }
  }
  auto const text = h.api->metrics_text();
  INFO(text);
  CHECK(text.find("wandura_fake") == std::string::npos);
  // Every line is a comment or `name{labels} value` with a label set that closes before the value.
  std::size_t start = 0;
  while (start < text.size()) {
    auto const end = text.find('\n', start);
    REQUIRE(end != std::string::npos);
    std::string_view const line(text.data() + start, end - start);
    start = end + 1;
    if (line.starts_with('#')) {
      continue;
    }
    auto const space = line.rfind(' ');
    REQUIRE(space != std::string_view::npos);
    auto const series = line.substr(0, space);
    CHECK((series.find('{') == std::string_view::npos || series.ends_with('}')));
    CHECK(series.find(' ') == std::string_view::npos);
    CHECK(series.find('\\') == std::string_view::npos);
  }
}
