#include "wandura/emulator/emulator.hpp"

#include <chrono>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "http_test_client.hpp"

using namespace wandura::emulator;
using wandura::testing::http_test_client;

TEST_CASE("emulator config: defaults are those of SPEC section 4") {
  config cfg;
  REQUIRE(cfg.orgs.size() == 1);
  CHECK(cfg.orgs[0].id == "org_demo");
  CHECK(cfg.orgs[0].keys == std::vector<std::string>{"test-key"});
  CHECK(cfg.orgs[0].limits.playback == 6000);
  CHECK(cfg.orgs[0].limits.catalog == 1200);
  CHECK(cfg.orgs[0].limits.of(counter::creatives) == 600);
  CHECK(cfg.orgs[0].limits.of(counter::config) == 600);
  CHECK(cfg.ticket_ttl_s == 1800);
  CHECK(cfg.port == 0);
  CHECK(cfg.host == "127.0.0.1");
}

// Designated initializers that name a few fields compile under -Wextra -Werror with GCC 12, which warns about
// every field left out that has no default member initializer.
TEST_CASE("emulator config: designated initializers naming a few fields keep every other default, warning-free") {
  config const cfg{.seed = 7, .manual_clock = true};
  CHECK(cfg.films.empty());
  CHECK(cfg.faults.empty());
  CHECK(cfg.orgs.size() == 1);
  fault_rule const rule{.path = "/v1/playback/tickets", .status = 503};
  CHECK_FALSE(rule.retry_after);
  CHECK(rule.error_code.empty());
  CHECK_FALSE(rule.count);
  CHECK_FALSE(rule.probability);
  film const one{.film_ref = "the-heiress-returns", .episodes = 12};
  CHECK(one.title.empty());
  organisation const org{.id = "org_a", .keys = {"k1"}};
  CHECK(org.limits.playback == 6000);
}

namespace {

/// What parse_config says of `json`, or "no error".
std::string config_message(std::string_view json) {
  try {
    (void)parse_config(json);
  } catch (config_error const& e) {
    return std::string(e.what());
  }
  return "no error";
}

} // namespace

TEST_CASE("emulator config: a file overrides what it names and keeps the other defaults") {
  auto cfg = parse_config(R"({
    "orgs": [ {"id": "org_a", "keys": ["k1", "k2"], "limits": {"playback": 100, "config": 5}},
              {"id": "org_b", "keys": ["k3"]} ],
    "films": [ {"film_ref": "short-film", "episodes": 3}, {"film_ref": "locked", "episodes": 2, "entitled": false} ],
    "ticket_ttl_s": 600,
    "faults": [ {"path": "/v1/config", "kind": "status", "status": 500, "count": 1} ],
    "seed": 42, "overshoot": 0, "hold_window_ms": 250 })");
  REQUIRE(cfg.orgs.size() == 2);
  CHECK(cfg.orgs[0].id == "org_a");
  CHECK(cfg.orgs[0].keys.size() == 2);
  CHECK(cfg.orgs[0].limits.playback == 100);
  CHECK(cfg.orgs[0].limits.config == 5);
  CHECK(cfg.orgs[0].limits.catalog == 1200); // left out: default kept
  CHECK(cfg.orgs[1].limits.playback == 6000);
  REQUIRE(cfg.films.size() == 2);
  CHECK(cfg.films[0].title == "Short Film");
  CHECK_FALSE(cfg.films[1].entitled);
  CHECK(cfg.ticket_ttl_s == 600);
  REQUIRE(cfg.faults.size() == 1);
  CHECK(cfg.faults[0].kind == fault_kind::status);
  CHECK(cfg.faults[0].status == 500);
  CHECK(cfg.faults[0].count == std::uint64_t{1});
  CHECK(cfg.seed == std::uint64_t{42});
  CHECK(cfg.overshoot == 0.0);
  CHECK(cfg.hold_window == std::chrono::milliseconds(250));
}

