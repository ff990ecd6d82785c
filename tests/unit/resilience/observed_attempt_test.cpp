#include "resilience/observed_attempt.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;

namespace {
struct recorder final : wandura::attempt_observer {
  std::vector<std::string> seen;
  int context = 0;
  void* on_attempt_begin(wandura::attempt_begin const& a) noexcept override {
    seen.push_back(std::string(a.operation) + " " + std::string(a.method) +
                   " resend=" + std::to_string(a.resend_count));
    return &context;
  }
  void on_attempt_end(void* c, wandura::attempt_begin const& a, wandura::attempt_end const& e) noexcept override {
    seen.push_back(std::string(a.operation) + " " + std::to_string(e.status_code) + " " + std::string(e.error_type) +
                   " " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(e.duration).count()) +
                   "ms" + (c == &context ? "" : " wrong-context"));
  }
};

wandura::http_request get(std::string url) {
  wandura::http_request r;
  r.url = std::move(url);
  return r;
}
} // namespace

TEST_CASE("observed attempt: the operation comes from method and path") {
  wandura::http_request post = get("https://h/v1/playback/tickets");
  post.method = wandura::http_method::post;
  CHECK(wandura::detail::operation_of(post) == "issue_tickets");
  CHECK(wandura::detail::operation_of(get("http://h:1/v1/config")) == "get_config");
  CHECK(wandura::detail::operation_of(get("http://h/v1/catalog/films/a")) == "get_film");
  CHECK(wandura::detail::operation_of(get("http://h/v1/videos?x")) == "list_videos");
  CHECK(wandura::detail::operation_of(get("http://h/v1/videos/v1")) == "get_video");
  CHECK(wandura::detail::operation_of(get("http://h/v1/creatives")) == "list_creatives");
  CHECK(wandura::detail::operation_of(get("http://h/v2/other")) == "other");
}

TEST_CASE("observed attempt: begin and end reach the observer with status, error type and clock duration") {
  wandura::testing::manual_clock clock;
  recorder r;
  auto const request = get("http://127.0.0.1:8787/v1/config");
  {
    wandura::detail::observed_attempt observed(&r, request, 1, clock);
    clock.advance(250ms);
    wandura::attempt_result failed;
    failed.error = wandura::errc::attempt_timeout;
    observed.end(failed);
    observed.end(failed); // a second end is ignored
  }
  REQUIRE(r.seen.size() == 2);
  CHECK(r.seen[0] == "get_config GET resend=1");
  CHECK(r.seen[1] == "get_config 0 attempt_timeout 250ms");
  wandura::detail::observed_attempt unobserved(nullptr, request, 0, clock);
  unobserved.end({});
}
