// SPEC §2 (seed 001) row by row, and the counters of SPEC §1, over real sockets with the manual clock.
#include "wandura/emulator/emulator.hpp"

#include "http_test_client.hpp"

#include <catch2/catch.hpp>

using namespace wandura::emulator;
using std::chrono::milliseconds;
using std::chrono::seconds;
using wandura::testing::batch_body;
using wandura::testing::http_test_client;
using wandura::testing::play;

namespace {

/// A manual-clock emulator with exact counters (overshoot 0) and a small playback limit.
std::unique_ptr<server> start_manual(std::uint32_t playback = 100, double overshoot = 0.0) {
  config cfg;
  cfg.manual_clock = true;
  cfg.overshoot = overshoot;
  cfg.orgs[0].limits.playback = playback;
  cfg.films = {film{"the-heiress-returns", "The Heiress Returns", 12, true}, film{"long-saga", "Long Saga", 1000, true},
               film{"locked", "Locked", 3, false}};
  return server::start(cfg);
}

/// Spends `n` playback tickets with play batches of distinct episodes (no viewer_ref: never reused).
void spend(http_test_client& c, int n) {
  int ep = 1;
  while (n > 0) {
    int k = std::min(n, 3);
    std::vector<std::tuple<std::string, int, std::string>> items;
    for (int i = 0; i < k; ++i) {
      items.emplace_back("long-saga", ep++, "play");
    }
    auto r = c.tickets(batch_body(items));
    REQUIRE(r.status == 200);
    n -= k;
  }
}

} // namespace

TEST_CASE("tickets: a batch gets one ticket per item with the documented shape") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto r = c.tickets(batch_body({{"the-heiress-returns", 4, "play"},
                                 {"the-heiress-returns", 5, "prefetch"},
                                 {"the-heiress-returns", 6, "prefetch"}}));
  REQUIRE(r.status == 200);
  auto j = r.json();
  CHECK(j["request_id"].get<std::string>().rfind("req_", 0) == 0);
  CHECK(r.header("x-request-id") == j["request_id"]);
  REQUIRE(j["items"].size() == 3);
  auto const& item = j["items"][0];
  CHECK(item["film_ref"] == "the-heiress-returns");
  CHECK(item["episode_no"] == 4);
  CHECK(item["intent"] == "play");
  CHECK(item["status"] == 200);
  CHECK(item["reused"] == false);
  auto const& t = item["ticket"];
  CHECK(t["ticket_id"].get<std::string>().rfind("tkt_", 0) == 0);
  CHECK(t["manifest_url"].get<std::string>().rfind("https://", 0) == 0);
  CHECK(t["license_url"].get<std::string>().rfind("https://", 0) == 0);
  CHECK_FALSE(t["drm_payload"].get<std::string>().empty());
  // expires_at = now + ticket_ttl_s (1800 s), RFC 3339 UTC.
  auto expires = t["expires_at"].get<std::string>();
  REQUIRE(expires.size() == 20);
  CHECK(expires.back() == 'Z');
  std::tm tm{};
  REQUIRE(strptime(expires.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) != nullptr);
  auto exp = std::chrono::system_clock::from_time_t(timegm(&tm));
  auto ttl = std::chrono::duration_cast<seconds>(exp - emu->now()).count();
  CHECK(ttl >= 1799);
  CHECK(ttl <= 1800);
  CHECK(j["items"][1]["ticket"]["ticket_id"] != item["ticket"]["ticket_id"]);
  CHECK(emu->stats().tickets_counted == 3);
  CHECK(emu->stats().requests["playback"] == 1);
}