TEST_CASE("emulator config: bad input is a config_error naming the field") {
  CHECK_THAT(config_message("{"), Catch::Contains("json"));
  CHECK_THAT(config_message("[]"), Catch::Contains("expected an object"));
  CHECK_THAT(config_message(R"({"orgs":[{"keys":["k"],"limits":{"playback":-1}}]})"),
             Catch::Contains("orgs[0].limits.playback"));
  CHECK_THAT(config_message(R"({"orgs":[{"keys":["k"],"limits":{"playback":0}}]})"), Catch::Contains("at least 1"));
  CHECK_THAT(config_message(R"({"orgs":[{"id":"a","keys":[]}]})"), Catch::Contains("orgs[0].keys: missing or empty"));
  CHECK_THAT(config_message(R"({"orgs":[{"id":"a"}]})"), Catch::Contains("orgs[0].keys: missing or empty"));
  CHECK_THAT(config_message(R"({"films":[]})"), Catch::Contains("films: empty"));
  CHECK_THAT(config_message(R"({"films":[{"episodes":3}]})"), Catch::Contains("films[0].film_ref"));
  CHECK_THAT(config_message(R"({"ticket_ttl_s":"long"})"), Catch::Contains("ticket_ttl_s"));
  CHECK_THAT(config_message(R"({"faults":[{"kind":"meteor"}]})"), Catch::Contains("unknown fault kind"));
  CHECK_THAT(config_message(R"({"faults":[{"kind":"status","probability":1.5}]})"),
             Catch::Contains("faults[0].probability"));
  CHECK_THAT(config_message(R"({"faults":[{"path":"/v1/config"}]})"), Catch::Contains("faults[0].kind"));
  CHECK_THAT(config_message(R"({"overshoot":2})"), Catch::Contains("overshoot"));
}

TEST_CASE("emulator config: a key no reader knows is refused at every level, naming it and the known ones") {
  // A misspelt key must not leave a fault or a limit out without a word.
  CHECK_THAT(config_message(R"({"fualts":[{"kind":"reset"}]})"),
             Catch::StartsWith("fualts: unknown key (known: orgs, films"));
  CHECK_THAT(config_message(R"({"faults":[{"kind":"status","stauts":503}]})"),
             Catch::StartsWith("faults[0].stauts: unknown key (known: path, kind, status"));
  CHECK_THAT(config_message(R"({"orgs":[{"id":"a","keys":["k"],"limit":{"playback":5}}]})"),
             Catch::StartsWith("orgs[0].limit: unknown key (known: id, keys, limits)"));
  CHECK_THAT(config_message(R"({"orgs":[{"id":"a","keys":["k"],"limits":{"playbacks":5}}]})"),
             Catch::StartsWith("orgs[0].limits.playbacks: unknown key (known: playback, catalog"));
  CHECK_THAT(config_message(R"({"films":[{"film_ref":"f","episode":3}]})"),
             Catch::StartsWith("films[0].episode: unknown key (known: film_ref, title, episodes, entitled)"));
  // The rules of the admin API are read by the same reader.
  try {
    (void)parse_fault_rules(R"({"rules":[{"kind":"delay","msec":100}]})");
    FAIL("accepted");
  } catch (config_error const& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("rules[0].msec: unknown key"));
  }
  try {
    (void)parse_fault_rules(R"({"rules":[{"kind":"reset"}],"rule":[]})");
    FAIL("accepted");
  } catch (config_error const& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("rule: unknown key (known: rules)"));
  }
}

TEST_CASE("emulator config: a fault status is a final one, 200-599, and a 1xx is refused with the range") {
  for (int const status : {100, 101, 199}) {
    CAPTURE(status);
    try {
      (void)parse_fault_rules(R"({"rules":[{"kind":"status","status":)" + std::to_string(status) + "}]}");
      FAIL("accepted");
    } catch (config_error const& e) {
      CHECK_THAT(e.what(), Catch::Contains("rules[0].status") && Catch::Contains("200-599"));
    }
  }
  CHECK(parse_fault_rules(R"({"rules":[{"kind":"status","status":200}]})").front().status == 200);
  CHECK(parse_fault_rules(R"({"rules":[{"kind":"status","status":599}]})").front().status == 599);
}

