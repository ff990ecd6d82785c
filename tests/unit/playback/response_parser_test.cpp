#include "playback/response_parser.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/error.hpp"

using wandura::item_outcome;
using wandura::detail::response_parser;
using namespace std::chrono;

namespace {

// SPEC §1, "Ticket batch" response, verbatim.
constexpr char const* spec_example = R"({ "request_id": "req_...",
  "items": [
    {"film_ref":"the-heiress-returns","episode_no":4,"intent":"play","status":200,"reused":false,
     "ticket":{"ticket_id":"tkt_...","manifest_url":"https://...","license_url":"https://...",
               "expires_at":"2026-11-30T11:00:00Z","drm_payload":"..."}},
    {"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch","status":429,
     "error_code":"rate_limited","reason":"prefetch_shed","retry_after":2},
    {"film_ref":"the-heiress-returns","episode_no":9,"intent":"prefetch","status":404,"error_code":"not_ready"},
    {"film_ref":"x","episode_no":1,"intent":"play","status":503,"error_code":"service_unavailable","retry_after":1}
  ] })";

constexpr char const* full_batch =
    R"({"request_id":"req_7","items":[)"
    R"({"film_ref":"the-heiress-returns","episode_no":4,"intent":"play","status":200,"reused":true,)"
    R"("ticket":{"ticket_id":"tkt_1","manifest_url":"https://cdn.example/m/1.mpd","license_url":"https://lic.example/1",)"
    R"("expires_at":"2026-11-30T11:00:00Z","drm_payload":"AAEC\u00e9\"q\\"}},)"
    R"({"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch","status":429,"error_code":"rate_limited",)"
    R"("reason":"prefetch_shed","retry_after":2},)"
    R"({"film_ref":"the-heiress-returns","episode_no":6,"intent":"prefetch","status":404,"error_code":"not_ready"}]})";

wandura::response_body body_of(std::string_view text) {
  wandura::response_body body;
  body.assign(text);
  return body;
}

} // namespace

TEST_CASE("response parser: the SPEC example reads into four typed outcomes") {
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(body_of(spec_example), result));
  CHECK(parser.message().empty());
  CHECK(result.request_id == "req_...");
  REQUIRE(result.items.size() == 4);

  auto const& granted = result.items[0];
  CHECK(granted.film_ref == "the-heiress-returns");
  CHECK(granted.episode_no == 4);
  CHECK(granted.intent == wandura::intent::play);
  CHECK(granted.status == 200);
  CHECK(granted.outcome == item_outcome::granted);
  CHECK_FALSE(granted.reused);
  REQUIRE(granted.ticket);
  CHECK(granted.ticket->ticket_id == "tkt_...");
  CHECK(granted.ticket->manifest_url == "https://...");
  CHECK(granted.ticket->license_url == "https://...");
  CHECK(granted.ticket->drm_payload == "...");
  CHECK(granted.ticket->expires_at_text == "2026-11-30T11:00:00Z");
  CHECK(granted.ticket->expires_at == sys_days{year{2026} / 11 / 30} + hours{11});
  CHECK_FALSE(granted.error);

  auto const& shed = result.items[1];
  CHECK(shed.outcome == item_outcome::shed);
  CHECK(shed.intent == wandura::intent::prefetch);
  CHECK(shed.error_code == "rate_limited");
  CHECK(shed.reason == "prefetch_shed");
  CHECK(shed.retry_after == seconds(2));
  CHECK_FALSE(shed.ticket);

  CHECK(result.items[2].outcome == item_outcome::not_ready);
  CHECK(result.items[2].episode_no == 9);
  CHECK_FALSE(result.items[2].retry_after);
  CHECK(result.items[3].outcome == item_outcome::unavailable);
  CHECK(result.items[3].retry_after == seconds(1));
}

TEST_CASE("response parser: escaped strings are unescaped and copied out before the parser is reused") {
  response_parser parser;
  wandura::ticket_batch_result first;
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(full_batch), first));
  REQUIRE(first.items.size() == 3);
  REQUIRE(first.items[0].ticket);
  CHECK(first.items[0].reused);
  CHECK(first.items[0].ticket->drm_payload == "AAEC\xC3\xA9\"q\\");

  wandura::ticket_batch_result second;
  REQUIRE_FALSE(parser.parse_ticket_batch(body_of(spec_example), second));
  // The first result owns its strings: parsing another body changed nothing in it.
  CHECK(first.request_id == "req_7");
  CHECK(first.items[0].ticket->ticket_id == "tkt_1");
  CHECK(first.items[0].ticket->manifest_url == "https://cdn.example/m/1.mpd");
  CHECK(first.items[1].reason == "prefetch_shed");
}

