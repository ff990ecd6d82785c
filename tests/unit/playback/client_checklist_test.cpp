// Seed 000's checklist ("Danh sách kiểm tra"), item by item, against wandura::client on a fake transport.
#include "wandura/playback/client.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include <catch2/catch.hpp>

#include "client_harness.hpp"
#include "wandura/playback/viewer_ref.hpp"

using namespace std::chrono_literals;
using namespace client_harness;
using wandura::item_outcome;

namespace {
/// The wall time `from_now` after the client's clock's, as RFC 3339 (the ticket store reads the client's clock).
std::string rfc3339_in(wandura::clock const& clock, std::chrono::seconds from_now) {
  auto const t = std::chrono::system_clock::to_time_t(clock.system_now() + from_now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}
} // namespace

TEST_CASE("seed 000 checklist 1: starting an episode sends one request, play for it and prefetch for unlocked ones") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 11, "play", "t11"),
                                                   granted_item("the-heiress-returns", 12, "prefetch", "t12")})));
  auto s = h.start(11, 12); // 13 is not unlocked
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK(sent_episodes(h.fake->attempts()[0].request.body) ==
        std::vector<std::string>{"the-heiress-returns/11/play", "the-heiress-returns/12/prefetch"});
  CHECK(s.prefetch.size() == 1);
}

TEST_CASE(
    "seed 000 checklist 2: tickets are reused per viewer, device, episode and intent, until 5 min before expiry") {
  harness h;
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  (void)h.start(4, 0);
  CHECK(h.start(4, 0).play.reused); // same viewer, device, episode, intent
  CHECK(h.fake->attempt_count() == 1);
  (void)h.start(4, 0, "another-device"); // never across devices
  CHECK(h.fake->attempt_count() == 2);

  // A ticket with 4 minutes left is inside the 5-minute margin: never reused.
  harness soon;
  soon.fake->set_default(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4", false, rfc3339_in(*soon.clock, 240s))})));
  (void)soon.start(4, 0);
  CHECK_FALSE(soon.start(4, 0).play.reused);
  CHECK(soon.fake->attempt_count() == 2);

  // With 6 minutes left it is reused, until the client's clock has moved past the margin.
  harness later;
  later.fake->set_default(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4", false, rfc3339_in(*later.clock, 360s))})));
  (void)later.start(4, 0);
  CHECK(later.start(4, 0).play.reused);
  later.clock->advance(61s);
  CHECK_FALSE(later.start(4, 0).play.reused);
  CHECK(later.fake->attempt_count() == 2);
}

TEST_CASE("seed 000 checklist 3: viewer_ref is stable per viewer and device and carries no personal data") {
  auto const a = wandura::make_viewer_ref("secret", "user-42@example.com", "install-1");
  CHECK(a == wandura::make_viewer_ref("secret", "user-42@example.com", "install-1"));
  CHECK(a != wandura::make_viewer_ref("secret", "user-42@example.com", "install-2"));
  CHECK(a.size() == 22 + 1 + 11);
  CHECK(a.find("user") == std::string::npos);
  CHECK(a.find("example") == std::string::npos);
}

TEST_CASE("seed 000 checklist 4: 429 and 503 wait Retry-After plus jitter, without it, full jitter under the cap") {
  harness h; // random source fixed at 0.5
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "2"}}));
  h.fake->push(fake_step::respond(429, R"({"error_code":"rate_limited"})"));
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 1, "play", "t1")})));
  auto s = h.start(1, 1);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(h.warn_lines.size() == 2);
  // 2 s + 0.5 * 1 s, then 0.5 * min(8 s, 500 ms * 2)
  CHECK(h.warn_lines[0] ==
        "retry 1/3 in 2500 ms: HTTP 503 code=service_unavailable (POST /v1/playback/tickets on 127.0.0.1:1)");
  CHECK(h.warn_lines[1] ==
        "retry 2/3 in 500 ms: HTTP 429 code=rate_limited (POST /v1/playback/tickets on 127.0.0.1:1)");
}

TEST_CASE("seed 000 checklist 5: at most 3 retries for an interactive request, and the 10 % budget") {
  harness h;
  h.fake->set_default(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  CHECK_THROWS_AS(h.start(1, 1), wandura::error);
  CHECK(h.fake->attempt_count() == 4);
  // The budget allows at least 10 retries a minute; with 1 request noted, the 11th retry is refused.
  auto& budget = h.api->engine().budget();
  int allowed = 0;
  for (int i = 0; i < 20; ++i) {
    allowed += budget.try_retry(h.clock->now()) ? 1 : 0;
  }
  CHECK(allowed == 10 - 3); // 3 were spent by the call above
}

TEST_CASE("seed 000 checklist 6: ticket requests never use a client timeout under 5 seconds") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 1, "play", "t1")})));
  wandura::call_options hasty;
  hasty.attempt_timeout = 1000ms;
  (void)h.start(1, 1, "dev-1", hasty);
  CHECK(h.fake->attempts()[0].options.timeout >= 5000ms);
}

TEST_CASE("seed 000 checklist 7: a refused prefetch has no visible effect and never stops the current episode") {
  harness h;
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed", 2),
                       refused_item("the-heiress-returns", 6, "prefetch", 503, "service_unavailable", {}, 1)})));
  auto s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch[0].outcome == item_outcome::shed);
  CHECK(s.prefetch[0].error == std::error_code{});
  CHECK(s.prefetch[1].outcome == item_outcome::unavailable);
  CHECK(h.fake->attempt_count() == 1); // nothing retried on the prefetches' account
  CHECK(h.warn_lines.empty());
}