TEST_CASE("emulator config: every fault kind of SPEC section 4 parses with its parameters") {
  auto rules = parse_fault_rules(R"({"rules":[
    {"kind":"status","status":503,"retry_after":1,"count":2},
    {"kind":"delay","ms":300}, {"kind":"reset"}, {"kind":"drop_after_read"}, {"kind":"truncate"},
    {"kind":"garbage"}, {"kind":"huge","bytes":2048}, {"kind":"slow_body","bytes_per_s":100},
    {"kind":"stale_db","probability":0.5}, {"kind":"unreadable_item","item":2}, {"kind":"unreadable_item"}]})");
  REQUIRE(rules.size() == 11);
  CHECK(rules[0].retry_after == std::uint32_t{1});
  CHECK(rules[1].kind == fault_kind::delay);
  CHECK(rules[1].ms == 300);
  CHECK(rules[2].kind == fault_kind::reset);
  CHECK(rules[3].kind == fault_kind::drop_after_read);
  CHECK(rules[4].kind == fault_kind::truncate);
  CHECK(rules[5].kind == fault_kind::garbage);
  CHECK(rules[6].bytes == 2048);
  CHECK(rules[7].bytes_per_s == 100);
  CHECK(rules[8].probability == 0.5);
  CHECK(to_string(rules[8].kind) == "stale_db");
  CHECK(rules[9].kind == fault_kind::unreadable_item);
  CHECK(rules[9].item == 2);
  CHECK(rules[10].item == 0);
  CHECK(to_string(rules[10].kind) == "unreadable_item");
  CHECK_THROWS_AS(parse_fault_rules(R"({"rules":[{"kind":"unreadable_item","item":-1}]})"), config_error);
  CHECK(parse_fault_rules(R"([{"kind":"reset"}])").size() == 1);
  CHECK_THROWS_AS(parse_fault_rules(R"({"rules":[{"kind":"slow_body","bytes_per_s":0}]})"), config_error);
  // A count of 0 would hit nothing, and counted down from 0 it hit every request for ever: refused, with why.
  CHECK_THROWS_WITH(parse_fault_rules(R"({"rules":[{"kind":"reset","count":0}]})"),
                    Catch::Contains("count") && Catch::Contains("must be at least 1"));
  CHECK(parse_fault_rules(R"({"rules":[{"kind":"reset","count":1}]})")[0].count == 1U);
}

TEST_CASE("emulator server: an inconsistent configuration is refused at start") {
  config two_orgs_one_key;
  two_orgs_one_key.orgs.push_back(organisation{"org_b", {"test-key"}, {}});
  CHECK_THROWS_AS(server::start(two_orgs_one_key), config_error);
  config no_orgs;
  no_orgs.orgs.clear();
  CHECK_THROWS_AS(server::start(no_orgs), config_error);
  config empty_film;
  empty_film.films.push_back(film{"nothing", "Nothing", 0, true});
  CHECK_THROWS_AS(server::start(empty_film), config_error);
  config bad_host;
  bad_host.host = "not-an-address";
  CHECK_THROWS_AS(server::start(bad_host), config_error);
}

TEST_CASE("emulator config: organisations of one id, a shared key or a film listed twice are refused by parse_config "
          "too, naming both places") {
  // Two organisations without an id are both org_demo: they shared idempotency keys and reusable tickets.
  CHECK_THROWS_WITH(parse_config(R"({"orgs":[{"keys":["k-one"]},{"keys":["k-two"]}]})"),
                    Catch::StartsWith("orgs[1].id: \"org_demo\" is orgs[0]'s too"));
  CHECK_THROWS_WITH(
      parse_config(R"({"orgs":[{"id":"x","keys":["a"]},{"id":"y","keys":["b"]},{"id":"x","keys":["c"]}]})"),
      Catch::StartsWith("orgs[2].id: \"x\" is orgs[0]'s too"));
  CHECK_THROWS_WITH(parse_config(R"({"orgs":[{"id":"x","keys":["a"]},{"id":"y","keys":["b","a"]}]})"),
                    Catch::StartsWith("orgs[1].keys: key \"a\" is orgs[0]'s too"));
  CHECK_THROWS_WITH(parse_config(R"({"films":[{"film_ref":"f"},{"film_ref":"g"},{"film_ref":"f"}]})"),
                    Catch::StartsWith("films[2].film_ref: \"f\" is films[0]'s too"));
  // One organisation may list a key twice, and distinct ids with their own keys start.
  CHECK_NOTHROW(parse_config(R"({"orgs":[{"id":"x","keys":["a","a"]},{"id":"y","keys":["b"]}]})"));
  config two_ids;
  two_ids.orgs.push_back(organisation{"org_b", {"key-b"}, {}});
  CHECK(server::start(two_ids) != nullptr);
  config one_id;
  one_id.orgs.push_back(organisation{});
  one_id.orgs.back().keys = {"key-b"};
  CHECK_THROWS_AS(server::start(one_id), config_error);
}