TEST_CASE("response parser: unknown fields anywhere are ignored and unknown enum values keep their text") {
  constexpr char const* body = R"({"api_version":3,"nested":{"a":[1,{"b":null}],"items":"not these"},
    "items":[{"film_ref":"f","future":{"x":[true,false]},"episode_no":2,"intent":"preload","status":200,
      "ticket":{"ticket_id":"t","expires_at":"2026-11-30T11:00:00Z","watermark":{"k":"v"}},"error":"ok"},
     {"film_ref":"f","episode_no":3,"intent":"prefetch","status":418,"error_code":"teapot_mode","reason":"new",
      "retry_after":null}],
    "error":"partial","error_code":"rate_limited"})";
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(body), result));
  REQUIRE(result.items.size() == 2);
  CHECK(result.request_id.empty());
  CHECK(result.items[0].intent == wandura::intent::other);
  CHECK(result.items[0].intent_text == "preload");
  CHECK(result.items[0].outcome == item_outcome::granted);
  CHECK(result.items[0].ticket->manifest_url.empty());
  CHECK(result.items[1].intent_text.empty());
  CHECK(result.items[1].outcome == item_outcome::failed);
  CHECK(result.items[1].error == wandura::errc::http_error);
  CHECK(result.items[1].error_code == "teapot_mode");
  CHECK_FALSE(result.items[1].retry_after);
}

TEST_CASE("response parser: white space anywhere is fine, a key spelled with escapes means what it spells") {
  constexpr char const* body = "{\n\t\"items\" \t\r\n :\n [ { \"film_ref\" : \"f\" , \"episode_no\"\t:\t3 ,"
                               " \"intent\"\n:\n\"play\", \"status\"  :  404 , \"error_code\" : \"not_ready\" ,"
                               " \"re\\u0061son\" : \"escaped key\" } ] ,\"request_id\":\"r\" \n}\n";
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(body), result));
  REQUIRE(result.items.size() == 1);
  CHECK(result.items[0].film_ref == "f");
  CHECK(result.items[0].episode_no == 3);
  CHECK(result.items[0].outcome == item_outcome::not_ready);
  CHECK(result.items[0].reason == "escaped key"); // "re\u0061son" is the key "reason"
  CHECK(result.request_id == "r");
}

TEST_CASE("response parser: keys spelled with escapes are read in every body, and a broken escape in one is refused") {
  response_parser parser;
  wandura::org_config config;
  REQUIRE_FALSE(parser.parse_org_config(
      std::string_view(R"({"org_\u0069d":"org_demo","limits":{"pl\u0061yback":6000,"c\u0061talog":1200}})"), config));
  CHECK(config.org_id == "org_demo");
  CHECK(config.limit("playback") == 6000); // the counter's name unescaped, not its text "pl\u0061yback"
  CHECK(config.limit("catalog") == 1200);
  CHECK(config.limits.size() == 2);

  wandura::film film;
  REQUIRE_FALSE(parser.parse_film(std::string_view(R"({"film\u005fref":"f","episodes":2})"), film));
  CHECK(film.film_ref == "f");

  wandura::ticket_batch_result batch;
  REQUIRE_FALSE(parser.parse_ticket_batch(
      std::string_view(R"({"items":[{"film_ref":"f","episode_no":1,"intent":"play","st\u0061tus":200,)"
                       R"("ticket":{"ticket_id":"t","expires_at":"2026-11-30T11:00:00Z","license_url":"\/l"}}]})"),
      batch));
  REQUIRE(batch.items.size() == 1);
  CHECK(batch.items[0].status == 200);
  REQUIRE(batch.items[0].ticket);
  CHECK(batch.items[0].ticket->license_url == "/l");

  // A key whose escapes do not unescape (a lone surrogate, an unknown escape) names no known field: skipped as any
  // unknown key, the rest read; a counter so named keeps its raw text.
  REQUIRE_FALSE(parser.parse_org_config(
      std::string_view(R"({"x\q":1,"org_id":"o","limits":{"\ud800x":1,"playback":5},"pl\u006":2})"), config));
  CHECK(config.org_id == "o");
  CHECK(config.limit("playback") == 5);
  CHECK(config.limit("\\ud800x") == 1);
  REQUIRE_FALSE(parser.parse_ticket_batch(
      std::string_view(R"({"items":[{"x\q":1,"film_ref":"f","episode_no":1,"intent":"play","status":404,)"
                       R"("error_code":"not_ready"}]})"),
      batch));
  REQUIRE(batch.items.size() == 1);
  CHECK(batch.items[0].outcome == item_outcome::not_ready);
}

