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
  // Where no host was read, an '@' anywhere before the query may be user information: not reported either.
  for (char const* url : {"user:secret@127.0.0.1/v1/videos", "http://u:se/cret@127.0.0.1/v1/videos"}) {
    INFO(url);
    request.url = url;
    CHECK(wandura::make_attempt_begin("list_videos", request, 0).url_full.empty());
  }
}

TEST_CASE("attempt observer: the scheme's default port does not depend on the scheme's case") {
  wandura::http_request request;
  request.url = "HTTPS://api.wandura.example/v1/config";
  auto const upper = wandura::make_attempt_begin("get_config", request, 0);
  CHECK(upper.server_address == "api.wandura.example");
  CHECK(upper.server_port == 443);
  CHECK(upper.url_full == "HTTPS://api.wandura.example/v1/config");

  request.url = "Https://api.wandura.example/v1/config";
  CHECK(wandura::make_attempt_begin("get_config", request, 0).server_port == 443);

  request.url = "HTTP://api.wandura.example/v1/config";
  CHECK(wandura::make_attempt_begin("get_config", request, 0).server_port == 80);

  request.url = "HTTPS://api.wandura.example:8443/v1/config"; // an explicit port still wins
  CHECK(wandura::make_attempt_begin("get_config", request, 0).server_port == 8443);
}

TEST_CASE("attempt observer: error.type is the status for >= 400, else the error's short name") {
  CHECK(wandura::attempt_error_type(200, {}).empty());
  CHECK(wandura::attempt_error_type(503, {}) == "503");
  CHECK(wandura::attempt_error_type(429, wandura::errc::rate_limited) == "429");
  CHECK(wandura::attempt_error_type(0, wandura::errc::connect_failed) == "connect_failed");
  CHECK(wandura::attempt_error_type(0, asio::error::operation_aborted) == "operation_aborted");
  CHECK(wandura::attempt_error_type(0, std::make_error_code(std::errc::io_error)) == "_OTHER");
  // A status outside HTTP's classes is never a success (the call fails on it), and no three digits of a class.
  CHECK(wandura::attempt_error_type(0, {}).empty());
  CHECK(wandura::attempt_error_type(100, {}).empty());
  CHECK(wandura::attempt_error_type(399, {}).empty());
  CHECK(wandura::attempt_error_type(599, {}) == "599");
  for (int const odd : {1, 99, 600, 999, 1000, -1}) {
    INFO(odd);
    CHECK(wandura::attempt_error_type(odd, {}) == "_OTHER");
  }
  CHECK(wandura::attempt_error_type(600, wandura::errc::invalid_response) == "invalid_response");
}

TEST_CASE("attempt observer: attributes follow the URL when attempts alternate between URLs, and view the request") {
  wandura::http_request tickets;
  tickets.method = wandura::http_method::post;
  tickets.url = "https://api.wandura.example:8443/v1/playback/tickets";
  wandura::http_request config;
  config.url = "http://127.0.0.1:8787/v1/config?x=1";
  for (int round = 0; round < 3; ++round) {
    auto const a = wandura::make_attempt_begin("issue_tickets", tickets, round);
    CHECK(a.url_full == tickets.url);
    CHECK(a.url_full.data() == tickets.url.data()); // a view into this request, not into a copy
    CHECK(a.server_address == "api.wandura.example");
    CHECK(a.server_port == 8443);
    auto const b = wandura::make_attempt_begin("get_config", config, round);
    CHECK(b.url_full == "http://127.0.0.1:8787/v1/config");
    CHECK(b.server_address.data() == config.url.data() + 7);
    CHECK(b.server_address == "127.0.0.1");
    CHECK(b.server_port == 8787);
  }
  wandura::http_request same_bytes = tickets; // an equal URL in another string: views into that one
  auto const c = wandura::make_attempt_begin("issue_tickets", same_bytes, 0);
  CHECK(c.url_full.data() == same_bytes.url.data());
  CHECK(c.server_address == "api.wandura.example");
  wandura::http_request relative;
  relative.url = "/v1/config";
  auto const d = wandura::make_attempt_begin("get_config", relative, 0);
  CHECK(d.url_full == "/v1/config");
  CHECK(d.server_address.empty());
  CHECK(d.server_port == 0);
}