TEST_CASE("emulator config: an idle_timeout of 0 is refused, from a file and in-process, naming the field") {
  // Nothing documents 0 as "no timeout"; accepted, it closed every connection before its first reply.
  CHECK_THROWS_WITH(parse_config(R"({"idle_timeout_ms":0})"),
                    Catch::Contains("idle_timeout_ms") && Catch::Contains("at least 1"));
  CHECK(parse_config(R"({"idle_timeout_ms":1})").idle_timeout == std::chrono::milliseconds(1));
  config zero;
  zero.idle_timeout = std::chrono::milliseconds(0);
  CHECK_THROWS_WITH(server::start(zero), Catch::Contains("idle_timeout") && Catch::Contains("at least 1"));
  config negative;
  negative.idle_timeout = std::chrono::milliseconds(-5);
  CHECK_THROWS_AS(server::start(negative), config_error);
}

TEST_CASE("emulator config: a key given twice is refused as an unknown one is, naming its place") {
  CHECK_THROWS_WITH(parse_config(R"({"ticket_ttl_s":5,"ticket_ttl_s":7})"),
                    Catch::StartsWith("ticket_ttl_s: given twice"));
  CHECK_THROWS_WITH(parse_config(R"({"orgs":[{"id":"o","keys":["k"],"limits":{"video":5,"video":6}}]})"),
                    Catch::StartsWith("orgs[0].limits.video: given twice"));
  CHECK_THROWS_WITH(parse_config(R"({"films":[{"film_ref":"a","film_ref":"b"}]})"),
                    Catch::StartsWith("films[0].film_ref: given twice"));
  // Written differently, the same key: JSON escapes are read first.
  CHECK_THROWS_WITH(parse_fault_rules(R"({"rules":[{"kind":"status","status":503,"k\u0069nd":"delay"}]})"),
                    Catch::StartsWith("rules[0].kind: given twice"));
  CHECK_THROWS_WITH(parse_fault_rules(R"({"rules":[],"rules":[]})"), Catch::StartsWith("rules: given twice"));
  CHECK(parse_fault_rules(R"({"rules":[{"kind":"status","status":503}]})").size() == 1);
}

TEST_CASE("emulator config: a typed field past what its JSON form allows is refused by start, naming the field") {
  // Each of these started once: `milliseconds::max()` as "no idle timeout" closed every connection unanswered (its
  // deadline overflowed into the past), a TTL of 2^32 - 1 s issued tickets expired in 1728, a film without a ref
  // could never be asked for, a fault of no kind hit requests and did nothing.
  auto const refused = [](config const& cfg, std::string const& field) {
    INFO(field);
    CHECK_THROWS_WITH(server::start(cfg), Catch::Contains(field));
  };
  config endless;
  endless.idle_timeout = std::chrono::milliseconds::max();
  refused(endless, "idle_timeout");
  config past_a_day;
  past_a_day.idle_timeout = std::chrono::milliseconds(86400001);
  refused(past_a_day, "idle_timeout");
  config long_ttl;
  long_ttl.ticket_ttl_s = 7 * 86400 + 1;
  refused(long_ttl, "ticket_ttl_s");
  config no_ref;
  no_ref.films.push_back(film{"", "Untitled", 3, true});
  refused(no_ref, "films[0].film_ref");
  config many_episodes;
  many_episodes.films.push_back(film{"long-one", "Long", 100001, true});
  refused(many_episodes, "films[0].episodes");
  config huge_limit;
  huge_limit.orgs.front().limits.video = 100000001;
  refused(huge_limit, "orgs[0].limits.video");
  config nul_key;
  nul_key.orgs.front().keys = {std::string("key\0with-nul", 12)};
  refused(nul_key, "orgs[0].keys");
  config spaced_key;
  spaced_key.orgs.front().keys = {"padded "};
  refused(spaced_key, "orgs[0].keys");
  config no_kind;
  fault_rule rule;
  rule.kind = static_cast<fault_kind>(99);
  no_kind.faults.push_back(rule);
  refused(no_kind, "faults[0].kind");

  // The edges themselves start, and serve.
  config edges;
  edges.idle_timeout = std::chrono::hours(24);
  edges.ticket_ttl_s = 7 * 86400;
  edges.films.push_back(film{"long-one", "Long", 100000, true});
  edges.orgs.front().limits.video = 100000000;
  auto emu = server::start(edges);
  http_test_client c(emu->port());
  CHECK(c.get("/v1/config").status == 200);
  // A typed rule of no kind is refused by install_faults too, and nothing is installed.
  fault_rule unavailable; // a 503 for every config call, were it installed
  unavailable.path = "/v1/config";
  CHECK_THROWS_WITH(emu->install_faults(std::vector<fault_rule>{unavailable, rule}), Catch::Contains("rules[1].kind"));
  CHECK(c.get("/v1/config").status == 200);
}