TEST_CASE("response parser: numeric error codes, fractional retry_after and a ticket on a refused item") {
  constexpr char const* body = R"({"items":[{"film_ref":"f","episode_no":1,"intent":"play","status":503,
      "error_code":50200,"retry_after":1.2,"ticket":{"ticket_id":"t","expires_at":"2026-11-30T11:00:00Z"}}]})";
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(body), result));
  REQUIRE(result.items.size() == 1);
  CHECK(result.items[0].error_code == "50200");
  CHECK(result.items[0].retry_after == seconds(2)); // rounded up: never retry early
  CHECK(result.items[0].outcome == item_outcome::unavailable);
  CHECK_FALSE(result.items[0].ticket); // a ticket is present exactly when granted
}

TEST_CASE("response parser: a reused result object keeps nothing stale from the previous body") {
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(full_batch), result));
  REQUIRE(result.items.size() == 3);
  REQUIRE(result.items[0].ticket);

  REQUIRE_FALSE(parser.parse_ticket_batch(
      std::string_view(R"({"items":[{"film_ref":"g","episode_no":2,"intent":"prefetch","status":404,)"
                       R"("error_code":"not_ready"}]})"),
      result));
  REQUIRE(result.items.size() == 1);
  CHECK(result.request_id.empty());
  CHECK(result.items[0].film_ref == "g");
  CHECK_FALSE(result.items[0].ticket);
  CHECK_FALSE(result.items[0].reused);
  CHECK(result.items[0].reason.empty());
  CHECK_FALSE(result.items[0].retry_after);

  REQUIRE_FALSE(parser.parse_ticket_batch(
      std::string_view(R"({"items":[{"film_ref":"h","episode_no":1,"intent":"play","status":200,)"
                       R"("ticket":{"ticket_id":"tkt_new","expires_at":"2026-12-01T00:00:00Z"}},)"
                       R"({"film_ref":"h","episode_no":2,"intent":"play","status":200,)"
                       R"("ticket":{"ticket_id":"tkt_2","expires_at":"2026-12-01T00:00:00Z","drm_payload":"d"}}]})"),
      result));
  REQUIRE(result.items.size() == 2);
  REQUIRE(result.items[0].ticket);
  CHECK(result.items[0].ticket->ticket_id == "tkt_new");
  CHECK(result.items[0].ticket->manifest_url.empty());
  CHECK(result.items[0].ticket->license_url.empty());
  CHECK(result.items[0].ticket->drm_payload.empty());
  CHECK(result.items[0].error_code.empty());
  CHECK(result.items[1].ticket->drm_payload == "d");
  CHECK(result.items[1].ticket->manifest_url.empty());
}

TEST_CASE("response parser: an empty items list is a valid batch") {
  response_parser parser;
  wandura::ticket_batch_result result;
  result.items.resize(2);
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(R"({"request_id":"r","items":[]})"), result));
  CHECK(result.items.empty());
}

TEST_CASE("response parser: every truncation of a valid body is invalid_response, never a crash") {
  for (std::string_view const valid : {std::string_view(full_batch), std::string_view(spec_example)}) {
    response_parser parser;
    wandura::ticket_batch_result result;
    REQUIRE_FALSE(parser.parse_ticket_batch(valid, result));
    for (std::size_t n = 0; n < valid.size(); ++n) {
      auto const prefix = valid.substr(0, n);
      INFO("prefix of " << n << " bytes: " << prefix);
      // Through the in-place path (the padding past the end holds whatever the buffer held).
      wandura::response_body body;
      body.reserve(valid.size());
      body.assign(prefix);
      auto ec = parser.parse_ticket_batch(body, result);
      CHECK(ec == wandura::errc::invalid_response);
      CHECK_FALSE(parser.message().empty());
      // And through the copying path.
      CHECK(parser.parse_ticket_batch(prefix, result) == wandura::errc::invalid_response);
    }
  }
}

TEST_CASE("response parser: garbage bodies are invalid_response with a message") {
  response_parser parser;
  wandura::ticket_batch_result result;
  struct bad_case {
    std::string body;
    std::string message_part;
  };
  std::vector<bad_case> const cases = {
      {"", "empty"},
      {"   ", "empty"},
      {"null", "not a JSON object"},
      {"42", "not a JSON object"},
      {"\"items\"", "not a JSON object"},
      {"[]", "not a JSON object"},
      {"<html><body>502 Bad Gateway</body></html>", ""},
      {"{", ""},
      {"}", ""},
      {R"({"items":[]} {"items":[]})", "trailing"},
      {R"({"items":[]}x)", "or something follows the top-level object"},
      {R"({"items":[]} x)", "or something follows the top-level object"},
      {R"({} x)", "or something follows the top-level object"},
      {R"({"items":[)", "an object or array is not closed"},
      {R"({"items":{}})", "items: expected an array"},
      {R"({"request_id":"r"})", "missing items"},
      {R"({"request_id":7,"items":[]})", "request_id: expected a string"},
      {"{\"items\":[],\"x\":\"\xff\xfe\"}", "UTF-8"},
      {std::string("{\"items\":[]\0}", 13), ""},
      {std::string(2000, '[') + std::string(2000, ']'), ""},
      // The structure broken inside an item: nothing after it can be read, so the whole body fails.
      {R"({"items":[{"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"ticket_id":"t",}}]})", ""},
      {R"({"items":[{"film_ref":"f","episode_no":1 "intent":"play"}]})", ""},
  };
  for (auto const& c : cases) {
    INFO(c.body.substr(0, 200));
    CHECK(parser.parse_ticket_batch(std::string_view(c.body), result) == wandura::errc::invalid_response);
    CAPTURE(parser.message());
    CHECK_FALSE(parser.message().empty());
    CHECK(parser.message().find(c.message_part) != std::string::npos);
  }
}

