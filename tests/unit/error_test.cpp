#include "wandura/error.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

TEST_CASE("error codes: every enumerator has a name and a message in the wandura category") {
  for (auto e : {wandura::errc::connect_failed, wandura::errc::attempt_timeout, wandura::errc::response_timeout,
                 wandura::errc::connection_reset, wandura::errc::tls_failed, wandura::errc::response_too_large,
                 wandura::errc::protocol_error, wandura::errc::transport_failed, wandura::errc::deadline_exceeded,
                 wandura::errc::budget_exhausted, wandura::errc::invalid_idempotency_key, wandura::errc::http_error,
                 wandura::errc::rate_limited, wandura::errc::invalid_response, wandura::errc::invalid_argument,
                 wandura::errc::unauthorized}) {
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