TEST_CASE("tickets: malformed batches get 400 invalid_request and count nothing") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto four = batch_body({{"long-saga", 1, "play"},
                          {"long-saga", 2, "prefetch"},
                          {"long-saga", 3, "prefetch"},
                          {"long-saga", 4, "prefetch"}});
  std::vector<std::string> bad = {
      four,
      R"({"episodes":[],"union_info":"d","drm_kek":"k"})",
      R"({"episodes":[{"film_ref":"long-saga","episode_no":1,"intent":"play"}],"drm_kek":"k"})",
      R"({"episodes":[{"film_ref":"long-saga","episode_no":1,"intent":"play"}],"union_info":"d"})",
      R"({"episodes":[{"film_ref":"long-saga","episode_no":0,"intent":"play"}],"union_info":"d","drm_kek":"k"})",
      R"({"episodes":[{"film_ref":"long-saga","episode_no":1,"intent":"rewind"}],"union_info":"d","drm_kek":"k"})",
      R"({"episodes":[{"episode_no":1,"intent":"play"}],"union_info":"d","drm_kek":"k"})",
      R"({"episodes":[{"film_ref":"long-saga","episode_no":1,"intent":"play"}],"union_info":"d","drm_kek":"k","viewer_ref":7})",
      R"([1,2,3])",
      R"({"episodes":)",
      "",
  };
  for (auto const& body : bad) {
    CAPTURE(body);
    auto r = c.tickets(body);
    CHECK(r.status == 400);
    CHECK(r.json()["error_code"] == "invalid_request");
    CHECK_FALSE(r.json()["error"].get<std::string>().empty());
  }
  CHECK(emu->stats().tickets_counted == 0);
  // An episode number past 2^32 - 1 is told the range, not "at least 1".
  auto const past = c.tickets(
      R"({"episodes":[{"film_ref":"long-saga","episode_no":4294967296,"intent":"play"}],"union_info":"d","drm_kek":"k"})");
  CHECK(past.status == 400);
  CHECK_THAT(past.json()["error"].get<std::string>(), Catch::Contains("from 1 to 4294967295"));
}

TEST_CASE("tickets: unknown fields are ignored") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto r = c.tickets(R"({"episodes":[{"film_ref":"long-saga","episode_no":1,"intent":"play","colour":"red"}],
                         "union_info":"d","drm_kek":"k","client_version":"9.9"})");
  CHECK(r.status == 200);
}

TEST_CASE("rate: continuous refill allows a full minute from idle, then limit/60 per second") {
  auto emu = start_manual(600);
  http_test_client c(emu->port());
  spend(c, 600);
  auto refused = c.tickets(play(1));
  REQUIRE(refused.status == 429);
  CHECK(refused.json()["error_code"] == "rate_limited");
  CHECK(refused.json()["items"][0]["status"] == 429);
  CHECK(refused.json()["items"][0]["retry_after"] == 1);
  CHECK(refused.header("retry-after") == "1");
  CHECK(refused.header("x-ratelimit-limit") == "600");
  CHECK(refused.header("x-ratelimit-window") == "60");
  // 600/min = 10 tickets a second come back.
  emu->advance_clock(seconds(1));
  spend(c, 9);
  CHECK(c.tickets(play(2)).status == 200);
  CHECK(c.tickets(play(3)).status == 429);
  emu->advance_clock(milliseconds(100));
  CHECK(c.tickets(play(4)).status == 200);
  // After a whole idle minute the full burst is back, and never more.
  emu->advance_clock(seconds(120));
  spend(c, 600);
  CHECK(c.tickets(play(5)).status == 429);
  auto s = emu->stats();
  CHECK(s.tickets_counted == 600 + 10 + 1 + 600);
  CHECK(s.responses[429] == 3);
}

TEST_CASE("rate: a burst overshoots the limit by at most 2.5 percent") {
  config cfg;
  cfg.manual_clock = true; // default overshoot
  cfg.orgs[0].limits.catalog = 1200;
  auto emu = server::start(cfg);
  http_test_client c(emu->port());
  int granted = 0;
  for (int i = 0; i < 1300; ++i) {
    auto r = c.get("/v1/catalog/films/the-heiress-returns");
    if (r.status == 200) {
      ++granted;
    } else {
      REQUIRE(r.status == 429);
      CHECK(r.header("x-ratelimit-limit") == "1200");
    }
  }
  CHECK(granted >= 1200);
  CHECK(granted <= 1230);
  CHECK(emu->stats().requests["catalog"] == 1300); // refused ones are counted as requests too
}

