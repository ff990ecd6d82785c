// SPEC §1 "Idempotency" (seed 004 semantics) over real sockets, with the manual clock for the 24 h memory.
#include "wandura/emulator/emulator.hpp"

#include "http_test_client.hpp"

#include <catch2/catch.hpp>

using namespace wandura::emulator;
using std::chrono::seconds;
using wandura::testing::batch_body;
using wandura::testing::http_test_client;
using wandura::testing::play;

namespace {

std::unique_ptr<server> start_manual(std::uint32_t playback = 100) {
  config cfg;
  cfg.manual_clock = true;
  cfg.overshoot = 0;
  cfg.orgs[0].limits.playback = playback;
  cfg.orgs.push_back(organisation{"org_other", {"other-key"}, limits{}});
  return server::start(cfg);
}

} // namespace

TEST_CASE("idempotency: a repeat with the same key and body replays the first result and counts once") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto body = batch_body({{"the-heiress-returns", 1, "play"}, {"the-heiress-returns", 2, "prefetch"}});
  auto first = c.tickets(body, "test-key", "order-1");
  REQUIRE(first.status == 200);
  CHECK_FALSE(first.has_header("idempotency-replayed"));
  auto second = c.tickets(body, "test-key", "order-1");
  REQUIRE(second.status == 200);
  CHECK(second.header("idempotency-replayed") == "true");
  CHECK(second.body == first.body);
  auto s = emu->stats();
  CHECK(s.tickets_counted == 2);
  CHECK(s.idempotent_replays == 1);
  // Without a key the same body executes again.
  REQUIRE(c.tickets(body).status == 200);
  CHECK(emu->stats().tickets_counted == 4);
}

TEST_CASE("idempotency: the same JSON value with other key order and white space is the same body") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto a =
      R"({"episodes":[{"film_ref":"the-heiress-returns","episode_no":1,"intent":"play"}],"union_info":"d","drm_kek":"k"})";
  auto b = R"( { "drm_kek" : "k", "union_info":"d",
                 "episodes" : [ {"intent":"play", "episode_no":1, "film_ref":"the-heiress-returns"} ] } )";
  REQUIRE(c.tickets(a, "test-key", "k-1").status == 200);
  auto replay = c.tickets(b, "test-key", "k-1");
  CHECK(replay.status == 200);
  CHECK(replay.header("idempotency-replayed") == "true");
  CHECK(emu->stats().tickets_counted == 1);
}

TEST_CASE("idempotency: the same key with another body is 409 idempotency_conflict") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  REQUIRE(c.tickets(play(1), "test-key", "k-1").status == 200);
  auto conflict = c.tickets(play(2), "test-key", "k-1");
  CHECK(conflict.status == 409);
  CHECK(conflict.json()["error_code"] == "idempotency_conflict");
  CHECK(emu->stats().tickets_counted == 1);
}

TEST_CASE("idempotency: keys are scoped to the organisation") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  REQUIRE(c.tickets(play(1), "test-key", "shared").status == 200);
  auto other = c.tickets(play(2), "other-key", "shared");
  CHECK(other.status == 200);
  CHECK_FALSE(other.has_header("idempotency-replayed"));
}

TEST_CASE("idempotency: a first attempt that failed releases the key and a repeat executes afresh") {
  auto emu = start_manual(3);
  http_test_client c(emu->port());
  REQUIRE(c.tickets(batch_body({{"the-heiress-returns", 1, "play"},
                                {"the-heiress-returns", 2, "play"},
                                {"the-heiress-returns", 3, "play"}}))
              .status == 200);
  auto refused = c.tickets(play(4), "test-key", "retry-me");
  REQUIRE(refused.status == 429);
  emu->advance_clock(seconds(20)); // one ticket back (3/min)
  auto again = c.tickets(play(4), "test-key", "retry-me");
  CHECK(again.status == 200);
  CHECK_FALSE(again.has_header("idempotency-replayed"));
  // Now it succeeded, the key is held: a repeat replays.
  CHECK(c.tickets(play(4), "test-key", "retry-me").header("idempotency-replayed") == "true");
  CHECK(emu->stats().tickets_counted == 4);
}

TEST_CASE("idempotency: a final client error is kept, not released") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto first = c.tickets(play(13), "test-key", "nr"); // not_ready
  REQUIRE(first.status == 404);
  auto second = c.tickets(play(13), "test-key", "nr");
  CHECK(second.status == 404);
  CHECK(second.header("idempotency-replayed") == "true");
}

TEST_CASE("idempotency: keys are remembered for 24 hours") {
  auto emu = start_manual(100000);
  http_test_client c(emu->port());
  REQUIRE(c.tickets(play(1), "test-key", "day-key").status == 200);
  emu->advance_clock(std::chrono::hours(24) - seconds(1));
  CHECK(c.tickets(play(1), "test-key", "day-key").header("idempotency-replayed") == "true");
  emu->advance_clock(seconds(2));
  auto fresh = c.tickets(play(1), "test-key", "day-key");
  CHECK(fresh.status == 200);
  CHECK_FALSE(fresh.has_header("idempotency-replayed"));
  CHECK(emu->stats().tickets_counted == 2);
}

TEST_CASE("idempotency: stored answers are bounded in bytes, and past 64 MiB the oldest finished keys go first") {
  // Answers echo the film refs a client sent: 100,000 answers of 64 KiB each would be 6 GiB.
  auto emu = start_manual();
  http_test_client c(emu->port());
  REQUIRE(c.tickets(play(1), "test-key", "oldest").status == 200);
  // Three unknown films with refs of 21,000 bytes: each 404 answer quotes them (about 63 KB) and is kept.
  std::string const filler(21000, 'x');
  int const answers = 64 * 1024 * 1024 / 63000 + 50;
  std::string last_body;
  for (int i = 0; i < answers; ++i) {
    auto const n = std::to_string(i);
    last_body =
        batch_body({{n + "a" + filler, 1, "play"}, {n + "b" + filler, 1, "play"}, {n + "c" + filler, 1, "play"}});
    REQUIRE(c.tickets(last_body, "test-key", "big-" + n).status == 404);
  }
  auto const newest = c.tickets(last_body, "test-key", "big-" + std::to_string(answers - 1));
  CHECK(newest.status == 404);
  CHECK(newest.header("idempotency-replayed") == "true");
  auto const oldest = c.tickets(play(1), "test-key", "oldest");
  CHECK(oldest.status == 200);
  CHECK_FALSE(oldest.has_header("idempotency-replayed"));
  CHECK(emu->stats().tickets_counted == 2);
}

TEST_CASE("idempotency: a key that is not 1-200 visible ASCII characters is 400") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  CHECK(c.tickets(play(1), "test-key", std::string(201, 'a')).status == 400);
  CHECK(c.tickets(play(1), "test-key", "has space").status == 400);
  CHECK(c.tickets(play(1), "test-key", std::string(200, 'a')).status == 200);
  auto twice = c.request("POST", "/v1/playback/tickets", play(1),
                         {{"Authorization", "Bearer test-key"}, {"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}});
  CHECK(twice.status == 400);
  CHECK(emu->stats().tickets_counted == 1);
}
