#include "wandura/resilience/retry_engine.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/resilience/idempotency.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using wandura::call_options;
using wandura::call_result;
using wandura::errc;
using wandura::http_method;
using wandura::http_request;
using wandura::request_traits;
using wandura::retry_policy;
using wandura::stop_reason;
using wandura::testing::fake_step;

namespace {

/// A retry_event with its views copied out (they are valid only during the hook).
struct seen_event {
  wandura::retry_event event;
  std::string error_code;
  std::string key;
  std::string counter;
};

/// An engine on a fake transport and a hand-stepped clock; every call runs in zero real time.
struct harness {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  wandura::testing::fake_transport fake{io.get_executor(), *clock};
  std::vector<seen_event> events;
  std::vector<std::string> lines;
  double u = 0.5;
  std::unique_ptr<wandura::retry_engine> engine;

  explicit harness(wandura::retry_options options = {}) {
    options.time_source = clock;
    options.random = [this] { return u; };
    options.on_retry = [this](wandura::retry_event const& e) {
      events.push_back({e, std::string(e.error_code), std::string(e.idempotency_key), std::string(e.counter)});
      events.back().event.error_code = {};
      events.back().event.idempotency_key = {};
      events.back().event.counter = {};
    };
    options.log = [this](wandura::log_level level, std::string_view line) {
      CHECK(level == wandura::log_level::warn);
      lines.emplace_back(line);
    };
    engine = std::make_unique<wandura::retry_engine>(fake, std::move(options));
  }

  /// Runs one call to completion, advancing the clock whenever everything waits on it. Bounded.
  call_result run(http_request request, request_traits traits, call_options const& per_call = {},
                  wandura::response_reader* reader = nullptr) {
    std::optional<call_result> out;
    asio::co_spawn(io, engine->call(std::move(request), std::move(traits), engine->settings_for(per_call), reader),
                   [&](std::exception_ptr e, call_result r) {
                     REQUIRE_FALSE(e);
                     out = std::move(r);
                   });
    drive(out);
    REQUIRE(out.has_value());
    return std::move(*out);
  }

  template <typename T> void drive(std::optional<T> const& done) {
    for (int i = 0; i < 1000 && !done; ++i) {
      io.restart();
      io.poll();
      if (!done) {
        clock->advance_to_next_wakeup();
      }
    }
  }
};

http_request get(std::string url = "http://127.0.0.1:1/v1/config") {
  http_request r;
  r.method = http_method::get;
  r.url = std::move(url);
  return r;
}

http_request post(std::string body = R"({"episodes":[{"film_ref":"f","episode_no":1,"intent":"play"}]})") {
  http_request r;
  r.method = http_method::post;
  r.url = "http://127.0.0.1:1/v1/playback/tickets";
  r.headers.push_back({"Content-Type", "application/json"});
  r.body = std::move(body);
  return r;
}

request_traits reads(std::string counter = "config") {
  return {std::move(counter), false, 0ms};
}
request_traits writes() {
  return {"playback", true, 0ms};
}

/// A caller's reader that asks for a follow-up request (a narrowed body) after each of the first `follow_ups` 2xx
/// responses, as a ticket batch does for its items still needed, and may say that its 429s only shed prefetches.
struct scripted_reader final : wandura::response_reader {
  int follow_ups = 0;
  std::chrono::milliseconds item_retry_after{0};
  bool shed_only = false;
  int read = 0;
  void read_counter_feedback(call_result const& response, wandura::counter_feedback& feedback) override {
    if (shed_only && response.response.status == 429) {
      feedback.shed = 1;
    } else {
      wandura::response_reader::read_counter_feedback(response, feedback);
    }
  }
  [[nodiscard]] wandura::follow_up after_success(call_result const&) override {
    wandura::follow_up next;
    if (read++ < follow_ups) {
      next.again = true;
      next.body = "follow-up " + std::to_string(read);
      next.retry_after = item_retry_after;
      next.http_status = 503;
      next.server_code = "service_unavailable";
    }
    return next;
  }
};

bool is_lower_hex(std::string const& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

} // namespace

TEST_CASE("retry loop: transient 503 then success") {
  harness h;
  h.fake.push(fake_step::respond(503, R"({"error":"busy","error_code":"service_unavailable"})"));
  h.fake.push(fake_step::respond(200, R"({"ok":true})"));
  auto const r = h.run(get(), reads());
  CHECK(r.ok());
  CHECK(r.stopped == stop_reason::success);
  CHECK(r.attempts == 2);
  CHECK(r.retries == 1);
  CHECK(r.response.status == 200);
  CHECK(r.response.body.view() == R"({"ok":true})");
  REQUIRE(h.events.size() == 1);
  CHECK(h.clock->elapsed() == 250ms); // INTERACTIVE full jitter: 0.5 * min(8 s, 500 ms)
  REQUIRE(h.lines.size() == 1);
  CHECK(h.lines[0] == "retry 1/3 in 250 ms: HTTP 503 code=service_unavailable (GET /v1/config on 127.0.0.1:1)");
  CHECK(r.idempotency_key.empty());
  CHECK(h.fake.attempts()[0].header("Idempotency-Key").empty()); // reads carry no key
}

TEST_CASE("retry loop: a failure injected at step N, for every N, retries up to the policy and no further") {
  struct failure_kind {
    char const* name;
    fake_step step;
  };
  std::vector<failure_kind> kinds{
      {"connection reset", fake_step::fail(errc::connection_reset)},
      {"connect failed", fake_step::fail(errc::connect_failed)},
      {"attempt timeout", fake_step::fail(errc::attempt_timeout)},
      {"HTTP 503", fake_step::respond(503, R"({"error_code":"service_unavailable"})")},
      {"HTTP 429 with Retry-After",
       fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "1"}})},
      {"HTTP 500", fake_step::respond(500)},
  };
  for (auto const& kind : kinds) {
    for (int n = 1; n <= 5; ++n) {
      INFO(kind.name << ": the first " << n << " attempts fail");
      harness h;
      for (int i = 0; i < n; ++i) {
        h.fake.push(kind.step);
      }
      auto const r = h.run(post(), writes());
      int const max_retries = retry_policy::interactive().max_retries;
      if (n <= max_retries) {
        CHECK(r.stopped == stop_reason::success);
        CHECK(r.attempts == n + 1);
      } else {
        CHECK(r.stopped == stop_reason::retries_exhausted);
        CHECK(r.attempts == max_retries + 1);
        CHECK((r.has_response() ? r.response.status : 0) == (kind.step.error ? 0 : kind.step.response.status));
        CHECK(r.error == kind.step.error);
      }
      CHECK(h.events.size() == static_cast<std::size_t>(std::min(n, max_retries)));
      // Every attempt carried the same key and the same bytes.
      auto const seen = h.fake.attempts();
      REQUIRE(seen.size() == static_cast<std::size_t>(r.attempts));
      for (auto const& a : seen) {
        CHECK(a.header("Idempotency-Key") == r.idempotency_key);
        CHECK(a.request.body == seen.front().request.body);
      }
    }
  }
}

TEST_CASE("retry loop: fail_at injects one failure at attempt N while the script continues") {
  for (std::size_t n = 1; n <= 4; ++n) {
    INFO("failure at attempt " << n);
    harness h;
    h.fake.push(fake_step::respond(503));
    h.fake.push(fake_step::respond(503));
    h.fake.push(fake_step::respond(200));
    h.fake.fail_at(n, errc::connection_reset);
    auto const r = h.run(get(), reads());
    // Attempts 1-3 are 503, 503, 200 with one of them replaced by a reset; attempt 4 is the default 200.
    CHECK(r.ok());
    CHECK(r.attempts == (n == 3 ? 4 : 3));
  }
}