TEST_CASE("rate: fixed windows restart at each whole UTC minute") {
  config cfg;
  cfg.manual_clock = true;
  cfg.overshoot = 0;
  cfg.orgs[0].limits.config = 5;
  auto emu = server::start(cfg);
  http_test_client c(emu->port());
  // Start at the beginning of a minute so that five requests cannot straddle a boundary.
  auto into = emu->now().time_since_epoch() % std::chrono::minutes(1);
  emu->advance_clock(std::chrono::duration_cast<milliseconds>(std::chrono::minutes(1) - into) + milliseconds(1));
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.get("/v1/config").status == 200);
  }
  emu->advance_clock(seconds(20));
  auto refused = c.get("/v1/config");
  REQUIRE(refused.status == 429);
  CHECK(refused.json()["error_code"] == "rate_limited");
  CHECK(refused.header("retry-after") == "40"); // the rest of the minute
  CHECK(refused.header("x-ratelimit-limit") == "5");
  CHECK(refused.header("x-ratelimit-window") == "60");
  // Other counters are independent.
  CHECK(c.get("/v1/videos").status == 200);
  emu->advance_clock(seconds(39));
  CHECK(c.get("/v1/config").status == 429);
  emu->advance_clock(seconds(1));
  CHECK(c.get("/v1/config").status == 200);
}

TEST_CASE("rate: limits are per organisation, whatever the key") {
  config cfg;
  cfg.manual_clock = true;
  cfg.overshoot = 0;
  cfg.orgs = {organisation{"org_a", {"a1", "a2"}, limits{}}, organisation{"org_b", {"b1"}, limits{}}};
  cfg.orgs[0].limits.config = 2;
  cfg.orgs[1].limits.config = 2;
  auto emu = server::start(cfg);
  auto into = emu->now().time_since_epoch() % std::chrono::minutes(1);
  emu->advance_clock(std::chrono::duration_cast<milliseconds>(std::chrono::minutes(1) - into) + milliseconds(1));
  http_test_client c(emu->port());
  CHECK(c.get("/v1/config", "a1").status == 200);
  CHECK(c.get("/v1/config", "a2").status == 200);
  CHECK(c.get("/v1/config", "a2").status == 429);
  CHECK(c.get("/v1/config", "b1").status == 200);
  CHECK(c.get("/v1/config", "b1").json()["org_id"] == "org_b");
}

TEST_CASE("shedding: below 20 percent left prefetch is refused with prefetch_shed while play is granted") {
  auto emu = start_manual(100);
  http_test_client c(emu->port());
  spend(c, 80); // 20 left: not yet below 20 %
  auto still = c.tickets(batch_body({{"long-saga", 900, "prefetch"}}));
  REQUIRE(still.status == 200); // 19 left now
  auto shed = c.tickets(batch_body({{"long-saga", 901, "prefetch"}}));
  REQUIRE(shed.status == 429);
  auto j = shed.json();
  CHECK(j["error_code"] == "rate_limited");
  CHECK(j["reason"] == "prefetch_shed");
  CHECK(j["items"][0]["reason"] == "prefetch_shed");
  // Back above 20 % needs 1+ ticket at 100/60 a second: 1 s.
  CHECK(j["items"][0]["retry_after"] == 1);
  CHECK(shed.header("retry-after") == "1");
  auto played = c.tickets(play(1));
  CHECK(played.status == 200);
  CHECK(emu->stats().tickets_shed == 1);
  // Space returns: after enough refill prefetch is granted again.
  emu->advance_clock(seconds(2));
  CHECK(c.tickets(batch_body({{"long-saga", 902, "prefetch"}})).status == 200);
}

TEST_CASE("shedding: a shed item's retry_after is the time until the counter is back above 20 percent") {
  auto emu = start_manual(60); // 1 ticket a second
  http_test_client c(emu->port());
  spend(c, 55); // 5 left, floor is 12: 7+ seconds to get back above it
  auto r = c.tickets(batch_body({{"long-saga", 900, "prefetch"}}));
  REQUIRE(r.status == 429);
  CHECK(r.json()["items"][0]["retry_after"] == 8);
  CHECK(r.header("retry-after") == "8");
}

