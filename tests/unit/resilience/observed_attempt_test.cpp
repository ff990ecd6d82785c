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

TEST_CASE("observed attempt: the operation is the caller's, empty reported as other") {
  wandura::testing::manual_clock clock;
  recorder r;
  auto const request = get("https://h/v1/playback/tickets");
  wandura::detail::observed_attempt named(&r, "issue_tickets", request, 0, clock, clock.now());
  wandura::detail::observed_attempt unnamed(&r, {}, request, 2, clock, clock.now());
  REQUIRE(r.seen.size() == 2);
  CHECK(r.seen[0] == "issue_tickets GET resend=0");
  CHECK(r.seen[1] == "other GET resend=2");
}

TEST_CASE("observed attempt: begin and end reach the observer with status, error type and clock duration") {
  wandura::testing::manual_clock clock;
  recorder r;
  auto const request = get("http://127.0.0.1:8787/v1/config");
  {
    // The duration counts from the start the caller read, not from the construction.
    auto const started = clock.now();
    clock.advance(50ms);
    wandura::detail::observed_attempt observed(&r, "get_config", request, 1, clock, started);
    clock.advance(200ms);
    wandura::attempt_result failed;
    failed.error = wandura::errc::attempt_timeout;
    observed.end(failed);
    observed.end(failed); // a second end is ignored
  }
  REQUIRE(r.seen.size() == 2);
  CHECK(r.seen[0] == "get_config GET resend=1");
  CHECK(r.seen[1] == "get_config 0 attempt_timeout 250ms");
  wandura::detail::observed_attempt unobserved(nullptr, "get_config", request, 0, clock, clock.now());
  unobserved.end({});
}