TEST_CASE("retry loop: a POST gets one automatic key, sent unchanged with a byte-identical body") {
  harness h;
  h.fake.push(fake_step::respond(503));
  h.fake.push(fake_step::fail(errc::connection_reset));
  h.fake.push(fake_step::respond(200, "{}", {{"Idempotency-Replayed", "true"}}));
  auto const r = h.run(post(), writes());
  REQUIRE(r.ok());
  CHECK(r.attempts == 3);
  CHECK(r.replayed);
  REQUIRE(r.idempotency_key.size() == 32);
  CHECK(is_lower_hex(r.idempotency_key));
  auto const seen = h.fake.attempts();
  REQUIRE(seen.size() == 3);
  for (auto const& a : seen) {
    CHECK(a.header("Idempotency-Key") == r.idempotency_key);
    CHECK(a.request.body == seen[0].request.body);
    CHECK(a.request.headers.size() == seen[0].request.headers.size()); // the key is added once, not per attempt
  }
  REQUIRE(h.events.size() == 2);
  CHECK(h.events[0].key == r.idempotency_key);

  harness other;
  auto const second = other.run(post(), writes());
  CHECK(second.idempotency_key != r.idempotency_key); // one key per logical call
  CHECK_FALSE(second.replayed);
}

TEST_CASE("retry loop: a caller key is validated and sent, an invalid one fails before sending") {
  harness h;
  call_options with_key;
  with_key.idempotency_key = "order-20261008-0001";
  h.fake.push(fake_step::respond(503));
  auto const r = h.run(post(), writes(), with_key);
  CHECK(r.ok());
  CHECK(r.idempotency_key == "order-20261008-0001");
  for (auto const& a : h.fake.attempts()) {
    CHECK(a.header("Idempotency-Key") == "order-20261008-0001");
  }

  for (auto const& bad : {std::string("has space"), std::string(), std::string(201, 'k'), std::string("caf\xc3\xa9")}) {
    INFO("key '" << bad << "'");
    harness refused;
    call_options o;
    o.idempotency_key = bad;
    auto const res = refused.run(post(), writes(), o);
    CHECK(res.stopped == stop_reason::invalid_request);
    CHECK(res.error == errc::invalid_idempotency_key);
    CHECK(res.attempts == 0);
    CHECK(refused.fake.attempt_count() == 0);
    CHECK(wandura::to_error(res, "issue_tickets").code() == errc::invalid_idempotency_key);
  }

  harness preset;
  auto req = post();
  req.headers.push_back({"idempotency-key", "from-header"});
  auto const p = preset.run(std::move(req), writes());
  CHECK(p.idempotency_key == "from-header");
  CHECK(preset.fake.attempts()[0].request.headers.size() == 2); // not added a second time

  // Two keys on one request, in any case, whichever is valid: which one names the logical call? Refused, unsent.
  harness two;
  auto twice = post();
  twice.headers.push_back({"Idempotency-Key", "first-key"});
  twice.headers.push_back({"IDEMPOTENCY-KEY", "second-key"});
  auto const t = two.run(std::move(twice), writes());
  CHECK(t.stopped == stop_reason::invalid_request);
  CHECK(t.error == errc::invalid_idempotency_key);
  CHECK(t.idempotency_key.empty());
  CHECK(two.fake.attempt_count() == 0);
}

TEST_CASE("retry loop: with automatic keys off, writes without a key are not retried but reads are") {
  wandura::retry_options options;
  options.auto_idempotency_keys = false;
  {
    harness h(options);
    h.fake.push(fake_step::respond(503));
    auto const r = h.run(post(), writes());
    CHECK(r.stopped == stop_reason::not_retryable);
    CHECK(r.attempts == 1);
    CHECK(r.note == "not retried: write without idempotency key");
    CHECK(r.idempotency_key.empty());
    CHECK(h.fake.attempts()[0].header("Idempotency-Key").empty());
    CHECK(std::string(wandura::to_error(r, "issue_tickets").what())
              .rfind("issue_tickets: not retried: write without idempotency key: HTTP 503", 0) == 0);
  }
  {
    harness h(options);
    h.fake.push(fake_step::fail(errc::response_timeout)); // timed out mid-transfer: may have been executed
    auto const r = h.run(post(), writes());
    CHECK(r.stopped == stop_reason::not_retryable);
    CHECK(r.error == errc::response_timeout);
  }
  {
    harness h(options);
    h.fake.push(fake_step::fail(errc::connect_failed)); // never sent: always safe
    auto const r = h.run(post(), writes());
    CHECK(r.ok());
    CHECK(r.attempts == 2);
  }
  {
    harness h(options);
    h.fake.push(fake_step::respond(503));
    auto const r = h.run(get(), reads());
    CHECK(r.ok());
    CHECK(r.attempts == 2);
  }
  {
    harness h(options); // a caller key still makes the write retryable
    call_options o;
    o.idempotency_key = "job-7";
    h.fake.push(fake_step::respond(503));
    CHECK(h.run(post(), writes(), o).attempts == 2);
  }
}

TEST_CASE("retry loop: 409 is final for idempotency_conflict and retried for idempotency_in_progress") {
  harness conflict;
  conflict.fake.push(fake_step::respond(409, R"({"error_code":"idempotency_conflict"})"));
  auto const a = conflict.run(post(), writes());
  CHECK(a.stopped == stop_reason::not_retryable);
  CHECK(a.error_code == "idempotency_conflict");
  CHECK(a.attempts == 1);

  harness in_progress;
  in_progress.fake.push(fake_step::respond(409, R"({"error_code":40901})"));
  auto const b = in_progress.run(post(), writes());
  CHECK(b.ok());
  CHECK(b.attempts == 2);
}

TEST_CASE("retry loop: final statuses and transport failures that would repeat are not retried") {
  for (int status : {400, 401, 403, 404}) {
    harness h;
    h.fake.push(fake_step::respond(status, R"({"error_code":"x","reason":"y"})"));
    auto const r = h.run(get(), reads());
    CHECK(r.stopped == stop_reason::not_retryable);
    CHECK(r.response.status == status);
    CHECK(r.error_code == "x");
    CHECK(r.reason == "y");
    CHECK(h.events.empty());
  }
  harness not_ready;
  not_ready.fake.push(fake_step::respond(503, R"({"error_code":"not_ready"})"));
  CHECK(not_ready.run(get(), reads()).stopped == stop_reason::not_retryable);

  harness tls;
  tls.fake.push(fake_step::fail(errc::tls_failed));
  auto const t = tls.run(get(), reads());
  CHECK(t.stopped == stop_reason::not_retryable);
  CHECK(t.error == errc::tls_failed);
}

TEST_CASE("retry loop: retries exhausted keeps the last response for the caller to read") {
  harness h;
  h.fake.set_default(fake_step::respond(503, R"({"error_code":"service_unavailable","items":[1]})"));
  auto const r = h.run(get(), reads());
  CHECK(r.stopped == stop_reason::retries_exhausted);
  CHECK(r.attempts == 4);
  CHECK(r.response.status == 503);
  CHECK(r.response.body.view().find("items") != std::string_view::npos);
  CHECK(h.events.size() == 3);
  CHECK(h.lines.size() == 3);
  CHECK(h.lines[2] ==
        "retry 3/3 in 1000 ms: HTTP 503 code=service_unavailable (GET /v1/config on 127.0.0.1:1)"); // 0.5 * 500 * 2^2
}