TEST_CASE("http: a HEAD gets the headers a GET would, Content-Length included, and no body") {
  config cfg;
  cfg.manual_clock = true;
  auto emu = server::start(cfg);
  http_test_client c(emu->port());
  std::vector<std::pair<std::string, std::string>> const auth = {{"Authorization", "Bearer test-key"}};
  auto const get = c.get("/v1/config");
  REQUIRE(get.status == 200);
  auto const head = c.request("HEAD", "/v1/config", {}, auth);
  CHECK(head.status == 200);
  CHECK(head.header("content-type") == "application/json");
  CHECK(head.header("content-length") == std::to_string(get.body.size())); // request ids have one length
  CHECK(head.has_header("x-request-id"));
  CHECK(head.body.empty());
  // Stray body bytes would be read as the start of the next response on this keep-alive connection.
  auto const after_get = c.get("/v1/config");
  CHECK(after_get.status == 200);
  CHECK(after_get.is_json());
  // An error answer and an admin answer end at their headers too.
  auto const refused = c.request("HEAD", "/v1/playback/tickets", {}, auth);
  CHECK(refused.status == 405);
  CHECK(refused.header("content-length") != "0");
  CHECK(refused.body.empty());
  auto const stats = c.request("HEAD", "/_emulator/stats");
  CHECK(stats.status == 200);
  CHECK(stats.body.empty());
  auto const last = c.get("/v1/videos");
  CHECK(last.status == 200);
  CHECK(last.is_json());
  CHECK(c.connected());
}

TEST_CASE("emulator server: starts on an ephemeral port, serves, and stops cleanly") {
  auto emu = server::start({});
  REQUIRE(emu->port() != 0);
  CHECK(emu->base_url() == "http://127.0.0.1:" + std::to_string(emu->port()));
  http_test_client client(emu->port());
  auto r = client.get("/v1/config");
  REQUIRE(r.status == 200);
  auto j = r.json();
  CHECK(j["org_id"] == "org_demo");
  CHECK(j["limits"]["playback"] == 6000);
  CHECK(j["limits"]["catalog"] == 1200);
  CHECK(j["limits"]["video"] == 600);
  CHECK(j["window_s"] == 60);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.has_header("date"));
  CHECK(r.header("x-request-id").rfind("req_", 0) == 0);
  emu->stop();
  emu->stop(); // idempotent
  http_test_client after(emu->port(), std::chrono::milliseconds(500));
  CHECK_THROWS(after.get("/v1/config"));
}

TEST_CASE("emulator server: the demo catalogue has about 50 films of 1-40 episodes") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  auto heiress = client.get("/v1/catalog/films/the-heiress-returns");
  REQUIRE(heiress.status == 200);
  CHECK(heiress.json()["episodes"] == 12);
  CHECK(heiress.json()["title"] == "The Heiress Returns");
  auto unknown = client.get("/v1/catalog/films/no-such-film");
  CHECK(unknown.status == 404);
  CHECK(unknown.json()["error_code"] == "not_found");
}

