// Testing with wandura::testing::fake_transport: the client over a scripted sender, no sockets (docs/testing.md).
//
// The script answers the first ticket request with 503 and Retry-After: 1, and attempt 2 is made to fail with a
// reset connection in place of its scripted step; the third attempt gets the ticket. The program checks what a
// user relies on: the play is granted, three attempts were sent, and every one carried the same Idempotency-Key.
// Exit status 0 when every check holds, 1 otherwise.
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <wandura/error.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/testing/fake_transport.hpp>
#include <wandura/testing/manual_clock.hpp>

namespace {

constexpr char const* granted_body =
    R"({"request_id":"req_1","items":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play",)"
    R"("status":200,"reused":false,"ticket":{"ticket_id":"tkt_1","manifest_url":"https://cdn.example/m.m3u8",)"
    R"("license_url":"https://license.example/l","expires_at":"2099-01-01T00:00:00Z","drm_payload":"p"}}]})";

bool check(bool ok, char const* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

} // namespace

int main() {
  asio::io_context io;
  // The fake sleeps on a clock for latencies; a manual clock also makes the client's retry waits instant.
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  auto fake = std::make_shared<wandura::testing::fake_transport>(io.get_executor(), *clock);
  fake->push(
      wandura::testing::fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "1"}}));
  fake->push(wandura::testing::fake_step::respond(200, granted_body)); // consumed by the injected failure
  fake->push(wandura::testing::fake_step::respond(200, granted_body));
  fake->fail_at(2, wandura::errc::connection_reset);

  wandura::client_options options;
  options.base_url = "http://api.test";
  options.api_key = "test-key";
  options.retry.time_source = clock;
  wandura::client api(fake, std::move(options));

  wandura::viewer const who{"", "device-1", "device-key"};
  std::optional<wandura::episode_start> start;
  std::exception_ptr failure;
  asio::co_spawn(io, api.start_episode(who, "the-heiress-returns", 4, 4),
                 [&](std::exception_ptr e, wandura::episode_start s) {
                   failure = e;
                   start = std::move(s);
                 });
  // Run what is ready; when everything waits on the clock, move it to the next wake-up. Bounded.
  for (int i = 0; i < 100 && !io.stopped(); ++i) {
    io.restart();
    io.poll();
    clock->advance_to_next_wakeup();
  }

  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (std::exception const& e) {
      std::printf("FAIL start_episode threw: %s\n", e.what());
      return 1;
    }
  }
  auto const attempts = fake->attempts();
  bool ok = check(start && start->play.outcome == wandura::item_outcome::granted, "the play ticket is granted");
  ok = check(attempts.size() == 3, "three attempts: 503, reset connection, 200") && ok;
  ok = check(attempts.size() == 3 && attempts[0].header("Idempotency-Key").size() == 32 &&
                 attempts[1].header("Idempotency-Key") == attempts[0].header("Idempotency-Key") &&
                 attempts[2].header("Idempotency-Key") == attempts[0].header("Idempotency-Key"),
             "every attempt carries the same automatic Idempotency-Key") &&
       ok;
  return ok ? 0 : 1;
}