TEST_CASE("retry loop: the on_retry event and the WARN line follow seed 004") {
  harness h;
  h.u = 0.7583333333333333; // 200 ms * (1 - 0.3 + 0.6 u) = 231 ms
  call_options standard;
  standard.policy = retry_policy::standard();
  h.fake.push(fake_step::respond(503, R"({"error_code":50200})"));
  auto const r = h.run(post(), writes(), standard);
  CHECK(r.ok());
  REQUIRE(h.lines.size() == 1);
  CHECK(h.lines[0] == "retry 1/2 in 231 ms: HTTP 503 code=50200 (POST /v1/playback/tickets on 127.0.0.1:1)");
  REQUIRE(h.events.size() == 1);
  auto const& e = h.events[0];
  CHECK(e.event.retry == 1);
  CHECK(e.event.max_retries == 2);
  CHECK(e.event.delay == 231ms);
  CHECK(e.event.source == wandura::delay_source::backoff);
  CHECK(e.event.http_status == 503);
  CHECK(e.error_code == "50200");
  CHECK(e.event.budget_left == 9); // 10 a minute, one used
  CHECK(e.key == r.idempotency_key);
  CHECK(e.counter == "playback");

  harness net;
  net.u = 0.824;
  net.fake.push(fake_step::fail(errc::connection_reset));
  net.run(get(), reads());
  REQUIRE(net.lines.size() == 1);
  CHECK(net.lines[0] == "retry 1/3 in 412 ms: connection reset (GET /v1/config on 127.0.0.1:1)");
  CHECK(net.events[0].event.error == errc::connection_reset);
  CHECK(net.events[0].event.http_status == 0);
}

TEST_CASE("retry loop: Retry-After decides the wait and is reported as its source") {
  harness h;
  h.u = 0.25;
  h.fake.push(fake_step::respond(503, "{}", {{"Retry-After", "2"}}));
  auto const r = h.run(get(), reads());
  CHECK(r.ok());
  CHECK(h.clock->elapsed() == 2250ms); // seed 000: 2 s + 0.25 s of jitter
  REQUIRE(h.events.size() == 1);
  CHECK(h.events[0].event.source == wandura::delay_source::retry_after);

  harness junk; // junk falls back to normal backoff
  junk.fake.push(fake_step::respond(503, "{}", {{"Retry-After", "5s"}}));
  junk.run(get(), reads());
  CHECK(junk.clock->elapsed() == 250ms);
  CHECK(junk.events[0].event.source == wandura::delay_source::backoff);

  // Several Retry-After headers (a singleton field): the longest wait any asks for, junk among them ignored,
  // whichever comes first.
  for (auto const& values : {std::vector<std::string>{"1", "3", "5s"}, std::vector<std::string>{"5s", "3", "1"}}) {
    harness many;
    many.u = 0.25;
    std::vector<wandura::http_header> headers;
    for (auto const& v : values) {
      headers.push_back({"Retry-After", v});
    }
    many.fake.push(fake_step::respond(503, "{}", headers));
    many.run(get(), reads());
    CHECK(many.clock->elapsed() == 3250ms);
    REQUIRE(many.events.size() == 1);
    CHECK(many.events[0].event.source == wandura::delay_source::retry_after);
  }
}

TEST_CASE("deadline: deadline 5 s and a next backoff of 8 s fails at once with the last real error") {
  harness h;
  retry_policy slow = retry_policy::standard();
  slow.initial_delay = 8s;
  slow.max_delay = 8s;
  slow.jitter = 0.0;
  call_options o;
  o.policy = slow;
  o.total_timeout = 5s;
  h.fake.set_default(fake_step::respond(503, R"({"error_code":50200})"));
  auto const r = h.run(get(), reads(), o);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.attempts == 1);
  CHECK(r.response.status == 503);
  CHECK(r.error_code == "50200");
  CHECK(h.clock->elapsed() == 0ms); // at once, no sleep
  CHECK(h.events.empty());
  auto const e = wandura::to_error(r, "get_config");
  CHECK(e.code() == errc::deadline_exceeded);
  CHECK(std::string(e.what()).rfind("get_config: deadline of 5000 ms reached after 1 attempt (the next retry in 8000 "
                                    "ms would end past it): HTTP 503 code=50200",
                                    0) == 0);
}

TEST_CASE("deadline: a Retry-After beyond the deadline stops the call at once") {
  harness h;
  call_options o;
  o.total_timeout = 5s;
  h.fake.push(fake_step::respond(503, "{}", {{"Retry-After", "8"}}));
  auto const r = h.run(get(), reads(), o);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(h.clock->elapsed() == 0ms);
  CHECK(h.fake.attempt_count() == 1);
}

TEST_CASE("deadline: each attempt's timeout is min(attempt timeout, time left), never under the request's floor") {
  harness h;
  call_options o;
  o.total_timeout = 5s;
  h.fake.push(fake_step::respond(503, "{}", {{"Retry-After", "1"}}));
  h.u = 0.0;
  auto const r = h.run(get(), reads(), o);
  REQUIRE(r.ok());
  auto const seen = h.fake.attempts();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].options.timeout == 5000ms); // 8 s attempt timeout, 5 s left
  CHECK(seen[1].options.timeout == 4000ms); // after the 1 s wait
  CHECK(seen[1].options.connect_timeout == 3000ms);

  harness floor;
  call_options short_attempts;
  short_attempts.attempt_timeout = 2s;
  floor.run(post(), request_traits{"playback", true, 5s}, short_attempts);
  CHECK(floor.fake.attempts()[0].options.timeout == 5000ms); // SPEC §3: ticket requests never under 5 s
  harness plain;
  plain.run(get(), reads(), short_attempts);
  CHECK(plain.fake.attempts()[0].options.timeout == 2000ms);
}

TEST_CASE("deadline: no attempt starts in the request's min_time_left before the deadline, at most half the total") {
  request_traits tickets{"playback", true, 5s};
  tickets.operation = "issue_tickets";
  tickets.min_time_left = 1s;
  call_options o;
  o.total_timeout = 5s;
  auto const answer_503 = [](harness& h, std::string retry_after) { // and no jitter
    h.u = 0.0;
    h.fake.push(fake_step::respond(503, "{}", {{"Retry-After", std::move(retry_after)}}));
  };

  // A retry that would start 4 s in, 1 s before the deadline: not made; the 503 stands.
  harness late;
  answer_503(late, "4");
  auto const stopped = late.run(post(), tickets, o);
  CHECK(stopped.stopped == stop_reason::deadline_exceeded);
  CHECK(stopped.response.status == 503);
  CHECK(stopped.note == "the next retry in 4000 ms would start in the deadline's last 1000 ms");
  CHECK(late.fake.attempt_count() == 1);
  CHECK(late.clock->elapsed() == 0ms);

  // One that starts 3 s in, 2 s before it: made.
  harness in_time;
  answer_503(in_time, "3");
  auto const retried = in_time.run(post(), tickets, o);
  REQUIRE(retried.ok());
  REQUIRE(in_time.fake.attempt_count() == 2);
  CHECK(in_time.fake.attempts()[1].options.timeout == 2000ms);

  // Without a min_time_left the first retry goes, 1 s before the deadline.
  harness none;
  answer_503(none, "4");
  REQUIRE(none.run(post(), request_traits{"playback", true, 5s}, o).ok());
  CHECK(none.fake.attempt_count() == 2);

  // A total of 1.2 s keeps at most 0.6 s back: its first attempt goes, a retry 1 s in does not.
  call_options short_call;
  short_call.total_timeout = 1200ms;
  harness first;
  answer_503(first, "1");
  auto const short_result = first.run(post(), tickets, short_call);
  CHECK(first.fake.attempt_count() == 1); // the retry would start 1 s in
  CHECK(short_result.stopped == stop_reason::deadline_exceeded);
  CHECK(short_result.response.status == 503);
}