TEST_CASE("emulator server: open videos, one video and creatives have the documented shapes") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  auto videos = client.get("/v1/videos");
  REQUIRE(videos.status == 200);
  auto list = videos.json()["videos"];
  REQUIRE(list.size() >= 1);
  auto ref = list[0]["video_ref"].get<std::string>();
  CHECK(list[0]["url"].get<std::string>().rfind("https://", 0) == 0);
  auto one = client.get("/v1/videos/" + ref);
  REQUIRE(one.status == 200);
  CHECK(one.json()["video_ref"] == ref);
  CHECK(client.get("/v1/videos/nope").status == 404);
  auto creatives = client.get("/v1/creatives");
  REQUIRE(creatives.status == 200);
  CHECK(creatives.json()["creatives"][0]["url"].get<std::string>().rfind("https://", 0) == 0);
  CHECK(client.get("/v1/unknown").status == 404);
  CHECK(client.request("DELETE", "/v1/config", {}, {{"Authorization", "Bearer test-key"}}).status == 405);
}

TEST_CASE("emulator auth: a missing or unknown key gets 401 and is never counted") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  auto body = wandura::testing::play(1);
  auto none = client.tickets(body, "");
  auto unknown = client.tickets(body, "stolen-key");
  auto wrong_scheme = client.request("POST", "/v1/playback/tickets", body, {{"Authorization", "Basic test-key"}});
  for (auto const* r : {&none, &unknown, &wrong_scheme}) {
    CHECK(r->status == 401);
    CHECK(r->json()["error_code"] == "unauthorized");
  }
  CHECK(client.get("/v1/config", "").status == 401);
  auto s = emu->stats();
  CHECK(s.tickets_counted == 0);
  CHECK(s.requests["playback"] == 0);
  CHECK(s.requests["config"] == 0);
  CHECK(s.responses[401] == 4);
  // Keys are per organisation; a second key of the same organisation shares its limits.
  config cfg;
  cfg.orgs[0].keys.push_back("second-key");
  auto emu2 = server::start(cfg);
  http_test_client c2(emu2->port());
  CHECK(c2.tickets(body, "second-key").status == 200);
}

TEST_CASE("emulator admin: stats over HTTP match the in-process snapshot and exclude admin calls") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  REQUIRE(client.tickets(wandura::testing::play(1)).status == 200);
  auto r = client.get("/_emulator/stats", "");
  REQUIRE(r.status == 200);
  auto j = r.json();
  CHECK(j["tickets_counted"] == 1);
  CHECK(j["tickets_reused"] == 0);
  CHECK(j["tickets_shed"] == 0);
  CHECK(j["held_play"] == 0);
  CHECK(j["requests"]["playback"] == 1);
  CHECK(j["requests"]["catalog"] == 0);
  CHECK(j["responses"]["200"] == 1);
  CHECK(j["idempotent_replays"] == 0);
  CHECK(j["faults_injected"] == 0);
  CHECK(nlohmann::json::parse(emu->stats_json()) == j);
  CHECK(emu->stats().responses.size() == 1); // the admin GET was not counted
  // A malformed admin call is refused and not counted either, its target in origin or absolute form; a malformed
  // API call is counted.
  for (std::string_view target : {"/_emulator/stats", "http://127.0.0.1/_emulator/stats"}) {
    INFO(target);
    http_test_client raw(emu->port());
    auto refused = raw.send_raw("GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n");
    CHECK(refused.status == 400);
  }
  CHECK(emu->stats().responses.size() == 1);
  {
    // A malformed API request after an admin call on one connection is counted: not taken for the admin call.
    http_test_client kept(emu->port());
    REQUIRE(kept.get("/_emulator/stats", "").status == 200);
    CHECK(kept.send_raw("\x01 / HTTP/1.1\r\nHost: x\r\n\r\n").status == 400);
    CHECK(emu->stats().responses[400] == 1);
  }
  http_test_client raw(emu->port());
  CHECK(raw.send_raw("GET /v1/config HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n").status == 400);
  CHECK(emu->stats().responses[400] == 2);
}

