#include "wandura/resilience/call_result.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

using wandura::call_result;
using wandura::errc;
using wandura::stop_reason;

namespace {
call_result http_failure(stop_reason why, int status, std::string code, int attempts) {
  call_result r;
  r.stopped = why;
  r.response.status = status;
  r.response.headers.add("X-Request-Id", "req_42");
  r.error_code = std::move(code);
  r.attempts = attempts;
  r.total_timeout = std::chrono::milliseconds(15000);
  return r;
}
std::string what(call_result const& r) {
  return wandura::to_error(r, "issue_tickets").what();
}
} // namespace

TEST_CASE("call result: budget exhaustion names the budget, the attempts and the last real error") {
  auto const r = http_failure(stop_reason::budget_exhausted, 503, "50200", 2);
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == errc::budget_exhausted);
  CHECK(std::string(e.what()).rfind("issue_tickets: retry budget exhausted after 2 attempts: HTTP 503 code=50200", 0) ==
        0);
  CHECK(e.http_status() == 503);
  CHECK(e.server_error_code() == "50200");
  CHECK(e.request_id() == "req_42");
  CHECK(e.attempts() == 2);
}

TEST_CASE("call result: a deadline stop says which deadline and keeps the last real error") {
  auto r = http_failure(stop_reason::deadline_exceeded, 503, "", 1);
  r.note = "the next retry in 8000 ms would end past it";
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == errc::deadline_exceeded);
  CHECK(e.code() == wandura::condition::timeout);
  CHECK(std::string(e.what()).rfind("issue_tickets: deadline of 15000 ms reached after 1 attempt (the next retry in "
                                    "8000 ms would end past it): HTTP 503",
                                    0) == 0);
}

TEST_CASE("call result: a deadline reached with an attempt in flight says it had no answer yet, not that none was "
          "made") {
  call_result r;
  r.stopped = stop_reason::deadline_exceeded;
  r.total_timeout = std::chrono::milliseconds(700);
  r.attempts = 1; // what a caller that left at its deadline knows: one attempt sent, nothing read
  CHECK(std::string(wandura::to_error(r, "start_episode").what()) ==
        "start_episode: deadline of 700 ms reached after 1 attempt: no answer yet");
  r.attempts = 0;
  CHECK(std::string(wandura::to_error(r, "start_episode").what()).find("no answer yet") == std::string::npos);
}

TEST_CASE("call result: an unkeyed write that failed mid-transfer says why it was not retried") {
  call_result r;
  r.stopped = stop_reason::not_retryable;
  r.error = errc::connection_reset;
  r.attempts = 1;
  r.note = "not retried: write without idempotency key";
  auto const e = wandura::to_error(r, "issue_tickets");
  CHECK(e.code() == errc::connection_reset);
  CHECK(std::string(e.what()).rfind("issue_tickets: not retried: write without idempotency key: connection reset", 0) ==
        0);
}

TEST_CASE("call result: final statuses map to codes a caller can match") {
  CHECK(wandura::to_error(http_failure(stop_reason::retries_exhausted, 429, "rate_limited", 4), "x").code() ==
        wandura::condition::rate_limited);
  CHECK(wandura::to_error(http_failure(stop_reason::not_retryable, 401, "unauthorized", 1), "x").code() ==
        errc::unauthorized);
  CHECK(wandura::to_error(http_failure(stop_reason::not_retryable, 404, "not_found", 1), "x").code() ==
        errc::http_error);
  CHECK(wandura::to_error(http_failure(stop_reason::not_retryable, 404, "not_found", 1), "x").code() !=
        wandura::condition::retryable);
  // A status the policy retries, with no retry left: the retries were used, or off, or the write had no key.
  CHECK(wandura::to_error(http_failure(stop_reason::retries_exhausted, 503, "", 4), "x").code() == errc::unavailable);
  CHECK(wandura::to_error(http_failure(stop_reason::retries_exhausted, 503, "", 1), "x").code() == errc::unavailable);
  auto unkeyed = http_failure(stop_reason::not_retryable, 502, "", 1);
  unkeyed.note = "not retried: write without idempotency key";
  CHECK(wandura::to_error(unkeyed, "x").code() == errc::unavailable);
  CHECK(wandura::to_error(unkeyed, "x").code() == wandura::condition::retryable);
  CHECK(wandura::to_error(http_failure(stop_reason::retries_exhausted, 429, "rate_limited", 4), "x").code() ==
        wandura::condition::retryable);
  // A 503 the policy never retries (not_ready) is final.
  CHECK(wandura::to_error(http_failure(stop_reason::not_retryable, 503, "not_ready", 1), "x").code() ==
        errc::http_error);
  CHECK(what(http_failure(stop_reason::retries_exhausted, 503, "", 4))
            .rfind("issue_tickets: retries exhausted after 4 attempts: HTTP 503", 0) == 0);
  // One attempt and no retry: retries were off (policy none, disable_retries, a prefetch-only request without
  // retry_prefetch), nothing was exhausted.
  CHECK(what(http_failure(stop_reason::retries_exhausted, 503, "", 1)) ==
        "issue_tickets: not retried: this call allows no retry: HTTP 503");
}