TEST_CASE("deadline: an attempt that stalls until the deadline ends the call with deadline_exceeded") {
  harness h;
  call_options o;
  o.total_timeout = 3s;
  h.fake.push(fake_step::stall());
  auto const r = h.run(get(), reads(), o);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.error == errc::attempt_timeout);
  CHECK(r.attempts == 1);
  CHECK(h.clock->elapsed() == 3s);
}

TEST_CASE("budget: a denied retry stops the call and says so") {
  wandura::retry_options options;
  options.budget = {.min_retries = 1, .percent = 0, .window = 60s};
  harness h(options);
  h.fake.set_default(fake_step::respond(503, R"({"error_code":50200})"));
  auto const r = h.run(get(), reads());
  CHECK(r.stopped == stop_reason::budget_exhausted);
  CHECK(r.attempts == 2);
  CHECK(h.events.size() == 1);
  CHECK(h.engine->stats().budget_denied == 1);
  CHECK(std::string(wandura::to_error(r, "issue_tickets").what())
            .rfind("issue_tickets: retry budget exhausted after 2 attempts: HTTP 503 code=50200", 0) == 0);
  // The budget is shared by the client: the next call gets no retry either.
  auto const again = h.run(get(), reads());
  CHECK(again.stopped == stop_reason::budget_exhausted);
  CHECK(again.attempts == 1);
  CHECK(h.engine->budget().snapshot(h.clock->now()).requests == 2); // counted per logical call
}

TEST_CASE(
    "retry loop: a policy or budget out of range is refused when the engine is made, a per-call one at the call") {
  wandura::testing::manual_clock clock;
  asio::io_context io;
  wandura::testing::fake_transport fake{io.get_executor(), clock};
  auto const refused = [&](wandura::retry_options const& options, std::string_view field) {
    INFO(field);
    try {
      wandura::retry_engine engine(fake, options);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == errc::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(std::string(field)));
    }
  };
  wandura::retry_options options;
  options.policy.jitter = 1.5;
  refused(options, "jitter");
  options = {};
  options.budget.window = 0ms;
  refused(options, "window");
  options = {};
  options.budget.min_retries = -1;
  refused(options, "min_retries");
  options = {};
  options.budget.percent = -10;
  refused(options, "percent");
  options = {};
  options.budget.window = 1ms;
  options.budget.min_retries = 0;
  options.budget.percent = 0;
  CHECK_NOTHROW(wandura::retry_engine(fake, options));

  harness h;
  call_options per_call;
  per_call.policy = wandura::retry_policy::standard();
  per_call.policy->initial_delay = -200ms;
  try {
    (void)h.engine->settings_for(per_call);
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("initial_delay"));
  }
  CHECK(h.fake.attempt_count() == 0);
  per_call.policy->initial_delay = 0ms;
  h.fake.push(fake_step::respond(200, "{}"));
  CHECK(h.run(get(), reads(), per_call).stopped == stop_reason::success);
}

/// Requests that queued at the engine's admission gate for `counter`.
std::uint64_t gate_waits(wandura::retry_engine const& engine, std::string_view counter) {
  for (auto const& c : engine.gate().stats()) {
    if (c.counter == counter) {
      return c.waited;
    }
  }
  return 0;
}

TEST_CASE("admission: after a 429 every request to that counter waits at the gate for its Retry-After") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  h.fake.push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "3"}}));
  auto const first = h.run(post(), writes(), no_retries);
  CHECK(first.stopped == stop_reason::retries_exhausted);
  CHECK(h.clock->elapsed() == 0ms);

  auto const other = h.run(get(), reads("catalog")); // another counter is not held
  CHECK(other.ok());
  CHECK(h.clock->elapsed() == 0ms);

  auto const second = h.run(post(), writes()); // same counter: waits 3 s first
  CHECK(second.ok());
  CHECK(h.clock->elapsed() == 3s);
  CHECK(gate_waits(*h.engine, "playback") == 1);
  CHECK(gate_waits(*h.engine, "catalog") == 0);
}

TEST_CASE("deadline: a deadline of 0 ends the call before any attempt as a timeout, not as the rate limit") {
  harness h;
  call_options none_left;
  none_left.total_timeout = 0ms;
  auto const r = h.run(post(), writes(), none_left);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.attempts == 0);
  CHECK(r.error == errc::deadline_exceeded);
  CHECK(h.fake.attempt_count() == 0);
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == errc::deadline_exceeded);
  CHECK(e.code() == wandura::condition::timeout);
  CHECK_FALSE(e.code() == wandura::condition::rate_limited);
}

TEST_CASE("admission: a 429 hold-off that outlasts the deadline fails the call at once, nothing sent") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  h.fake.push(fake_step::respond(429, "{}", {{"Retry-After", "30"}}));
  h.run(post(), writes(), no_retries);
  call_options short_call;
  short_call.total_timeout = 5s;
  auto const r = h.run(post(), writes(), short_call);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.attempts == 0);
  CHECK(r.error == errc::rate_limited); // the rate limit held it back (error.hpp), not a slow server
  CHECK(h.fake.attempt_count() == 1);
  CHECK(h.clock->elapsed() == 0ms);
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == errc::rate_limited);
  CHECK(e.code() == wandura::condition::rate_limited);
  CHECK_FALSE(e.code() == wandura::condition::timeout);
  CHECK(std::string(e.what()) ==
        "issue_tickets: deadline of 5000 ms reached before any attempt (the playback "
        "counter is held back after a 429 until too late for the deadline) (POST /v1/playback/tickets on 127.0.0.1:1)");
}

TEST_CASE("cancellation: cancelling during a backoff sleep ends the call at once with operation_aborted") {
  harness h;
  h.fake.set_default(fake_step::respond(503));
  asio::cancellation_signal signal;
  std::optional<call_result> out;
  asio::co_spawn(h.io, h.engine->call(get(), reads(), h.engine->settings_for()),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, call_result r) {
                   REQUIRE_FALSE(e);
                   out = std::move(r);
                 }));
  h.io.poll();
  REQUIRE_FALSE(out);
  REQUIRE(h.clock->pending_sleeps() == 1); // the engine sleeps before retry 1
  signal.emit(asio::cancellation_type::terminal);
  h.io.restart();
  h.io.poll();
  REQUIRE(out);
  CHECK(out->stopped == stop_reason::cancelled);
  CHECK(out->error == asio::error::operation_aborted);
  CHECK(out->attempts == 1);
  CHECK(h.clock->elapsed() == 0ms); // nothing waited for the sleep to end
  CHECK(h.clock->pending_sleeps() == 0);
  CHECK(h.fake.attempt_count() == 1);
}

TEST_CASE("cancellation: cancelling during a request aborts the attempt and the call") {
  harness h;
  h.fake.push(fake_step::stall());
  asio::cancellation_signal signal;
  std::optional<call_result> out;
  asio::co_spawn(h.io, h.engine->call(post(), writes(), h.engine->settings_for()),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, call_result r) {
                   REQUIRE_FALSE(e);
                   out = std::move(r);
                 }));
  h.io.poll();
  REQUIRE(h.fake.attempt_count() == 1);
  REQUIRE_FALSE(out);
  signal.emit(asio::cancellation_type::terminal);
  h.io.restart();
  h.io.poll();
  REQUIRE(out);
  CHECK(out->stopped == stop_reason::cancelled);
  CHECK(out->error == asio::error::operation_aborted);
  CHECK(h.fake.attempt_count() == 1);
  CHECK(h.events.empty());
}