TEST_CASE("emulator server: a port already taken is refused naming the address and port") {
  auto first = server::start({});
  config again;
  again.port = first->port();
  try {
    (void)server::start(again);
    FAIL("started twice on one port");
  } catch (std::system_error const& e) {
    CHECK(e.code() == asio::error::address_in_use);
    CHECK_THAT(e.what(), Catch::StartsWith("cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": "));
  }
}

TEST_CASE("emulator admin: an endpoint asked with a method it does not take is a 405 naming those it does") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  for (auto const& [method, path, allow] : {std::tuple{"GET", "/_emulator/faults", "POST, DELETE"},
                                            {"PUT", "/_emulator/faults", "POST, DELETE"},
                                            {"POST", "/_emulator/stats", "GET, HEAD"},
                                            {"DELETE", "/_emulator/clock", "GET, HEAD, POST"}}) {
    INFO(method << " " << path);
    auto const r = client.request(method, path);
    CHECK(r.status == 405);
    CHECK(r.header("allow") == allow);
  }
  CHECK(client.request("GET", "/_emulator/nothing").status == 404);
  CHECK(client.request("GET", "/_emulator/stats").status == 200);
}

TEST_CASE("emulator admin: the clock moves only when told, and only in manual mode") {
  config cfg;
  cfg.manual_clock = true;
  auto emu = server::start(cfg);
  http_test_client client(emu->port());
  auto t0 = emu->now();
  auto r = client.request("POST", "/_emulator/clock", R"({"advance_ms":90000})");
  REQUIRE(r.status == 200);
  CHECK(emu->now() - t0 == std::chrono::milliseconds(90000));
  CHECK(r.json()["now_ms"] ==
        std::chrono::duration_cast<std::chrono::milliseconds>(emu->now().time_since_epoch()).count());
  emu->advance_clock(std::chrono::milliseconds(500));
  CHECK(emu->now() - t0 == std::chrono::milliseconds(90500));
  CHECK(client.request("POST", "/_emulator/clock", R"({"advance_ms":-5})").status == 400);
  CHECK(client.request("POST", "/_emulator/clock", "not json").status == 400);

  auto real = server::start({});
  http_test_client rc(real->port());
  CHECK(rc.request("POST", "/_emulator/clock", R"({"advance_ms":1})").status == 409);
  CHECK_THROWS_AS(real->advance_clock(std::chrono::milliseconds(1)), std::logic_error);
}

TEST_CASE("emulator admin: an advance past what the clock can represent is refused, and it never runs backwards") {
  config cfg;
  cfg.manual_clock = true;
  auto emu = server::start(cfg);
  http_test_client client(emu->port());
  auto t0 = emu->now();
  for (auto const* body : {R"({"advance_ms":100000000000000})", R"({"advance_ms":9223372036854775807})"}) {
    CAPTURE(body);
    auto r = client.request("POST", "/_emulator/clock", body);
    CHECK(r.status == 400);
    CHECK_THAT(r.json()["error"].get<std::string>(), Catch::Contains("past"));
    CHECK(emu->now() == t0);
  }
  try {
    emu->advance_clock(std::chrono::milliseconds::max());
    FAIL("accepted");
  } catch (std::system_error const& e) {
    CHECK(e.code() == std::errc::invalid_argument);
  }
  CHECK(emu->now() == t0);
  // Up to the last representable time is fine: a year is.
  auto const year = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365));
  emu->advance_clock(year);
  CHECK(emu->now() - t0 == year);
  CHECK(client.request("GET", "/_emulator/clock").json()["now_ms"] ==
        std::chrono::duration_cast<std::chrono::milliseconds>(emu->now().time_since_epoch()).count());
}

TEST_CASE("emulator admin: bound to ::, an IPv4 loopback client (seen as ::ffff:127.0.0.1) is a loopback client") {
  config cfg;
  cfg.host = "::";
  std::unique_ptr<server> emu;
  try {
    emu = server::start(cfg);
  } catch (std::system_error const& e) {
    WARN("skipped: this machine cannot listen on :: (no IPv6): " << e.what());
    return;
  }
  http_test_client v4(emu->port()); // connects to 127.0.0.1
  auto r = v4.get("/_emulator/stats", "");
  CHECK(r.status == 200);
  CHECK(r.json().contains("responses"));
}