TEST_CASE("response parser: an item that breaks the rules fails alone, unreadable_item with what was wrong") {
  // ticket_result.hpp, unreadable_item_code: the item is failed with invalid_response and a detail naming the
  // place; the fields read before are kept, its ticket is not; the body reads, and so do the other items.
  response_parser parser;
  wandura::ticket_batch_result result;
  std::string const good = R"({"film_ref":"g","episode_no":9,"intent":"prefetch","status":200,"reused":true,)"
                           R"("ticket":{"ticket_id":"t9","expires_at":"2026-11-30T11:00:00Z"}})";
  struct bad_item {
    std::string item;
    std::string detail_part;
  };
  std::vector<bad_item> const cases = {
      {"1", "items[0]: expected an object"},
      {"null", "items[0]: expected an object"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play"})", "items[0]: missing status"},
      {R"({"film_ref":"f","episode_no":1,"status":200})", "items[0]: missing intent"},
      {R"({"episode_no":1,"intent":"play","status":200})", "items[0]: missing film_ref"},
      {R"({"film_ref":"f","intent":"play","status":404})", "items[0]: missing episode_no"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":"200"})", "items[0].status: expected"},
      {R"({"film_ref":"f","episode_no":0,"intent":"play","status":404})", "items[0].episode_no: out of range"},
      {R"({"film_ref":"f","episode_no":1.5,"intent":"play","status":404})", "items[0].episode_no: expected"},
      {R"({"film_ref":7,"episode_no":1,"intent":"play","status":200})", "items[0].film_ref: expected"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200})", "without a ticket"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"expires_at":"2026-11-30T11:00:00Z"}})",
       "items[0].ticket: missing ticket_id"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"ticket_id":"t"}})",
       "items[0].ticket: missing expires_at"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"ticket_id":"t","expires_at":"tomorrow"}})",
       "items[0].ticket.expires_at: not an RFC 3339"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"ticket_id":"t","expires_at":"9999-12-31T23:59:59Z"}})",
       "items[0].ticket.expires_at: not an RFC 3339"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":"tkt"})",
       "items[0].ticket: expected an object"},
      // A field that fails inside the ticket, with more of the ticket and of the item after it: both skipped right.
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":200,"ticket":{"ticket_id":5,"x":{"y":[1,{}]},)"
       R"("expires_at":"2026-11-30T11:00:00Z"},"reason":"r"})",
       "items[0].ticket.ticket_id: expected a string"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":429,"reused":"no"})", "items[0].reused"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":429,"retry_after":"soon"})",
       "items[0].retry_after: expected a number of seconds"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":429,"retry_after":-1})",
       "items[0].retry_after: out of range"},
      {R"({"film_ref":"f","episode_no":1,"intent":"play","status":429,"error_code":[1]})", "items[0].error_code"},
      {R"({"film_ref":"f\u00","episode_no":1,"intent":"play","status":404})", "items[0].film_ref: malformed string"},
  };
  for (auto const& c : cases) {
    for (bool const first : {true, false}) {
      std::string const body = first ? R"({"request_id":"r1","items":[)" + c.item + "," + good + "]}"
                                     : R"({"request_id":"r1","items":[)" + good + "," + c.item + "]}";
      INFO(body);
      std::string detail_part = c.detail_part;
      if (auto const at = detail_part.find("items[0]"); !first && at != std::string::npos) {
        detail_part.replace(at, 8, "items[1]");
      }
      REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(body), result));
      CHECK(parser.message().empty());
      CHECK(result.request_id == "r1");
      REQUIRE(result.items.size() == 2);
      auto const& bad = result.items[first ? 0 : 1];
      auto const& fine = result.items[first ? 1 : 0];
      CHECK(bad.outcome == wandura::item_outcome::failed);
      CHECK(bad.error == wandura::errc::invalid_response);
      CHECK(bad.error_code == wandura::unreadable_item_code);
      CHECK(bad.detail.find(detail_part) != std::string::npos);
      CHECK_FALSE(bad.ticket);
      CHECK(fine.outcome == wandura::item_outcome::granted);
      CHECK(fine.film_ref == "g");
      CHECK(fine.reused);
      REQUIRE(fine.ticket);
      CHECK(fine.ticket->ticket_id == "t9");
      CHECK(fine.detail.empty());
      // The result, reused from case to case, reads as a fresh one.
      wandura::ticket_batch_result fresh;
      REQUIRE_FALSE(response_parser().parse_ticket_batch(std::string_view(body), fresh));
      CHECK(fresh == result);
    }
  }

  // The fields read before and after the failure are kept: the client matches the item to its episode by them.
  std::string const late = R"({"items":[{"film_ref":"f","episode_no":3,"retry_after":"x","intent":"prefetch",)"
                           R"("status":503,"reason":"busy"}]})";
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(late), result));
  REQUIRE(result.items.size() == 1);
  CHECK(result.items[0].film_ref == "f");
  CHECK(result.items[0].episode_no == 3);
  CHECK(result.items[0].intent == wandura::intent::prefetch);
  CHECK(result.items[0].status == 503);
  CHECK(result.items[0].reason == "busy");
  CHECK(result.items[0].error_code == wandura::unreadable_item_code);
  CHECK(result.items[0].detail == "items[0].retry_after: expected a number of seconds");

  // Read into a result that holds a failed item, a good body leaves no trace of it.
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(R"({"items":[)" + good + "]}"), result));
  REQUIRE(result.items.size() == 1);
  CHECK(result.items[0].outcome == wandura::item_outcome::granted);
  CHECK(result.items[0].error_code.empty());
  CHECK(result.items[0].detail.empty());
}