TEST_CASE("retry loop: async_call completes a plain callback") {
  harness h;
  h.fake.push(fake_step::respond(502));
  std::optional<call_result> out;
  h.engine->async_call(get(), reads(), h.engine->settings_for(), [&](std::exception_ptr e, call_result r) {
    REQUIRE_FALSE(e);
    out = std::move(r);
  });
  h.drive(out);
  REQUIRE(out);
  CHECK(out->ok());
  CHECK(out->attempts == 2);
}

TEST_CASE("follow-up: a narrowed request after a 2xx is a retry: item Retry-After, hook, WARN line, fresh key") {
  harness h;
  scripted_reader reader;
  reader.follow_ups = 1;
  reader.item_retry_after = 2000ms;
  auto const r = h.run(post(), writes(), {}, &reader);
  CHECK(r.ok());
  CHECK(r.attempts == 2);
  CHECK(r.retries == 1);
  auto const attempts = h.fake.attempts();
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[1].request.body == "follow-up 1");
  // Another body is another request: the same key would be a 409 conflict.
  CHECK(attempts[0].header("Idempotency-Key") != attempts[1].header("Idempotency-Key"));
  CHECK(attempts[1].header("Idempotency-Key").size() == 32);
  CHECK(r.idempotency_key == attempts[1].header("Idempotency-Key"));
  // An item's retry_after of 2 s, under seed 000: 2 s + up to 1 s of jitter (u = 0.5).
  CHECK(h.clock->elapsed() == 2500ms);
  REQUIRE(h.lines.size() == 1);
  CHECK(h.lines[0] ==
        "retry 1/3 in 2500 ms: HTTP 503 code=service_unavailable (POST /v1/playback/tickets on 127.0.0.1:1)");
  REQUIRE(h.events.size() == 1);
  CHECK(h.events[0].event.source == wandura::delay_source::retry_after);
  // One logical call, counted once in the budget; its follow-up is one retry.
  CHECK(h.engine->budget().snapshot(h.clock->now()).requests == 1);
  CHECK(h.engine->stats().retries == 1);
}

TEST_CASE("follow-up: one that would end past the deadline is not made, and the 2xx stands") {
  harness h;
  scripted_reader reader;
  reader.follow_ups = 1;
  reader.item_retry_after = 5000ms;
  call_options five_seconds;
  five_seconds.total_timeout = 5s;
  auto const r = h.run(post(), writes(), five_seconds, &reader);
  CHECK(r.ok());
  CHECK(r.attempts == 1);
  CHECK(h.fake.attempt_count() == 1);
  CHECK(h.lines.empty());
  CHECK(h.clock->elapsed() == 0ms);
}

TEST_CASE("follow-up: a write with a caller's key keeps it on whole retries and gets automatic keys on follow-ups") {
  harness h;
  scripted_reader reader;
  reader.follow_ups = 1;
  call_options with_key;
  with_key.idempotency_key = "order-42";
  h.fake.push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  auto const r = h.run(post(), writes(), with_key, &reader);
  CHECK(r.ok());
  auto const attempts = h.fake.attempts();
  REQUIRE(attempts.size() == 3);
  CHECK(attempts[0].header("Idempotency-Key") == "order-42");
  CHECK(attempts[1].header("Idempotency-Key") == "order-42");
  CHECK(attempts[2].header("Idempotency-Key").size() == 32);
}

TEST_CASE("follow-up: a write whose request carried its key as a header sends the follow-up with one fresh key") {
  harness h;
  scripted_reader reader;
  reader.follow_ups = 1;
  auto req = post();
  req.headers.push_back({"Idempotency-Key", "order-43"});
  auto const r = h.run(std::move(req), writes(), {}, &reader);
  CHECK(r.ok());
  auto const attempts = h.fake.attempts();
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[0].header("Idempotency-Key") == "order-43");
  auto const& headers = attempts[1].request.headers;
  auto const keys = std::count_if(headers.begin(), headers.end(), [](wandura::http_header const& header) {
    return wandura::iequals(header.name, "Idempotency-Key");
  });
  CHECK(keys == 1);
  CHECK(attempts[1].header("Idempotency-Key").size() == 32);
}

TEST_CASE("decision table end to end: each failure once, through the engine, for each policy and request kind") {
  // Expected values written out by hand from seed 000, seed 004 and SPEC §1 (not computed by the classifier).
  struct row {
    char const* what;
    fake_step step;
    bool seed_default_read;
    bool standard_read;
    bool unkeyed_write; // either policy
  };
  auto http = [](int status, std::string_view code = {}) {
    std::string body = code.empty() ? std::string("{}") : std::string(R"({"error_code":")") + std::string(code) + "\"}";
    if (!code.empty() && code.front() >= '0' && code.front() <= '9') {
      body = std::string(R"({"error_code":)") + std::string(code) + "}"; // numeric codes as JSON numbers
    }
    return fake_step::respond(status, body);
  };
  std::vector<row> const table{
      {"connection reset", fake_step::fail(errc::connection_reset), true, true, false},
      {"connect failed", fake_step::fail(errc::connect_failed), true, true, true},
      {"attempt timeout", fake_step::fail(errc::attempt_timeout), true, true, false},
      {"response timeout", fake_step::fail(errc::response_timeout), true, true, false},
      {"TLS failure", fake_step::fail(errc::tls_failed), false, false, false},
      {"response too large", fake_step::fail(errc::response_too_large), false, false, false},
      {"400", http(400, "invalid_request"), false, false, false},
      {"401", http(401, "unauthorized"), false, false, false},
      {"403 not_entitled", http(403, "not_entitled"), false, false, false},
      {"404 not_ready", http(404, "not_ready"), false, false, false},
      {"408", http(408), false, true, false},
      {"409 idempotency_conflict", http(409, "idempotency_conflict"), false, false, false},
      {"409 40903", http(409, "40903"), false, false, false},
      {"409 idempotency_in_progress", http(409, "idempotency_in_progress"), true, true, false},
      {"409 40901", http(409, "40901"), true, true, false},
      {"425", http(425), false, true, false},
      {"429 rate_limited", http(429, "rate_limited"), true, true, false},
      {"500", http(500, "internal"), true, true, false},
      {"502", http(502), true, true, false},
      {"503 service_unavailable", http(503, "service_unavailable"), true, true, false},
      {"503 not_ready", http(503, "not_ready"), false, false, false},
      {"504", http(504), false, true, false},
      {"400 42900", http(400, "42900"), false, true, false},
      {"400 42901", http(400, "42901"), false, true, false},
      {"500 50000", http(500, "50000"), true, true, false},
      {"503 50200", http(503, "50200"), true, true, false},
      {"418 50200", http(418, "50200"), false, true, false},
  };
  for (auto const& r : table) {
    for (auto const& policy : {retry_policy::interactive(), retry_policy::standard()}) {
      bool const standard = policy.classifier == wandura::retry_classifier::standard;
      call_options o;
      o.policy = policy;
      {
        INFO(r.what << (standard ? " / standard" : " / seed 000") << " / read");
        harness h;
        h.fake.push(r.step);
        CHECK((h.run(get(), reads(), o).attempts == 2) == (standard ? r.standard_read : r.seed_default_read));
      }
      {
        INFO(r.what << (standard ? " / standard" : " / seed 000") << " / keyed write");
        harness h;
        h.fake.push(r.step);
        CHECK((h.run(post(), writes(), o).attempts == 2) == (standard ? r.standard_read : r.seed_default_read));
      }
      {
        INFO(r.what << (standard ? " / standard" : " / seed 000") << " / write without key");
        wandura::retry_options no_keys;
        no_keys.auto_idempotency_keys = false;
        harness h(no_keys);
        h.fake.push(r.step);
        CHECK((h.run(post(), writes(), o).attempts == 2) == r.unkeyed_write);
      }
    }
  }
}