TEST_CASE("emulator paths: film and video refs are percent-decoded per segment, and a bad escape is a 400") {
  config cfg;
  cfg.films = {film{"the-heiress-returns", "The Heiress Returns", 12, true}, film{"x:y", "X Y", 2, true},
               film{"a/b", "A B", 3, true}, film{"caf\xc3\xa9", "Cafe", 4, true}};
  auto emu = server::start(cfg);
  http_test_client c(emu->port());
  CHECK(c.get("/v1/catalog/films/x:y").json()["episodes"] == 2);
  CHECK(c.get("/v1/catalog/films/x%3Ay").json()["episodes"] == 2);
  CHECK(c.get("/v1/catalog/films/x%3ay").json()["episodes"] == 2);
  CHECK(c.get("/v1/catalog/films/the%2Dheiress%2Dreturns").json()["episodes"] == 12);
  CHECK(c.get("/v1/catalog/films/caf%C3%A9").json()["episodes"] == 4);
  // An encoded '/' stays inside the ref; a plain one splits the path.
  CHECK(c.get("/v1/catalog/films/a%2Fb").json()["episodes"] == 3);
  CHECK(c.get("/v1/catalog/films/a/b").status == 404);
  CHECK(c.get("/v1/videos/trailer%2Dheiress").json()["video_ref"] == "trailer-heiress");
  for (auto const* bad : {"/v1/catalog/films/%G1", "/v1/catalog/films/x%4", "/v1/catalog/films/x%", "/v1/videos/%zz"}) {
    CAPTURE(bad);
    auto r = c.get(bad);
    CHECK(r.status == 400);
    CHECK(r.json()["error_code"] == "invalid_request");
  }
}

TEST_CASE("emulator admin: faults are installed, listed in stats when they hit, and cleared") {
  auto emu = server::start({});
  http_test_client client(emu->port());
  auto bad = client.request("POST", "/_emulator/faults", R"({"rules":[{"kind":"volcano"}]})");
  CHECK(bad.status == 400);
  CHECK_THAT(bad.json()["error"].get<std::string>(), Catch::Contains("volcano"));
  auto ok =
      client.request("POST", "/_emulator/faults", R"({"rules":[{"path":"/v1/config","kind":"status","status":500}]})");
  REQUIRE(ok.status == 200);
  CHECK(ok.json()["installed"] == 1);
  CHECK(client.get("/v1/config").status == 500);
  CHECK(client.get("/v1/config").status == 500); // no count: hits every match
  CHECK(client.get("/v1/videos").status == 200); // another path
  auto cleared = client.request("DELETE", "/_emulator/faults");
  REQUIRE(cleared.status == 200);
  CHECK(cleared.json()["cleared"] == 1);
  CHECK(client.get("/v1/config").status == 200);
  CHECK(emu->stats().faults_injected == 2);
  CHECK(client.get("/_emulator/nothing", "").status == 404);
}

TEST_CASE("emulator server: stop releases the port and may be repeated") {
  auto emu = server::start({});
  auto port = emu->port();
  emu->stop();
  CHECK_NOTHROW(emu->stop());
  config again;
  again.port = port;
  std::unique_ptr<server> second;
  CHECK_NOTHROW(second = server::start(again)); // the same port can be bound again at once
  REQUIRE(second);
  CHECK(second->port() == port);
  http_test_client c(port);
  CHECK(c.get("/v1/config").status == 200);
}

TEST_CASE("emulator server: starting on a port already in use throws std::system_error, and the first serves on") {
  auto first = server::start({});
  config same_port;
  same_port.port = first->port();
  try {
    auto second = server::start(same_port);
    FAIL("a second emulator was started on port " << second->port() << ", already bound by the first");
  } catch (config_error const&) {
    FAIL("a port in use was reported as a config_error");
  } catch (std::system_error const& e) {
    CHECK(e.code() == asio::error::address_in_use); // Asio's own category: not comparable with std::errc
  }
  http_test_client c(first->port());
  CHECK(c.get("/v1/config").status == 200);
}
