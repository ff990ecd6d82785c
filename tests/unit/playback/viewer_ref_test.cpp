#include "wandura/playback/viewer_ref.hpp"

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/error.hpp"

namespace {

std::string vectors_dir() {
  if (char const* dir = std::getenv("WANDURA_VECTORS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return WANDURA_TEST_VECTORS_DIR;
}

} // namespace

TEST_CASE("viewer_ref: matches every case of vectors/viewer-ref.json") {
  auto json = simdjson::padded_string::load(vectors_dir() + "/viewer-ref.json");
  REQUIRE(json.error() == simdjson::SUCCESS);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json.value());
  int cases = 0;
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    std::string_view const secret = c["secret"];
    std::string_view const user_id = c["user_id"];
    std::string_view const install_id = c["install_id"];
    std::string_view const expected = c["viewer_ref"];
    INFO(user_id);
    CHECK(wandura::make_viewer_ref(secret, user_id, install_id) == expected);
    std::error_code ec = wandura::errc::http_error;
    CHECK(wandura::make_viewer_ref(secret, user_id, install_id, ec) == expected);
    CHECK_FALSE(ec);
    ++cases;
  }
  CHECK(cases >= 3);
}

TEST_CASE("viewer_ref: refuses every invalid input of the vectors with invalid_argument") {
  auto json = simdjson::padded_string::load(vectors_dir() + "/viewer-ref.json");
  REQUIRE(json.error() == simdjson::SUCCESS);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json.value());
  int cases = 0;
  for (simdjson::dom::element c : doc["invalid"].get_array()) {
    std::string_view const secret = c["secret"];
    std::string_view const user_id = c["user_id"];
    std::string_view const install_id = c["install_id"];
    INFO(std::string_view(c["error"]));
    std::error_code ec;
    CHECK(wandura::make_viewer_ref(secret, user_id, install_id, ec).empty());
    CHECK(ec == wandura::errc::invalid_argument);
    try {
      (void)wandura::make_viewer_ref(secret, user_id, install_id);
      FAIL("no exception");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK(std::string(e.what()).find("empty") != std::string::npos);
    }
    ++cases;
  }
  CHECK(cases == 3);
}

TEST_CASE("viewer_ref: shape is 22 url-safe characters, a colon, 11, stable per viewer and device") {
  auto const a = wandura::make_viewer_ref("secret", "user-1", "install-1");
  REQUIRE(a.size() == 34);
  CHECK(a[22] == ':');
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i == 22) {
      continue;
    }
    char const c = a[i];
    bool const url_safe =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    CHECK(url_safe);
  }
  CHECK(a == wandura::make_viewer_ref("secret", "user-1", "install-1"));
  auto const other_device = wandura::make_viewer_ref("secret", "user-1", "install-2");
  CHECK(other_device.substr(0, 22) == a.substr(0, 22));
  CHECK(other_device.substr(23) != a.substr(23));
  CHECK(wandura::make_viewer_ref("secret2", "user-1", "install-1").substr(0, 22) != a.substr(0, 22));
  CHECK(a.find("user") == std::string::npos);
}