TEST_CASE("cancellation: cancelling while held back after a 429 ends the call before any attempt") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  h.fake.push(fake_step::respond(429, "{}", {{"Retry-After", "4"}}));
  h.run(post(), writes(), no_retries);
  asio::cancellation_signal signal;
  std::optional<call_result> out;
  asio::co_spawn(h.io, h.engine->call(post(), writes(), h.engine->settings_for()),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, call_result r) {
                   REQUIRE_FALSE(e);
                   out = std::move(r);
                 }));
  h.io.restart();
  h.io.poll();
  REQUIRE(h.clock->pending_sleeps() == 1); // waiting for the counter's hold-off
  signal.emit(asio::cancellation_type::terminal);
  h.io.restart();
  h.io.poll();
  REQUIRE(out);
  CHECK(out->stopped == stop_reason::cancelled);
  CHECK(out->attempts == 0);
  CHECK(h.fake.attempt_count() == 1); // only the first call's attempt
  CHECK(h.clock->elapsed() == 0ms);
}

TEST_CASE("deadline: a hold-off longer than the capped Retry-After wait counts against the deadline too") {
  harness h;
  call_options o;
  o.policy = retry_policy::standard(); // Retry-After capped at 30 s for the backoff...
  o.total_timeout = 45s;
  h.fake.push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "60"}}));
  auto const r = h.run(post(), writes(), o);
  // ...but the counter is held for the full 60 s, so the retry could not start before the 45 s deadline.
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.attempts == 1);
  CHECK(r.response.status == 429);
  CHECK(h.clock->elapsed() == 0ms);
  CHECK(r.note == "the next retry in 60000 ms would end past it");
}

TEST_CASE("admission: an absurd Retry-After holds a counter for at most max_holdoff") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  h.fake.push(fake_step::respond(429, "{}", {{"Retry-After", "99999999999999999999"}}));
  h.run(post(), writes(), no_retries);
  CHECK(h.engine->gate().held_until("playback") - h.clock->now() == wandura::max_holdoff);
}

TEST_CASE("admission: the caller's reader says whether a 429 refused the counter or only shed prefetches") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  scripted_reader does_not_hold;
  does_not_hold.shed_only = true;
  h.fake.push(
      fake_step::respond(429, R"({"error_code":"rate_limited","reason":"prefetch_shed"})", {{"Retry-After", "2"}}));
  h.run(post(), writes(), no_retries, &does_not_hold);
  CHECK(h.engine->gate().held_until("playback") <= h.clock->now()); // a shed holds nothing back
  CHECK(h.engine->gate().under_reserve("playback"));                // but prefetches are dropped for 2 s
  h.fake.push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "2"}}));
  h.run(post(), writes(), no_retries);
  CHECK(h.engine->gate().held_until("playback") - h.clock->now() == 2000ms);
  // The next call to the counter waits for the hold-off before its first attempt.
  h.run(post(), writes());
  CHECK(h.clock->elapsed() == 2000ms);
}

TEST_CASE("retry loop: follow-up requests and whole retries share one count of max_retries") {
  harness h; // INTERACTIVE: 3 retries
  scripted_reader reader;
  reader.follow_ups = 2;
  h.fake.push(fake_step::respond(200, "{}"));
  h.fake.push(fake_step::respond(200, "{}"));
  h.fake.set_default(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  auto const r = h.run(post(), writes(), {}, &reader);
  CHECK(r.stopped == stop_reason::retries_exhausted);
  CHECK(r.attempts == 4);
  REQUIRE(h.lines.size() == 3);
  CHECK(h.lines[0].rfind("retry 1/3 ", 0) == 0);
  CHECK(h.lines[2].rfind("retry 3/3 ", 0) == 0);
}

TEST_CASE("errors: the request id comes from X-Request-Id, else from the error body's request_id") {
  harness h;
  h.fake.push(fake_step::respond(404, R"({"error":"no such film","error_code":"not_found","request_id":"req_body"})"));
  auto from_body = h.run(get(), reads());
  CHECK(from_body.request_id == "req_body");
  CHECK(wandura::to_error(from_body, "get_config").request_id() == "req_body");

  h.fake.push(fake_step::respond(404, R"({"error_code":"not_found","request_id":"req_body"})",
                                 {{"X-Request-Id", "req_header"}}));
  auto from_header = h.run(get(), reads());
  CHECK(from_header.request_id == "req_header");
  CHECK(wandura::to_error(from_header, "get_config").request_id() == "req_header");
}

TEST_CASE("errors: the server's text for humans (the body's error) reaches error_info as sent, not what()") {
  harness h;
  h.fake.push(fake_step::respond(404, R"({"error":"No film \"x\".\n\u001b[2J","error_code":"not_found"})"));
  auto const r = h.run(get(), reads());
  CHECK(r.server_message == "No film \"x\".\n\x1b[2J");
  auto const e = wandura::to_error(r, "get_film");
  CHECK(e.server_message() == "No film \"x\".\n\x1b[2J");
  CHECK(e.info().server_message == e.server_message());
  CHECK_THAT(e.what(), !Catch::Contains("No film"));

  // Only the last response's: a 503 that said something, then a 404 that said nothing.
  h.fake.push(fake_step::respond(503, R"({"error":"Busy.","error_code":"service_unavailable"})"));
  h.fake.push(fake_step::respond(404, R"({"error_code":"not_found"})"));
  auto const last = h.run(get(), reads());
  CHECK(last.attempts == 2);
  CHECK(last.server_message.empty());
  CHECK(wandura::to_error(last, "get_film").server_message().empty());
}

TEST_CASE("deadline: attempt and total timeouts of milliseconds::max() saturate instead of overflowing") {
  constexpr auto forever = std::chrono::milliseconds::max();
  SECTION("both at max: the attempt waits for its answer, however late, and no deadline passes") {
    harness h;
    call_options o;
    o.total_timeout = forever;
    o.attempt_timeout = forever;
    auto const settings = h.engine->settings_for(o);
    CHECK(settings.deadline == wandura::clock::time_point::max());
    auto slow = fake_step::respond(200);
    slow.latency = 10min;
    h.fake.push(fake_step::respond(503));
    h.fake.push(slow);
    auto const r = h.run(get(), reads(), o);
    CHECK(r.stopped == stop_reason::success);
    CHECK(r.attempts == 2);
    auto const seen = h.fake.attempts();
    REQUIRE(seen.size() == 2);
    CHECK(seen[1].options.timeout == forever); // no limit of its own: the transport saturates it
    CHECK(h.clock->elapsed() >= 10min);
  }
  SECTION("attempt timeout at max under a finite total: the time left bounds each attempt") {
    harness h;
    call_options o;
    o.total_timeout = 3s;
    o.attempt_timeout = forever;
    h.fake.push(fake_step::stall());
    auto const r = h.run(get(), reads(), o);
    CHECK(r.stopped == stop_reason::deadline_exceeded);
    CHECK(r.error == errc::attempt_timeout);
    auto const seen = h.fake.attempts();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].options.timeout == 3s);
    CHECK(h.clock->elapsed() == 3s);
  }
}