TEST_CASE("partial batch: prefetch is refused first, play is granted, and the request is 200") {
  auto emu = start_manual(100);
  http_test_client c(emu->port());
  spend(c, 99); // 1 left
  auto r = c.tickets(
      batch_body({{"long-saga", 500, "prefetch"}, {"long-saga", 501, "play"}, {"long-saga", 502, "prefetch"}}));
  REQUIRE(r.status == 200);
  auto j = r.json();
  CHECK_FALSE(j.contains("error_code"));
  CHECK(j["items"][0]["status"] == 429);
  CHECK(j["items"][0]["reason"] == "prefetch_shed");
  CHECK(j["items"][0]["retry_after"].get<int>() >= 1);
  CHECK(j["items"][1]["status"] == 200); // play took the last ticket although it came second
  CHECK(j["items"][2]["status"] == 429);
  CHECK(j["items"][2]["retry_after"].get<int>() >= 1);
  CHECK(emu->stats().tickets_counted == 100);
  CHECK(emu->stats().tickets_shed == 2);
}

TEST_CASE("partial batch: the whole request is 429 only when nothing was granted") {
  auto emu = start_manual(100);
  http_test_client c(emu->port());
  spend(c, 100);
  auto r = c.tickets(batch_body({{"long-saga", 500, "play"}, {"long-saga", 501, "prefetch"}}));
  REQUIRE(r.status == 429);
  auto j = r.json();
  CHECK(j["error_code"] == "rate_limited");
  CHECK_FALSE(j.contains("reason")); // not every item was a shed prefetch
  CHECK(j["items"][0]["status"] == 429);
  CHECK_FALSE(j["items"][0].contains("reason"));
  CHECK(j["items"][1]["reason"] == "prefetch_shed");
  // The whole-request Retry-After is the smallest of the items'.
  auto play_wait = j["items"][0]["retry_after"].get<int>();
  auto shed_wait = j["items"][1]["retry_after"].get<int>();
  CHECK(r.header("retry-after") == std::to_string(std::min(play_wait, shed_wait)));
  CHECK(play_wait == 1);
  CHECK(shed_wait == 13); // above 20 tickets at 100/60 a second: just over 12 s
}

TEST_CASE("hold: with the manual clock a play that finds no room is refused at once, never held") {
  auto emu = start_manual(600);
  http_test_client c(emu->port());
  spend(c, 600);
  auto r = c.tickets(play(1));
  CHECK(r.status == 429);
  CHECK(emu->stats().held_play == 0);
}

TEST_CASE("reuse: the same viewer, device, film, episode and intent get the issued ticket back, counting 0") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto first = c.tickets(play(4, "device-1", "viewer:a"));
  REQUIRE(first.status == 200);
  auto ticket = first.json()["items"][0]["ticket"];
  auto again = c.tickets(play(4, "device-1", "viewer:a"));
  REQUIRE(again.status == 200);
  CHECK(again.json()["items"][0]["reused"] == true);
  CHECK(again.json()["items"][0]["ticket"] == ticket);
  CHECK(emu->stats().tickets_counted == 1);
  CHECK(emu->stats().tickets_reused == 1);
  // Never across devices, intents, episodes or viewers; never without a viewer_ref.
  CHECK(c.tickets(play(4, "device-2", "viewer:a")).json()["items"][0]["reused"] == false);
  CHECK(c.tickets(batch_body({{"the-heiress-returns", 4, "prefetch"}}, "device-1", "viewer:a"))
            .json()["items"][0]["reused"] == false);
  CHECK(c.tickets(play(5, "device-1", "viewer:a")).json()["items"][0]["reused"] == false);
  CHECK(c.tickets(play(4, "device-1", "viewer:b")).json()["items"][0]["reused"] == false);
  CHECK(c.tickets(play(4, "device-1")).json()["items"][0]["reused"] == false);
  CHECK(c.tickets(play(4, "device-1")).json()["items"][0]["reused"] == false);
  CHECK(emu->stats().tickets_counted == 7);
}