TEST_CASE("response parser: numbers out of range are refused, not wrapped") {
  response_parser parser;
  wandura::ticket_batch_result result;
  auto item = [](std::string_view episode, std::string_view status, std::string_view extra = {}) {
    return std::string(R"({"items":[{"film_ref":"f","intent":"prefetch","episode_no":)") + std::string(episode) +
           R"(,"status":)" + std::string(status) + std::string(extra) + "}]}";
  };
  struct bad_case {
    std::string body;
    std::string message_part;
  };
  std::vector<bad_case> const cases = {
      {item("0", "404"), "items[0].episode_no: out of range"},
      {item("-1", "404"), "items[0].episode_no: out of range"},
      {item("2147483648", "404"), "items[0].episode_no: out of range"},
      {item("99999999999999999999", "404"), "items[0].episode_no"},
      {item("1.5", "404"), "items[0].episode_no: expected an integer"},
      {item("04", "404"), "items[0].episode_no"},                                // JSON has no leading zeros
      {item("100000000000000000", "404"), "items[0].episode_no: out of range"},  // 18 digits, read in place
      {item("1000000000000000000", "404"), "items[0].episode_no: out of range"}, // 19, through simdjson
      {item("1", "4040"), "items[0].status: out of range"},
      {item("1e3", "404"), "items[0].episode_no"},
      {item("1", "99"), "items[0].status: out of range"},
      {item("1", "600"), "items[0].status: out of range"},
      {item("1", "-200"), "items[0].status: out of range"},
      {item("1", "1e400"), "items[0].status"},
      {item("1", "429", R"(,"retry_after":-1)"), "items[0].retry_after: out of range"},
      {item("1", "429", R"(,"retry_after":1e8)"), "items[0].retry_after: out of range"},
      {item("1", "429", R"(,"retry_after":"2")"), "items[0].retry_after: expected"},
      {item("1", "429", R"(,"error_code":1.5)"), "items[0].error_code"},
      {item("1", "429", R"(,"error_code":123456789012345678901234)"), "items[0].error_code"},
  };
  for (auto const& c : cases) { // each fails its item alone (unreadable_item_code)
    INFO(c.body);
    REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(c.body), result));
    REQUIRE(result.items.size() == 1);
    CHECK(result.items[0].outcome == wandura::item_outcome::failed);
    CHECK(result.items[0].error_code == wandura::unreadable_item_code);
    CHECK(result.items[0].detail.find(c.message_part) != std::string::npos);
  }
  // The edges themselves are fine.
  REQUIRE_FALSE(parser.parse_ticket_batch(std::string_view(item("2147483647", "599", R"(,"retry_after":0)")), result));
  CHECK(result.items[0].episode_no == 2147483647);
  CHECK(result.items[0].retry_after == seconds(0));
}

