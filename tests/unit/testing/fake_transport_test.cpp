#include "wandura/testing/fake_transport.hpp"

#include <optional>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using wandura::testing::fake_step;

namespace {
struct fixture {
  asio::io_context io;
  wandura::testing::manual_clock clock;
  wandura::testing::fake_transport fake{io.get_executor(), clock};

  wandura::attempt_result send(wandura::http_request const& request, wandura::attempt_options options = {}) {
    std::optional<wandura::attempt_result> out;
    asio::co_spawn(io, fake.send_attempt(request, options), [&](std::exception_ptr e, wandura::attempt_result r) {
      REQUIRE_FALSE(e);
      out = std::move(r);
    });
    for (int i = 0; i < 100 && !out; ++i) {
      io.restart();
      io.poll();
      if (!out) {
        clock.advance_to_next_wakeup();
      }
    }
    REQUIRE(out);
    return std::move(*out);
  }
};
} // namespace

TEST_CASE("fake transport: answers from the script in order, then the default") {
  fixture f;
  f.fake.push(fake_step::respond(503, R"({"error_code":"x"})", {{"Retry-After", "1"}}));
  f.fake.push(fake_step::fail(wandura::errc::connection_reset));
  wandura::http_request req;
  req.url = "http://127.0.0.1:1/";
  auto const a = f.send(req);
  CHECK_FALSE(a.error);
  CHECK(a.response.status == 503);
  CHECK(a.response.retry_after() == "1");
  CHECK(a.response.body.view() == R"({"error_code":"x"})");
  CHECK(a.response.body.capacity() >= a.response.body.size() + wandura::body_padding);
  CHECK(f.send(req).error == wandura::errc::connection_reset);
  CHECK(f.fake.steps_left() == 0);
  auto const d = f.send(req);
  CHECK(d.response.status == 200);
  CHECK(d.response.body.view() == "{}");
}

TEST_CASE("fake transport: records every request with headers, body and attempt options") {
  fixture f;
  wandura::http_request req;
  req.method = wandura::http_method::post;
  req.url = "http://127.0.0.1:1/v1/playback/tickets";
  req.headers.push_back({"Idempotency-Key", "abc"});
  req.body = "{\"a\":1}";
  wandura::attempt_options o;
  o.timeout = 1234ms;
  f.send(req, o);
  auto const seen = f.fake.attempts();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].request.url == req.url);
  CHECK(seen[0].request.body == req.body);
  CHECK(seen[0].header("idempotency-key") == "abc");
  CHECK(seen[0].header("missing").empty());
  CHECK(seen[0].options.timeout == 1234ms);
}

TEST_CASE("fake transport: a failure injected at attempt N replaces that attempt's answer") {
  for (std::size_t n = 1; n <= 3; ++n) {
    fixture f;
    f.fake.push(fake_step::respond(201));
    f.fake.push(fake_step::respond(202));
    f.fake.push(fake_step::respond(203));
    f.fake.fail_at(n, wandura::errc::connect_failed);
    wandura::http_request req;
    for (std::size_t i = 1; i <= 3; ++i) {
      auto const r = f.send(req);
      if (i == n) {
        CHECK(r.error == wandura::errc::connect_failed);
      } else {
        CHECK(r.response.status == static_cast<int>(200 + i));
      }
    }
  }
}

TEST_CASE("fake transport: latency and stalls run on the clock and respect the attempt timeout") {
  fixture f;
  auto slow = fake_step::respond(200);
  slow.latency = 700ms;
  f.fake.push(slow);
  f.fake.push(slow);
  f.fake.push(fake_step::stall());
  wandura::http_request req;
  wandura::attempt_options o;
  o.timeout = 1s;
  CHECK(f.send(req, o).response.status == 200);
  CHECK(f.clock.elapsed() == 700ms);
  o.timeout = 500ms;
  CHECK(f.send(req, o).error == wandura::errc::attempt_timeout);
  CHECK(f.clock.elapsed() == 1200ms);
  o.timeout = 2s;
  CHECK(f.send(req, o).error == wandura::errc::attempt_timeout);
  CHECK(f.clock.elapsed() == 3200ms);
}

TEST_CASE("fake transport: an attempt timeout of milliseconds::max() never fires, not even by overflowing") {
  fixture f;
  auto slow = fake_step::respond(200);
  slow.latency = 700ms;
  f.fake.push(slow);
  f.fake.push(fake_step::stall());
  wandura::http_request req;
  wandura::attempt_options o;
  o.timeout = std::chrono::milliseconds::max(); // ~292 million years: past the end of a nanosecond clock
  auto const answered = f.send(req, o);
  CHECK_FALSE(answered.error);
  CHECK(answered.response.status == 200);
  CHECK(f.clock.elapsed() == 700ms);
  // A stall under it waits until the end of the clock's time (the only wake-up left), not a moment less.
  auto const stalled = f.send(req, o);
  CHECK(stalled.error == wandura::errc::attempt_timeout);
  CHECK(f.clock.now() == wandura::clock::time_point::max());
}