TEST_CASE("call result: cancellation, refusal before sending and hold-back past the deadline") {
  call_result cancelled;
  cancelled.stopped = stop_reason::cancelled;
  cancelled.error = asio::error::operation_aborted;
  cancelled.attempts = 1;
  CHECK(wandura::to_error(cancelled, "x").code() == asio::error::operation_aborted);

  call_result refused;
  refused.stopped = stop_reason::invalid_request;
  refused.error = errc::invalid_idempotency_key;
  auto const e = wandura::to_error(refused, "issue_tickets");
  CHECK(e.code() == errc::invalid_idempotency_key);
  CHECK(e.attempts() == 0);

  call_result queued;
  queued.stopped = stop_reason::deadline_exceeded;
  queued.error = errc::deadline_exceeded;
  queued.total_timeout = std::chrono::milliseconds(5000);
  queued.note = "queued behind the playback counter's limit for 5000 ms";
  auto const q = wandura::to_error(queued, "issue_tickets");
  CHECK(q.code() == errc::deadline_exceeded);
  CHECK(std::string(q.what()) == "issue_tickets: deadline of 5000 ms reached before any attempt (queued behind the "
                                 "playback counter's limit for 5000 ms)");

  call_result shed;
  shed.stopped = stop_reason::shed;
  shed.note = "prefetch shed: the playback counter is under its reserve";
  auto const sh = wandura::to_error(shed, "issue_tickets");
  CHECK(sh.code() == errc::rate_limited);
  CHECK(std::string(sh.what()) == "issue_tickets: not sent: prefetch shed: the playback counter is under its reserve");
  CHECK(wandura::to_string(stop_reason::shed) == "shed");

  call_result ok;
  CHECK_NOTHROW(wandura::throw_if_failed(ok, "x"));
  CHECK_THROWS_AS(wandura::throw_if_failed(refused, "x"), wandura::error);
  CHECK(wandura::to_string(stop_reason::budget_exhausted) == "budget_exhausted");
}

TEST_CASE("call result: the transport's words follow the error, and a 2xx that could not be read says why") {
  call_result tls;
  tls.stopped = stop_reason::not_retryable;
  tls.error = errc::tls_failed;
  tls.detail = "SSL certificate problem: self-signed certificate";
  tls.attempts = 1;
  auto const e = wandura::to_error(tls, "get_config");
  CHECK(e.code() == errc::tls_failed);
  CHECK(std::string(e.what()) ==
        "get_config: failed after 1 attempt: TLS failure: SSL certificate problem: self-signed certificate");

  auto unreadable = http_failure(stop_reason::retries_exhausted, 200, "", 3);
  unreadable.error = errc::invalid_response;
  unreadable.detail = "unexpected end of input";
  auto const u = wandura::to_error(unreadable, "issue_tickets");
  CHECK(u.code() == errc::invalid_response);
  CHECK(u.http_status() == 200);
  CHECK(std::string(u.what()) ==
        "issue_tickets: retries exhausted after 3 attempts: HTTP 200: invalid response body: unexpected end of input");
}

TEST_CASE("call result: error_code_of is the code of to_error for every stop, and empty on success") {
  call_result ok;
  ok.response.status = 200;
  CHECK_FALSE(wandura::error_code_of(ok));

  struct row {
    stop_reason stopped;
    int status;
    std::error_code error;
    std::error_code expected;
  };
  row const rows[] = {
      {stop_reason::not_retryable, 404, {}, errc::http_error},
      {stop_reason::not_retryable, 401, {}, errc::unauthorized},
      {stop_reason::retries_exhausted, 429, {}, errc::rate_limited},
      {stop_reason::retries_exhausted, 0, errc::connection_reset, errc::connection_reset},
      {stop_reason::retries_exhausted, 200, errc::invalid_response, errc::invalid_response},
      {stop_reason::budget_exhausted, 503, {}, errc::budget_exhausted},
      {stop_reason::deadline_exceeded, 0, errc::attempt_timeout, errc::deadline_exceeded},
      {stop_reason::cancelled, 0, asio::error::operation_aborted, asio::error::operation_aborted},
      {stop_reason::invalid_request, 0, errc::invalid_idempotency_key, errc::invalid_idempotency_key},
      {stop_reason::shed, 0, {}, errc::rate_limited},
  };
  for (auto const& r : rows) {
    call_result result;
    result.stopped = r.stopped;
    result.response.status = r.status;
    result.error = r.error;
    result.attempts = r.status != 0 || r.error ? 1 : 0;
    INFO("stop " << wandura::to_string(r.stopped) << ", status " << r.status);
    CHECK(wandura::error_code_of(result) == r.expected);
    CHECK(wandura::error_code_of(result) == wandura::to_error(result, "get_config").code());
  }
}

TEST_CASE("call result: the transport's words arrive escaped and are quoted once, whole") {
  // The transport escapes libcurl's text (up to 255 bytes, each may become \xHH) where it makes its message; the
  // message quotes that text as it is, neither escaped again nor cut in the middle of an escape.
  std::string escaped = "SSL certificate problem: ";
  for (int i = 0; i < 255; ++i) {
    escaped += "\\x0a";
  }
  call_result tls;
  tls.stopped = stop_reason::not_retryable;
  tls.error = errc::tls_failed;
  tls.detail = escaped;
  tls.attempts = 1;
  CHECK(std::string(wandura::to_error(tls, "get_config").what()) ==
        "get_config: failed after 1 attempt: TLS failure: " + escaped);
}