TEST_CASE("response parser: huge strings and many items are read intact") {
  std::string payload(1 << 20, 'A');
  for (std::size_t i = 0; i < payload.size(); i += 97) {
    payload[i] = static_cast<char>('a' + (i % 26));
  }
  std::string body = R"({"items":[)";
  for (int i = 1; i <= 300; ++i) {
    if (i > 1) {
      body += ',';
    }
    body += R"({"film_ref":"f","episode_no":)" + std::to_string(i) +
            R"(,"intent":"play","status":200,"ticket":)"
            R"({"ticket_id":"t)" +
            std::to_string(i) + R"(","expires_at":"2026-11-30T11:00:00Z","drm_payload":")" +
            (i == 150 ? payload : std::string("p")) + R"("}})";
  }
  body += "]}";
  response_parser parser;
  wandura::ticket_batch_result result;
  REQUIRE_FALSE(parser.parse_ticket_batch(body_of(body), result));
  REQUIRE(result.items.size() == 300);
  CHECK(result.items[149].ticket->drm_payload == payload);
  CHECK(result.items[299].ticket->ticket_id == "t300");
  CHECK(result.items[299].episode_no == 300);
}

TEST_CASE("response parser: config reads every counter's limit") {
  response_parser parser;
  wandura::org_config config;
  REQUIRE_FALSE(parser.parse_org_config(
      std::string_view(R"({"org_id":"org_demo","limits":{"playback":6000,"catalog":1200,"creatives":600,)"
                       R"("videos":600,"video":600,"config":600,"future_counter":5},"plan":"x"})"),
      config));
  CHECK(config.org_id == "org_demo");
  CHECK(config.limits.size() == 7);
  CHECK(config.limit("playback") == 6000);
  CHECK(config.limit("catalog") == 1200);
  CHECK(config.limit("future_counter") == 5);
  CHECK(parser.parse_org_config(std::string_view(R"({"limits":{"playback":-1}})"), config) ==
        wandura::errc::invalid_response);
  CHECK(parser.message().find("limits.playback: out of range") != std::string::npos);
  CHECK(parser.parse_org_config(std::string_view(R"({"limits":{"playback":"6000"}})"), config) ==
        wandura::errc::invalid_response);
}

TEST_CASE("response parser: a film's episodes may be a count or a list") {
  response_parser parser;
  wandura::film f;
  REQUIRE_FALSE(parser.parse_film(std::string_view(R"({"film_ref":"the-heiress-returns","title":"The Heiress Returns",)"
                                                   R"("episodes":12,"genres":["drama"]})"),
                                  f));
  CHECK(f == wandura::film{"the-heiress-returns", "The Heiress Returns", 12});
  REQUIRE_FALSE(parser.parse_film(std::string_view(R"({"film_ref":"x","episodes":[{"no":1},{"no":2},3]})"), f));
  CHECK(f.episode_count == 3);
  CHECK(f.title.empty());
  CHECK(parser.parse_film(std::string_view(R"({"title":"no ref","episodes":1})"), f) ==
        wandura::errc::invalid_response);
  CHECK(parser.message().find("missing film_ref") != std::string::npos);
  CHECK(parser.parse_film(std::string_view(R"({"film_ref":"x","episodes":-3})"), f) == wandura::errc::invalid_response);
}

TEST_CASE("response parser: a film's episodes null read as absent, a list's elements must be episodes") {
  response_parser parser;
  wandura::film f;
  // null is absent for every optional field: the title's and the episodes' alike.
  REQUIRE_FALSE(parser.parse_film(std::string_view(R"({"film_ref":"x","title":null,"episodes":null})"), f));
  CHECK(f == wandura::film{"x", "", 0});
  REQUIRE_FALSE(parser.parse_film(std::string_view(R"({"film_ref":"x","episodes":[]})"), f));
  CHECK(f.episode_count == 0);
  // An element that is neither an object nor a number is not an episode: the count would be a guess.
  for (auto const* body : {R"({"film_ref":"x","episodes":[1,null]})", R"({"film_ref":"x","episodes":[1,"2"]})",
                           R"({"film_ref":"x","episodes":[1,[2]]})", R"({"film_ref":"x","episodes":[1,true]})"}) {
    INFO(body);
    CHECK(parser.parse_film(std::string_view(body), f) == wandura::errc::invalid_response);
    CHECK(parser.message() == "episodes[1]: expected an object or a number");
  }
}

