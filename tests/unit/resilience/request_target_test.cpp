#include "request_target.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "wandura/resilience/call_result.hpp"
#include "wandura/resilience/retry_event.hpp"

namespace {
wandura::http_request post(std::string url) {
  wandura::http_request r;
  r.method = wandura::http_method::post;
  r.url = std::move(url);
  r.headers.push_back({"Authorization", "Bearer secret-key"});
  return r;
}
} // namespace

TEST_CASE("request target: method, path and host, never the query, user information or the key") {
  CHECK(wandura::detail::describe_target(post("https://api.wandura.example/v1/playback/tickets?x=1")) ==
        "POST /v1/playback/tickets on api.wandura.example");
  wandura::http_request get;
  get.url = "http://127.0.0.1:8787/v1/catalog/films/a%20b#frag";
  CHECK(wandura::detail::describe_target(get) == "GET /v1/catalog/films/a%20b on 127.0.0.1:8787");
  // User information (which may hold a password) is left out, up to the authority's last '@'.
  CHECK(wandura::detail::describe_target(post("http://u:p@h/v1/x")) == "POST /v1/x on h");
  CHECK(wandura::detail::describe_target(post("http://u:p@ss@h:81")) == "POST / on h:81");
  CHECK(wandura::detail::describe_target(post("http://u@/v1/x")) == "POST /v1/x");
  // An '@' where no authority was read: the URL is not shown at all.
  for (std::string_view const url : {"user:SECRET@host/v1/x", "//user:SECRET@host/x", "http://u:SE/CRET@h/"}) {
    INFO(url);
    CHECK(wandura::detail::describe_target(post(std::string(url))) ==
          "POST (a URL with '@' outside its host, not shown)");
  }
}

TEST_CASE("request target: a path built from a long value shows its first 200 bytes") {
  wandura::http_request get;
  std::string const path = "/v1/catalog/films/" + std::string(5000, 'f');
  get.url = "http://127.0.0.1:8787" + path + "?q=1";
  auto const shown = wandura::detail::describe_target(get);
  CHECK(shown == "GET " + path.substr(0, 200) + "... on 127.0.0.1:8787");
  get.url = "http://127.0.0.1:8787" + path.substr(0, 200);
  CHECK(wandura::detail::describe_target(get) == "GET " + path.substr(0, 200) + " on 127.0.0.1:8787"); // not cut
}

TEST_CASE("request target: the WARN line and the error message name it") {
  wandura::retry_event event;
  event.retry = 1;
  event.max_retries = 3;
  event.delay = std::chrono::milliseconds(412);
  event.http_status = 503;
  auto const target = wandura::detail::describe_target(post("https://api.wandura.example/v1/playback/tickets"));
  event.target = target;
  CHECK(wandura::format_retry_line(event) ==
        "retry 1/3 in 412 ms: HTTP 503 (POST /v1/playback/tickets on api.wandura.example)");

  wandura::call_result r;
  r.stopped = wandura::stop_reason::retries_exhausted;
  r.response.status = 503;
  r.attempts = 4;
  r.target = target;
  std::string const what = wandura::to_error(r, "issue_tickets").what();
  CHECK(what == "issue_tickets: retries exhausted after 4 attempts: HTTP 503 (POST /v1/playback/tickets on "
                "api.wandura.example)");
  CHECK(what.find("secret") == std::string::npos);
}