TEST_CASE("reuse: identities whose fields join to the same bytes are still two (a NUL inside a client's field)") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  using namespace std::string_literals;
  auto first = c.tickets(play(4, "devC\0x"s, "v"));
  REQUIRE(first.status == 200);
  // Viewer "v\0devC" on device "x": joined with NUL separators, the same key as viewer "v" on device "devC\0x".
  auto other = c.tickets(play(4, "x", "v\0devC"s));
  REQUIRE(other.status == 200);
  CHECK(other.json()["items"][0]["reused"] == false);
  CHECK(other.json()["items"][0]["ticket"]["ticket_id"] != first.json()["items"][0]["ticket"]["ticket_id"]);
  CHECK(emu->stats().tickets_counted == 2);
  CHECK(c.tickets(play(4, "devC\0x"s, "v")).json()["items"][0]["reused"] == true); // each is still its own
}

TEST_CASE("reuse: a ticket is reused while at least 5 minutes remain, then a new one is issued") {
  auto emu = start_manual(); // ticket_ttl_s 1800
  http_test_client c(emu->port());
  auto first = c.tickets(play(4, "device-1", "viewer:a")).json()["items"][0]["ticket"]["ticket_id"];
  emu->advance_clock(seconds(1800 - 300)); // exactly 5 minutes left
  auto at_margin = c.tickets(play(4, "device-1", "viewer:a")).json()["items"][0];
  CHECK(at_margin["reused"] == true);
  CHECK(at_margin["ticket"]["ticket_id"] == first);
  emu->advance_clock(seconds(1)); // 4:59 left
  auto fresh = c.tickets(play(4, "device-1", "viewer:a")).json()["items"][0];
  CHECK(fresh["reused"] == false);
  CHECK(fresh["ticket"]["ticket_id"] != first);
  CHECK(emu->stats().tickets_counted == 2);
}

TEST_CASE("reuse: a reused item is granted even when the counter has no room") {
  auto emu = start_manual(100);
  http_test_client c(emu->port());
  REQUIRE(c.tickets(play(4, "device-1", "viewer:a")).status == 200);
  spend(c, 99);
  auto r = c.tickets(play(4, "device-1", "viewer:a"));
  CHECK(r.status == 200);
  CHECK(r.json()["items"][0]["reused"] == true);
}

TEST_CASE("not_ready: an episode past the film's last is 404 not_ready and counts nothing") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto mixed = c.tickets(batch_body({{"the-heiress-returns", 12, "play"}, {"the-heiress-returns", 13, "prefetch"}}));
  REQUIRE(mixed.status == 200);
  CHECK(mixed.json()["items"][1]["status"] == 404);
  CHECK(mixed.json()["items"][1]["error_code"] == "not_ready");
  CHECK_FALSE(mixed.json()["items"][1].contains("retry_after"));
  auto single = c.tickets(play(13));
  REQUIRE(single.status == 404);
  CHECK(single.json()["error_code"] == "not_ready");
  CHECK(single.json()["items"][0]["error_code"] == "not_ready");
  CHECK_FALSE(single.has_header("retry-after"));
  CHECK(emu->stats().tickets_counted == 1);
}

TEST_CASE("entitlement and catalogue: not_entitled is 403, an unknown film is 404 not_found") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  auto locked = c.tickets(batch_body({{"locked", 1, "play"}}));
  CHECK(locked.status == 403);
  CHECK(locked.json()["error_code"] == "not_entitled");
  auto unknown = c.tickets(batch_body({{"no-such-film", 1, "play"}, {"locked", 1, "prefetch"}}));
  CHECK(unknown.status == 404); // the first item's status
  CHECK(unknown.json()["items"][0]["error_code"] == "not_found");
  CHECK(unknown.json()["items"][1]["error_code"] == "not_entitled");
}

