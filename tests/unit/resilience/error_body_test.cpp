#include "resilience/error_body.hpp"

#include <catch2/catch.hpp>

namespace {
wandura::detail::error_body parse(std::string_view text) {
  wandura::response_body body;
  body.assign(text);
  return wandura::detail::parse_error_body(body);
}
} // namespace

TEST_CASE("error body: flat fields are read, string or numeric codes alike") {
  auto const a =
      parse(R"({"error":"Too many","error_code":"rate_limited","reason":"prefetch_shed","request_id":"req_1"})");
  CHECK(a.error_code == "rate_limited");
  CHECK(a.reason == "prefetch_shed");
  CHECK(a.message == "Too many");
  CHECK(a.request_id == "req_1");
  auto const b = parse(R"({"error_code":50200,"error":"upstream"})");
  CHECK(b.error_code == "50200");
  CHECK(b.reason.empty());
}

TEST_CASE("error body: unknown fields and wrong types are skipped") {
  auto const e =
      parse(R"({"items":[{"status":429,"error_code":"x"}],"error_code":"not_ready","reason":{"a":1},"z":null})");
  CHECK(e.error_code == "not_ready");
  CHECK(e.reason.empty());
  auto const n = parse(R"({"error_code":"unauthorized","reason":null,"request_id":"req_9","x":[]})");
  CHECK(n.error_code == "unauthorized");
  CHECK(n.reason.empty());
  CHECK(n.request_id == "req_9");
}

TEST_CASE("error body: bodies that are not a JSON object give empty fields, never an exception") {
  for (auto text : {"", "<html>502 Bad Gateway</html>", "[1,2]", "\"str\"", "{\"error_code\":", "{\"error_code\":\"na",
                    "{\"error_code\" \"x\"}", "null", "{}"}) {
    INFO("body: " << text);
    wandura::detail::error_body e;
    REQUIRE_NOTHROW(e = parse(text));
    CHECK(e.reason.empty());
  }
  REQUIRE_NOTHROW(parse(R"({"error_code":"not_ready","reason":)"));
}