TEST_CASE("response parser: videos, one video and creatives") {
  response_parser parser;
  std::vector<wandura::video> videos;
  REQUIRE_FALSE(parser.parse_videos(
      std::string_view(R"({"videos":[{"video_ref":"v1","title":"Trailer","url":"https://v/1","len":3},)"
                       R"({"video_ref":"v2"}],"next":null})"),
      videos));
  REQUIRE(videos.size() == 2);
  CHECK(videos[0] == wandura::video{"v1", "Trailer", "https://v/1"});
  CHECK(videos[1] == wandura::video{"v2", "", ""});
  CHECK(parser.parse_videos(std::string_view(R"({"videos":[{"title":"x"}]})"), videos) ==
        wandura::errc::invalid_response);
  CHECK(parser.message().find("videos[0]: missing video_ref") != std::string::npos);

  wandura::video v;
  REQUIRE_FALSE(parser.parse_video(std::string_view(R"({"video_ref":"v9","title":"T","url":"u"})"), v));
  CHECK(v == wandura::video{"v9", "T", "u"});
  CHECK(parser.parse_video(std::string_view("[]"), v) == wandura::errc::invalid_response);
  CHECK(parser.message() == "not a JSON object");

  std::vector<wandura::creative> creatives;
  REQUIRE_FALSE(parser.parse_creatives(
      std::string_view(R"({"creatives":[{"creative_id":"c1","url":"https://c/1"},{"creative_id":42}]})"), creatives));
  REQUIRE(creatives.size() == 2);
  CHECK(creatives[0] == wandura::creative{"c1", "https://c/1"});
  CHECK(creatives[1].creative_id == "42");
  CHECK(parser.parse_creatives(std::string_view(R"({"creatives":{}})"), creatives) == wandura::errc::invalid_response);
}

TEST_CASE("response parser: a key repeated within an object counts once, the last one, everywhere") {
  // response_parser.hpp: fields, lists, the limits object and a counter named twice in it alike.
  response_parser parser;
  wandura::org_config config;
  REQUIRE_FALSE(parser.parse_org_config(std::string_view(R"({"org_id":"a","limits":{"catalog":5},"org_id":"b",)"
                                                         R"("limits":{"playback":6000,"catalog":1200,"playback":10}})"),
                                        config));
  CHECK(config.org_id == "b");
  CHECK(config == wandura::org_config{"b", {{"playback", 10}, {"catalog", 1200}}});
  CHECK(config.limit("playback") == 10);

  std::vector<wandura::video> videos;
  REQUIRE_FALSE(parser.parse_videos(
      std::string_view(R"({"videos":[{"video_ref":"v1"},{"video_ref":"v2"}],"videos":[{"video_ref":"v3"}]})"), videos));
  CHECK(videos == std::vector<wandura::video>{{"v3", "", ""}});

  std::vector<wandura::creative> creatives;
  REQUIRE_FALSE(parser.parse_creatives(
      std::string_view(R"({"creatives":[{"creative_id":"c1"}],"creatives":[{"creative_id":"c2","creative_id":"c3"}]})"),
      creatives));
  CHECK(creatives == std::vector<wandura::creative>{{"c3", ""}});

  wandura::film f;
  REQUIRE_FALSE(
      parser.parse_film(std::string_view(R"({"film_ref":"x","episodes":3,"film_ref":"y","episodes":[1]})"), f));
  CHECK(f == wandura::film{"y", "", 1});

  wandura::ticket_batch_result batch;
  REQUIRE_FALSE(parser.parse_ticket_batch(
      std::string_view(R"({"items":[{"film_ref":"f","episode_no":1,"intent":"play","status":404}],)"
                       R"("items":[{"film_ref":"g","episode_no":2,"intent":"play","status":503,"status":404}]})"),
      batch));
  REQUIRE(batch.items.size() == 1);
  CHECK(batch.items[0].film_ref == "g");
  CHECK(batch.items[0].status == 404);
}

namespace {

/// Everything a parse produced, as one line per field: results from two kernels are compared as text, so a
/// difference names the field.
std::string describe(std::error_code ec, std::string const& message, wandura::ticket_batch_result const& r) {
  std::string out = "ec=" + std::to_string(ec.value()) + " message=" + message + "\n";
  if (ec) {
    return out; // a failed parse leaves `r` unspecified
  }
  out += "request_id=" + r.request_id + "\n";
  for (auto const& item : r.items) {
    out += "item " + item.film_ref + " " + std::to_string(item.episode_no) +
           " intent=" + std::string(wandura::to_string(item.intent)) + "/" + item.intent_text +
           " outcome=" + std::string(wandura::to_string(item.outcome)) + " status=" + std::to_string(item.status) +
           " reused=" + std::to_string(item.reused) + " error_code=" + item.error_code + " reason=" + item.reason +
           " retry_after=" + (item.retry_after ? std::to_string(item.retry_after->count()) : "-") +
           " error=" + std::to_string(item.error.value()) + "\n";
    if (item.ticket) {
      auto const& t = *item.ticket;
      out += "  ticket " + t.ticket_id + " " + t.manifest_url + " " + t.license_url + " " + t.expires_at_text + " " +
             std::to_string(t.expires_at.time_since_epoch().count()) + " " + t.drm_payload + "\n";
    }
  }
  return out;
}

/// Restores simdjson's active kernel when the test ends, however it ends.
struct active_kernel_guard {
  simdjson::implementation const* saved = simdjson::get_active_implementation();
  active_kernel_guard() = default;
  active_kernel_guard(active_kernel_guard const&) = delete;
  active_kernel_guard& operator=(active_kernel_guard const&) = delete;
  ~active_kernel_guard() { simdjson::get_active_implementation() = saved; }
};

/// Bodies whose bytes reach every kernel-specific part of simdjson's stage 1: strings and escapes across its
/// 64-byte blocks, white space of every kind, and invalid UTF-8 of each sort (stage 1 validates UTF-8 with SIMD).
std::vector<std::string> kernel_bodies() {
  std::vector<std::string> out{spec_example, full_batch};
  auto item = [](std::string const& film, std::string const& payload) {
    return R"({"film_ref":")" + film + R"(","episode_no":3,"intent":"play","status":200,"ticket":{"ticket_id":"t",)" +
           R"("expires_at":"2026-11-30T11:00:00.250+01:00","drm_payload":")" + payload + R"("}})";
  };
  // An escape at every offset of a 64-byte block, then a multi-byte character at every offset.
  for (std::size_t pad = 0; pad < 70; ++pad) {
    out.push_back(R"({"items":[)" +
                  item(std::string(pad, 'f'), std::string(pad, 'p') + R"(\"\\\/\n\u00e9\ud83d\ude00)") + "]}");
    out.push_back(R"({"items":[)" + item(std::string(pad, 'f') + "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "x") + "]}");
  }
  // Invalid UTF-8 in a string, at several offsets: a lone continuation byte, an overlong form, a surrogate, past
  // U+10FFFF, a truncated sequence, and 0xFF.
  for (std::string const bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\xFF"}) {
    for (std::size_t const pad : {0U, 13U, 31U, 62U, 63U, 64U, 65U, 127U}) {
      out.push_back(R"({"items":[)" + item(std::string(pad, 'f') + bad + "g", "x") + "]}");
    }
  }
  // A lone surrogate escape, a control character in a string, and white space of each kind between tokens.
  out.push_back(R"({"items":[)" + item("f", R"(\ud800)") + "]}");
  out.push_back(R"({"items":[)" + item("f\x01", "x") + "]}");
  out.push_back(" \t\r\n{ \t\r\n\"items\" \t\r\n: \t\r\n[ \t\r\n] \t\r\n} \t\r\n");
  // Every truncation of the full batch.
  for (std::size_t n = 0; n < std::string_view(full_batch).size(); n += 7) {
    out.push_back(std::string(full_batch, n));
  }
  return out;
}

} // namespace

TEST_CASE("response parser: every simdjson kernel this CPU runs reads every body alike") {
  // The ticket reader's stage 1 is simdjson's, picked at run time for the CPU (icelake, haswell, westmere, the
  // portable fallback, ...): a parser takes the active kernel when it first allocates. Each kernel the CPU supports
  // reads each body into what the default kernel reads, byte for byte, including the errors.
  std::vector<std::string> const bodies = kernel_bodies();
  std::vector<std::string> expected;
  {
    response_parser parser;
    for (auto const& body : bodies) {
      wandura::ticket_batch_result result;
      auto const ec = parser.parse_ticket_batch(std::string_view(body), result);
      expected.push_back(describe(ec, parser.message(), result));
    }
  }
  // The default kernel's reading of a few of them, so that agreement is agreement on the right answer.
  CHECK(expected[0].find("outcome=granted") != std::string::npos);
  CHECK(expected[2].find("\"\\/\n\xC3\xA9\xF0\x9F\x98\x80") != std::string::npos);
  std::size_t invalid = 0;
  for (auto const& e : expected) {
    invalid += e.find("UTF-8") != std::string::npos ? 1U : 0U;
  }
  CHECK(invalid == 6 * 8);

  active_kernel_guard const guard;
  std::vector<std::string> kernels_run;
  for (auto const* kernel : simdjson::get_available_implementations()) {
    if (!kernel->supported_by_runtime_system()) {
      continue;
    }
    simdjson::get_active_implementation() = kernel;
    kernels_run.emplace_back(kernel->name());
    response_parser parser; // allocates with the kernel now active
    wandura::ticket_batch_result result;
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      auto const ec = parser.parse_ticket_batch(std::string_view(bodies[i]), result);
      INFO("kernel " << kernel->name() << ", body " << i << ": " << bodies[i].substr(0, 160));
      CHECK(describe(ec, parser.message(), result) == expected[i]);
    }
  }
  INFO("kernels run: " << kernels_run.size());
  CHECK(std::find(kernels_run.begin(), kernels_run.end(), guard.saved->name()) != kernels_run.end());
  CHECK(std::find(kernels_run.begin(), kernels_run.end(), "fallback") != kernels_run.end());
}
