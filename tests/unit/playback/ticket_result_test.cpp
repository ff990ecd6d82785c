#include "wandura/playback/ticket_result.hpp"

#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

using wandura::classify_item;
using wandura::intent;
using wandura::item_outcome;

TEST_CASE("item outcome: every outcome has a distinct stable name") {
  std::set<std::string> names;
  for (auto o : wandura::all_item_outcomes) {
    auto name = std::string(wandura::to_string(o));
    CHECK(name != "unknown");
    names.insert(name);
  }
  CHECK(names.size() == std::size(wandura::all_item_outcomes));
  CHECK(wandura::to_string(static_cast<item_outcome>(200)) == "unknown");
}

TEST_CASE("item outcome: the SPEC example's four items map to granted, shed, not_ready and unavailable") {
  CHECK(classify_item(200, "", "", intent::play).outcome == item_outcome::granted);
  CHECK(classify_item(429, "rate_limited", "prefetch_shed", intent::prefetch).outcome == item_outcome::shed);
  CHECK(classify_item(404, "not_ready", "", intent::prefetch).outcome == item_outcome::not_ready);
  CHECK(classify_item(503, "service_unavailable", "", intent::play).outcome == item_outcome::unavailable);
}

TEST_CASE("item outcome: a 429 is shed for prefetch or prefetch_shed, rate_limited for play") {
  CHECK(classify_item(429, "rate_limited", "", intent::prefetch).outcome == item_outcome::shed);
  CHECK(classify_item(429, "", "", intent::prefetch).outcome == item_outcome::shed);
  CHECK(classify_item(429, "rate_limited", "prefetch_shed", intent::play).outcome == item_outcome::shed);
  CHECK(classify_item(429, "rate_limited", "", intent::play).outcome == item_outcome::rate_limited);
  CHECK(classify_item(429, "42900", "", intent::play).outcome == item_outcome::rate_limited);
  CHECK(classify_item(429, "", "", intent::other).outcome == item_outcome::rate_limited);
}

TEST_CASE("item outcome: known codes win over the status, unknown codes go by status group") {
  CHECK(classify_item(503, "not_ready", "", intent::play).outcome == item_outcome::not_ready);
  CHECK(classify_item(403, "some_new_code", "", intent::play).outcome == item_outcome::not_entitled);
  CHECK(classify_item(400, "not_entitled", "", intent::play).outcome == item_outcome::not_entitled);
  CHECK(classify_item(500, "", "", intent::play).outcome == item_outcome::unavailable);
  CHECK(classify_item(502, "internal", "", intent::play).outcome == item_outcome::unavailable);
  CHECK(classify_item(599, "brand_new", "", intent::play).outcome == item_outcome::unavailable);
  CHECK(classify_item(201, "", "", intent::play).outcome == item_outcome::granted);
}

TEST_CASE("item outcome: failures carry a typed error and only failures do") {
  auto unauthorized = classify_item(401, "unauthorized", "", intent::play);
  CHECK(unauthorized.outcome == item_outcome::failed);
  CHECK(unauthorized.error == wandura::errc::unauthorized);
  for (int status : {400, 404, 409, 418, 422, 302, 101}) {
    INFO(status);
    auto c = classify_item(status, status == 404 ? "not_found" : "", "", intent::play);
    CHECK(c.outcome == item_outcome::failed);
    CHECK(c.error == wandura::errc::http_error);
  }
  for (int status : {200, 429, 503, 403}) {
    CHECK_FALSE(classify_item(status, "", "", intent::play).error);
  }
  CHECK_FALSE(classify_item(404, "not_ready", "", intent::play).error);
}