namespace {

/// What an `attempt_observer` was told, copied out of the events' views.
struct recording_observer final : wandura::attempt_observer {
  struct ended_call {
    std::string operation;
    std::error_code error;
    std::chrono::nanoseconds duration{0};
  };
  int attempt_begins = 0;
  int attempt_ends = 0;
  std::vector<ended_call> calls;
  void* on_attempt_begin(wandura::attempt_begin const&) noexcept override {
    ++attempt_begins;
    return nullptr;
  }
  void on_attempt_end(void*, wandura::attempt_begin const&, wandura::attempt_end const&) noexcept override {
    ++attempt_ends;
  }
  void on_call_end(wandura::call_end const& call) noexcept override {
    calls.push_back({std::string(call.operation), call.error, call.duration});
  }
};

struct observed_harness {
  std::shared_ptr<recording_observer> observer = std::make_shared<recording_observer>();
  harness h;
  explicit observed_harness(bool report_call_end = true) : h(options(observer, report_call_end)) {}
  static wandura::retry_options options(std::shared_ptr<recording_observer> const& observer, bool report_call_end) {
    wandura::retry_options o;
    o.observer = observer;
    o.report_call_end = report_call_end;
    return o;
  }
};

request_traits config_read() {
  request_traits t = reads();
  t.operation = "get_config";
  return t;
}

} // namespace

TEST_CASE("observer: an engine call tells exactly one call end, after all of its attempts and waits") {
  SECTION("success after a retry") {
    observed_harness o;
    o.h.fake.push(fake_step::respond(503));
    o.h.fake.push(fake_step::respond(200));
    auto const r = o.h.run(get(), config_read());
    REQUIRE(r.stopped == stop_reason::success);
    REQUIRE(o.observer->calls.size() == 1);
    CHECK(o.observer->calls[0].operation == "get_config");
    CHECK_FALSE(o.observer->calls[0].error);
    CHECK(o.observer->calls[0].duration == o.h.clock->elapsed()); // the backoff sleep is part of the call
    CHECK(o.observer->calls[0].duration > 0ns);
    CHECK(o.observer->attempt_begins == 2);
    CHECK(o.observer->attempt_ends == 2);
  }
  SECTION("failure after retries: the code to_error gives the result") {
    observed_harness o;
    o.h.fake.set_default(fake_step::respond(503));
    auto const r = o.h.run(get(), config_read());
    REQUIRE(r.stopped == stop_reason::retries_exhausted);
    REQUIRE(o.observer->calls.size() == 1);
    CHECK(o.observer->calls[0].error == errc::unavailable);
    CHECK(o.observer->calls[0].error == wandura::to_error(r, "get_config").code());
    CHECK(o.observer->calls[0].duration == o.h.clock->elapsed());
    CHECK(o.observer->attempt_ends == r.attempts);
  }
  SECTION("a deadline, and an unnamed operation reported as other") {
    observed_harness o;
    o.h.fake.push(fake_step::stall());
    call_options opts;
    opts.total_timeout = 2s;
    auto const r = o.h.run(get(), reads(), opts);
    REQUIRE(r.stopped == stop_reason::deadline_exceeded);
    REQUIRE(o.observer->calls.size() == 1);
    CHECK(o.observer->calls[0].operation == "other");
    CHECK(o.observer->calls[0].error == errc::deadline_exceeded);
    CHECK(o.observer->calls[0].duration == 2s);
  }
  SECTION("nothing sent: an invalid caller key still ends the call once") {
    observed_harness o;
    call_options opts;
    opts.idempotency_key = "not a key";
    auto const r = o.h.run(post(), writes(), opts);
    REQUIRE(r.stopped == stop_reason::invalid_request);
    REQUIRE(o.observer->calls.size() == 1);
    CHECK(o.observer->calls[0].error == errc::invalid_idempotency_key);
    CHECK(o.observer->calls[0].duration == 0ns);
    CHECK(o.observer->attempt_begins == 0);
  }
  SECTION("cancellation during a backoff sleep") {
    observed_harness o;
    o.h.fake.set_default(fake_step::respond(503));
    asio::cancellation_signal signal;
    std::optional<call_result> out;
    asio::co_spawn(o.h.io, o.h.engine->call(get(), config_read(), o.h.engine->settings_for()),
                   asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, call_result r) {
                     REQUIRE_FALSE(e);
                     out = std::move(r);
                   }));
    o.h.io.poll();
    REQUIRE(o.h.clock->pending_sleeps() == 1);
    CHECK(o.observer->calls.empty()); // still running
    signal.emit(asio::cancellation_type::terminal);
    o.h.io.restart();
    o.h.io.poll();
    REQUIRE(out);
    REQUIRE(out->stopped == stop_reason::cancelled);
    REQUIRE(o.observer->calls.size() == 1);
    CHECK(o.observer->calls[0].error == asio::error::operation_aborted);
  }
}

TEST_CASE("observer: with report_call_end off the engine tells attempts only, for a caller that reports its calls") {
  observed_harness o(false);
  o.h.fake.push(fake_step::respond(503));
  o.h.fake.push(fake_step::respond(200));
  auto const r = o.h.run(get(), config_read());
  REQUIRE(r.stopped == stop_reason::success);
  CHECK(o.observer->attempt_begins == 2);
  CHECK(o.observer->attempt_ends == 2);
  CHECK(o.observer->calls.empty());
}

TEST_CASE("retry loop: a caller's idempotency key is ignored for a read: not validated, not sent, retries as usual") {
  // call_options.hpp: the key is for writes, "Ignored for reads". A read with a key a write would refuse (90010,
  // nothing sent) is sent, and retried, without an Idempotency-Key header; the result carries no key.
  auto const key = GENERATE(as<std::string>{}, "order-20261008-0001", "has space", "");
  CAPTURE(key);
  harness h;
  call_options with_key;
  with_key.idempotency_key = key;
  h.fake.push(fake_step::respond(503));
  auto const r = h.run(get(), reads(), with_key);
  CHECK(r.ok());
  CHECK(r.attempts == 2);
  CHECK(r.idempotency_key.empty());
  REQUIRE(h.fake.attempt_count() == 2);
  for (auto const& a : h.fake.attempts()) {
    CHECK(a.header("Idempotency-Key").empty());
  }
  REQUIRE(h.events.size() == 1);
  CHECK(h.events[0].key.empty());
}

TEST_CASE("retry loop: one engine gives each logical call its own key, reused on that call's retries only") {
  // idempotency.hpp: "an automatic key is made once per logical call and sent unchanged ... on every attempt". Two
  // calls of one engine with the same body are two calls: the same key would make the server replay the first.
  harness h;
  std::vector<std::string> keys;
  for (int call = 0; call < 3; ++call) {
    h.fake.push(fake_step::respond(503));
    h.fake.push(fake_step::respond(200, "{}"));
    auto const r = h.run(post(), writes());
    REQUIRE(r.ok());
    CHECK(r.attempts == 2);
    keys.push_back(r.idempotency_key);
  }
  auto const seen = h.fake.attempts();
  REQUIRE(seen.size() == 6);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].header("Idempotency-Key") == keys[i / 2]);
  }
  CHECK(keys[0] != keys[1]);
  CHECK(keys[1] != keys[2]);
  CHECK(keys[0] != keys[2]);
}

