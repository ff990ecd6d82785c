#include "wandura/error.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

TEST_CASE("error codes: every enumerator has a name and a message in the wandura category") {
  for (auto e : {wandura::errc::connect_failed, wandura::errc::attempt_timeout, wandura::errc::response_timeout,
                 wandura::errc::connection_reset, wandura::errc::tls_failed, wandura::errc::response_too_large,
                 wandura::errc::protocol_error, wandura::errc::transport_failed, wandura::errc::deadline_exceeded,
                 wandura::errc::budget_exhausted, wandura::errc::invalid_idempotency_key, wandura::errc::http_error,
                 wandura::errc::rate_limited, wandura::errc::unavailable, wandura::errc::invalid_response,
                 wandura::errc::invalid_argument, wandura::errc::unauthorized}) {
    std::error_code ec = e;
    CHECK(std::string(ec.category().name()) == "wandura");
    CHECK(ec.message().find("unknown") == std::string::npos);
    CHECK(wandura::to_string(e) != "unknown");
  }
  CHECK(wandura::to_string(static_cast<wandura::errc>(999)) == "unknown");
}

TEST_CASE("error codes: conditions group codes a caller would treat alike") {
  using wandura::condition;
  using wandura::errc;
  CHECK(std::error_code(errc::attempt_timeout) == condition::timeout);
  CHECK(std::error_code(errc::deadline_exceeded) == condition::timeout);
  CHECK(std::error_code(errc::connection_reset) == condition::retryable);
  CHECK(std::error_code(errc::connect_failed) == condition::retryable);
  CHECK(std::error_code(errc::budget_exhausted) == condition::budget_exhausted);
  CHECK(std::error_code(errc::rate_limited) == condition::rate_limited);
  CHECK(std::error_code(errc::invalid_idempotency_key) != condition::retryable);
  CHECK(std::error_code(errc::tls_failed) != condition::retryable);
  CHECK(std::error_code(errc::response_too_large) != condition::retryable);
  CHECK(std::error_code(asio::error::timed_out) == condition::timeout);
  CHECK(std::error_code(asio::error::connection_reset) == condition::retryable);
  CHECK(std::error_code(asio::error::operation_aborted) != condition::retryable);
}

TEST_CASE("error codes: retryable is exactly the list error.hpp gives, in every category that can say it") {
  using wandura::condition;
  using wandura::errc;
  // Worth retrying later, by the SDK's own codes: the transport's transient failures, a 429, a status the policy
  // retries with no retry left.
  for (auto e : {errc::connect_failed, errc::attempt_timeout, errc::response_timeout, errc::connection_reset,
                 errc::rate_limited, errc::unavailable}) {
    CAPTURE(wandura::to_string(e));
    CHECK(std::error_code(e) == condition::retryable);
  }
  for (auto e : {errc::tls_failed, errc::response_too_large, errc::protocol_error, errc::transport_failed,
                 errc::deadline_exceeded, errc::budget_exhausted, errc::invalid_idempotency_key, errc::http_error,
                 errc::invalid_response, errc::invalid_argument, errc::unauthorized}) {
    CAPTURE(wandura::to_string(e));
    CHECK(std::error_code(e) != condition::retryable);
  }
  // The same failures from the system, whether its category is Asio's (the system one on POSIX) or the generic one.
  for (auto e : {std::errc::connection_reset, std::errc::connection_refused, std::errc::connection_aborted,
                 std::errc::network_unreachable, std::errc::host_unreachable, std::errc::timed_out}) {
    auto const value = static_cast<int>(e);
    CAPTURE(value);
    CHECK(std::make_error_code(e) == condition::retryable);
    CHECK(std::error_code(value, std::system_category()) == condition::retryable);
  }
  CHECK(std::error_code(asio::error::connection_refused) == condition::retryable);
  CHECK(std::error_code(asio::error::eof) == condition::retryable);
  CHECK(std::make_error_code(std::errc::timed_out) == condition::timeout);
  CHECK(std::make_error_code(std::errc::connection_reset) != condition::timeout);
  CHECK(std::make_error_code(std::errc::permission_denied) != condition::retryable);
  CHECK(std::make_error_code(std::errc::invalid_argument) != condition::retryable);
  CHECK(std::error_code(asio::error::operation_aborted) != condition::timeout);
}

TEST_CASE("error exception: carries what the server said and the attempts") {
  wandura::error e(wandura::errc::http_error, "issue_tickets: not retried: HTTP 404 code=not_ready",
                   {.http_status = 404, .error_code = "not_ready", .reason = "", .request_id = "req_1", .attempts = 1});
  CHECK(e.code() == wandura::errc::http_error);
  CHECK(e.http_status() == 404);
  CHECK(e.server_error_code() == "not_ready");
  CHECK(e.request_id() == "req_1");
  CHECK(e.attempts() == 1);
  CHECK(std::string(e.what()) == "issue_tickets: not retried: HTTP 404 code=not_ready"); // said once, not twice
  std::system_error const& base = e;
  CHECK(base.code() == wandura::errc::http_error);
}
