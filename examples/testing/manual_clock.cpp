// Testing with wandura::testing::manual_clock: time moves only when the test says so (docs/testing.md).
//
// A 429 with Retry-After: 20 is answered to the first request. With the production clock the retry would wait
// 20 s; on the manual clock the test sees the client asleep, advances exactly to its wake-up and checks when the
// retry went out: no earlier than Retry-After, no later than Retry-After plus the one second of jitter. It runs in
// well under a second of real time. Exit status 0 when every check holds, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <wandura/playback/client.hpp>
#include <wandura/testing/fake_transport.hpp>
#include <wandura/testing/manual_clock.hpp>

namespace {

constexpr char const* config_body = R"({"org_id":"org_demo","limits":{"playback":6000,"config":600}})";

bool check(bool ok, char const* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

} // namespace

int main() {
  using namespace std::chrono_literals;
  asio::io_context io;
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  auto fake = std::make_shared<wandura::testing::fake_transport>(io.get_executor(), *clock);
  fake->push(wandura::testing::fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "20"}}));
  fake->push(wandura::testing::fake_step::respond(200, config_body));

  wandura::client_options options;
  options.base_url = "http://api.test";
  options.api_key = "test-key";
  options.retry.time_source = clock;
  options.retry.policy = wandura::retry_policy::background(); // a deadline long enough for a 20 s wait
  wandura::client api(fake, std::move(options));

  bool done = false;
  wandura::org_config cfg;
  asio::co_spawn(io, api.get_config(), [&](std::exception_ptr e, wandura::org_config c) {
    done = !e;
    cfg = std::move(c);
  });

  auto const start = clock->now();
  io.poll(); // the first attempt is answered at once: 429
  bool ok = check(fake->attempt_count() == 1 && clock->pending_sleeps() == 1, "after the 429 the client sleeps");
  auto const wake = clock->next_wakeup();
  ok = check(wake && *wake - start >= 20s && *wake - start <= 21s, "its wake-up honours Retry-After (+ <= 1 s)") && ok;
  clock->advance_to_next_wakeup();
  io.restart();
  io.poll();
  ok = check(done && cfg.org_id == "org_demo", "the retry after the wait succeeds") && ok;
  ok = check(fake->attempt_count() == 2, "two attempts in all") && ok;
  return ok ? 0 : 1;
}