TEST_CASE("retry loop: a POST is a write even when its traits say it is not") {
  // request_traits::is_write: "A POST request is always treated as a write, even when this is false": it gets a
  // key, and without automatic keys it is not retried after it may have been executed.
  SECTION("automatic keys on: a key, reused on the retry") {
    harness h;
    h.fake.push(fake_step::respond(503));
    h.fake.push(fake_step::respond(200, "{}"));
    auto const r = h.run(post(), reads("playback"));
    REQUIRE(r.ok());
    CHECK(r.idempotency_key.size() == wandura::auto_idempotency_key_length);
    auto const seen = h.fake.attempts();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].header("Idempotency-Key") == r.idempotency_key);
    CHECK(seen[1].header("Idempotency-Key") == r.idempotency_key);
  }
  SECTION("automatic keys off: no key, and a 503 is final") {
    wandura::retry_options options;
    options.auto_idempotency_keys = false;
    harness h(options);
    h.fake.push(fake_step::respond(503));
    auto const r = h.run(post(), reads("playback"));
    CHECK(r.stopped == stop_reason::not_retryable);
    CHECK(r.attempts == 1);
    CHECK(r.note == "not retried: write without idempotency key");
    CHECK(h.fake.attempts()[0].header("Idempotency-Key").empty());
  }
}

namespace {

/// Spawns `call` with a cancellation slot; the completion records the result, or that an exception escaped.
struct cancellable_call {
  asio::cancellation_signal signal;
  std::optional<call_result> out;
  bool threw = false;
  void spawn(harness& h, http_request request, request_traits traits, wandura::response_reader* reader = nullptr) {
    asio::co_spawn(h.io, h.engine->call(std::move(request), std::move(traits), h.engine->settings_for(), reader),
                   asio::bind_cancellation_slot(signal.slot(), [this](std::exception_ptr e, call_result r) {
                     threw = e != nullptr;
                     if (!e) {
                       out = std::move(r);
                     }
                   }));
  }
};

} // namespace

// Asio throws from `co_await` itself when a frame that was cancelled awaits another coroutine: a cancellation emitted
// after the engine's next resumption was queued (an answer, the end of a backoff) must still end the call as
// cancelled, never as an exception, and must not spend a retry it will not make.
TEST_CASE("cancellation: a cancel that comes with a 503's answer ends the call, no retry spent, end told once") {
  observed_harness o;
  fake_step slow = fake_step::respond(503);
  slow.latency = 100ms;
  o.h.fake.push(slow);
  cancellable_call c;
  c.spawn(o.h, get(), config_read());
  o.h.io.poll();
  REQUIRE(o.h.fake.attempt_count() == 1);
  o.h.clock->advance(100ms); // the answer is ready: the engine's resumption is queued
  c.signal.emit(asio::cancellation_type::terminal);
  o.h.drive(c.out);
  CHECK_FALSE(c.threw);
  REQUIRE(c.out);
  CHECK(c.out->stopped == stop_reason::cancelled);
  CHECK(c.out->error == asio::error::operation_aborted);
  CHECK(c.out->attempts == 1);
  CHECK(c.out->response.status == 503); // what was read stays readable
  CHECK(o.h.fake.attempt_count() == 1);
  CHECK(o.h.events.empty()); // no retry event, no WARN line, nothing taken from the budget
  CHECK(o.h.lines.empty());
  CHECK(o.h.engine->stats().retries == 0);
  CHECK(o.h.engine->budget().snapshot(o.h.clock->now()).retries == 0);
  CHECK(o.observer->attempt_ends == 1);
  REQUIRE(o.observer->calls.size() == 1);
  CHECK(o.observer->calls[0].error == asio::error::operation_aborted);
}

TEST_CASE("cancellation: a cancel that comes with a 2xx keeps the 2xx, and no follow-up is made") {
  harness h;
  scripted_reader reader;
  reader.follow_ups = 1;
  fake_step slow = fake_step::respond(200, "{}");
  slow.latency = 100ms;
  h.fake.push(slow);
  cancellable_call c;
  c.spawn(h, post(), writes(), &reader);
  h.io.poll();
  h.clock->advance(100ms);
  c.signal.emit(asio::cancellation_type::terminal);
  h.drive(c.out);
  CHECK_FALSE(c.threw);
  REQUIRE(c.out);
  CHECK(c.out->ok()); // the server issued what it answered: the result is not thrown away
  CHECK(c.out->attempts == 1);
  CHECK(h.fake.attempt_count() == 1); // the follow-up the reader asked for is not sent
  CHECK(h.events.empty());
}

TEST_CASE("cancellation: a cancel that comes as the backoff ends sends nothing more and throws nothing") {
  observed_harness o;
  o.h.fake.set_default(fake_step::respond(503));
  cancellable_call c;
  c.spawn(o.h, get(), config_read());
  o.h.io.poll();
  REQUIRE(o.h.clock->pending_sleeps() == 1); // the backoff before retry 1
  o.h.clock->advance_to_next_wakeup();       // it ends: the engine's resumption is queued
  c.signal.emit(asio::cancellation_type::terminal);
  o.h.drive(c.out);
  CHECK_FALSE(c.threw);
  REQUIRE(c.out);
  CHECK(c.out->stopped == stop_reason::cancelled);
  CHECK(c.out->attempts == 1);
  CHECK(o.h.fake.attempt_count() == 1);
  CHECK(o.observer->calls.size() == 1);
}

TEST_CASE("deadline: a deadline of 0 on a counter still congested after a 429 is a timeout, not the rate limit") {
  harness h;
  call_options no_retries;
  no_retries.disable_retries = true;
  h.fake.push(fake_step::respond(429)); // no Retry-After: the counter is congested but not held
  h.run(post(), writes(), no_retries);
  call_options none_left;
  none_left.total_timeout = 0ms;
  auto const r = h.run(post(), writes(), none_left);
  CHECK(r.stopped == stop_reason::deadline_exceeded);
  CHECK(r.attempts == 0);
  CHECK(r.error == errc::deadline_exceeded);
  CHECK(r.note.empty()); // no "held back after a 429"
  CHECK(h.fake.attempt_count() == 1);
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == wandura::condition::timeout);
  CHECK_FALSE(e.code() == wandura::condition::rate_limited);
}

TEST_CASE("deadline: an attempt timeout of 0 stays none of its own under a request's floor") {
  harness h;
  call_options unlimited;
  unlimited.attempt_timeout = 0ms;
  unlimited.total_timeout = 60s;
  h.run(post(), request_traits{"playback", true, 5s}, unlimited);
  REQUIRE(h.fake.attempt_count() == 1);
  CHECK(h.fake.attempts()[0].options.timeout == 60s); // bounded by the deadline alone, not by the 5 s floor
}

TEST_CASE("follow-up: with automatic keys off, a caller-keyed write makes no follow-up (it would go unkeyed)") {
  wandura::retry_options options;
  options.auto_idempotency_keys = false;
  harness h(options);
  scripted_reader reader;
  reader.follow_ups = 1;
  call_options keyed;
  keyed.idempotency_key = "order-42";
  auto const r = h.run(post(), writes(), keyed, &reader);
  CHECK(r.ok());
  CHECK(r.attempts == 1);
  CHECK(r.idempotency_key == "order-42");
  REQUIRE(h.fake.attempt_count() == 1);
  CHECK(h.fake.attempts()[0].header("Idempotency-Key") == "order-42");
  CHECK(h.events.empty());
}
