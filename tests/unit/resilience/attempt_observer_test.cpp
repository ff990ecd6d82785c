#include "wandura/resilience/attempt_observer.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"

TEST_CASE("attempt observer: attributes name method, URL without query, host and port") {
  wandura::http_request request;
  request.method = wandura::http_method::post;
  request.url = "https://api.wandura.example/v1/playback/tickets?debug=1#top";
  auto const a = wandura::make_attempt_begin("issue_tickets", request, 2);
  CHECK(a.operation == "issue_tickets");
  CHECK(a.method == "POST");
  CHECK(a.url_full == "https://api.wandura.example/v1/playback/tickets");
  CHECK(a.server_address == "api.wandura.example");
  CHECK(a.server_port == 443);
  CHECK(a.resend_count == 2);

  request.method = wandura::http_method::get;
  request.url = "http://[::1]:8787/v1/config";
  auto const b = wandura::make_attempt_begin("get_config", request, 0);
  CHECK(b.method == "GET");
  CHECK(b.server_address == "::1");
  CHECK(b.server_port == 8787);

  request.url = "http://user:secret@127.0.0.1/v1/videos";
  auto const c = wandura::make_attempt_begin("list_videos", request, 0);
  CHECK(c.url_full.empty());
  CHECK(c.server_address == "127.0.0.1");
  CHECK(c.server_port == 80);
}

TEST_CASE("attempt observer: error.type is the status for >= 400, else the error's short name") {
  CHECK(wandura::attempt_error_type(200, {}).empty());
  CHECK(wandura::attempt_error_type(503, {}) == "503");
  CHECK(wandura::attempt_error_type(429, wandura::errc::rate_limited) == "429");
  CHECK(wandura::attempt_error_type(0, wandura::errc::connect_failed) == "connect_failed");
  CHECK(wandura::attempt_error_type(0, asio::error::operation_aborted) == "operation_aborted");
  CHECK(wandura::attempt_error_type(0, std::make_error_code(std::errc::io_error)) == "_OTHER");
}