TEST_CASE("stale_db: catalog and licence checks come from the last good answer up to 5 minutes old") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  // A good answer for the-heiress-returns; none ever for long-saga.
  REQUIRE(c.get("/v1/catalog/films/the-heiress-returns").status == 200);
  emu->install_faults(R"({"rules":[{"kind":"stale_db"}]})");
  emu->advance_clock(seconds(120));
  auto stale = c.get("/v1/catalog/films/the-heiress-returns");
  REQUIRE(stale.status == 200);
  CHECK(stale.json()["episodes"] == 12);
  CHECK(stale.header("age") == "120");
  // A ticket batch: the licence check of the cached film succeeds; the uncached one cannot be issued in time.
  auto batch = c.tickets(batch_body({{"the-heiress-returns", 1, "play"}, {"long-saga", 1, "prefetch"}}));
  REQUIRE(batch.status == 200);
  auto item = batch.json()["items"][1];
  CHECK(item["status"] == 503);
  CHECK(item["error_code"] == "service_unavailable");
  CHECK(item["retry_after"] == 1);
  auto single = c.tickets(batch_body({{"long-saga", 1, "play"}}));
  REQUIRE(single.status == 503);
  CHECK(single.json()["error_code"] == "service_unavailable");
  CHECK(single.header("retry-after") == "1");
  // Past 5 minutes the last good answer is too old.
  emu->advance_clock(seconds(181));
  auto too_old = c.get("/v1/catalog/films/the-heiress-returns");
  CHECK(too_old.status == 503);
  CHECK(too_old.header("retry-after") == "1");
  // Once the database is back, answers are fresh again.
  emu->clear_faults();
  CHECK(c.get("/v1/catalog/films/the-heiress-returns").status == 200);
  CHECK(c.tickets(batch_body({{"long-saga", 1, "play"}})).status == 200);
}

TEST_CASE("stale_db: only films of the catalogue are remembered, and an unknown one is unavailable, not a cached 404") {
  // Refs of unknown films are whatever bytes clients send: remembering them for the stale mode grew the server
  // without bound (up to 100,000 refs of up to 64 KiB), for answers a slow database could not give anyway.
  auto emu = start_manual();
  http_test_client c(emu->port());
  REQUIRE(c.get("/v1/catalog/films/no-such-film").status == 404);
  REQUIRE(c.tickets(batch_body({{"no-such-ticket-film", 1, "play"}})).status == 404);
  REQUIRE(c.get("/v1/catalog/films/the-heiress-returns").status == 200);
  emu->install_faults(R"({"rules":[{"kind":"stale_db"}]})");
  auto const film = c.get("/v1/catalog/films/no-such-film");
  CHECK(film.status == 503);
  CHECK(film.header("retry-after") == "1");
  auto const batch = c.tickets(batch_body({{"no-such-ticket-film", 1, "play"}}));
  CHECK(batch.status == 503);
  CHECK(batch.json()["items"][0]["error_code"] == "service_unavailable");
  CHECK(c.get("/v1/catalog/films/the-heiress-returns").status == 200);
}

TEST_CASE("tickets: the same seed gives the same ticket ids") {
  auto ids = [](std::uint64_t seed) {
    config cfg;
    cfg.seed = seed;
    auto emu = server::start(cfg);
    http_test_client c(emu->port());
    auto j = c.tickets(batch_body({{"the-heiress-returns", 1, "play"}, {"the-heiress-returns", 2, "prefetch"}})).json();
    return j["items"][0]["ticket"]["ticket_id"].get<std::string>() +
           j["items"][1]["ticket"]["ticket_id"].get<std::string>();
  };
  CHECK(ids(7) == ids(7));
  CHECK(ids(7) != ids(8));
}

TEST_CASE("tickets: echoed strings are escaped so the response stays valid JSON") {
  auto emu = start_manual();
  http_test_client c(emu->port());
  std::vector<std::string> refs = {"quote\"in-the-middle-of-a-long-ref",
                                   "back\\slash",
                                   "ctl\x01\x1f end",
                                   "new\nline and tab\t",
                                   "unicode-\xc3\xa9-ok",
                                   "12345678\"",
                                   "\"12345678"};
  for (auto const& ref : refs) {
    CAPTURE(ref);
    auto r = c.tickets(batch_body({{ref, 1, "play"}}));
    REQUIRE(r.status == 404);
    REQUIRE(r.is_json());
    CHECK(r.json()["items"][0]["film_ref"] == ref);
  }
}
