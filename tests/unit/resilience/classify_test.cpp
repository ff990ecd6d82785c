#include "wandura/resilience/classify.hpp"

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"

using wandura::attempt_verdict;
using wandura::classify_attempt;
using wandura::errc;
using wandura::request_safety;
using wandura::retry_classifier;

namespace {

attempt_verdict http(int status, std::string_view code = {}, retry_classifier c = retry_classifier::seed_default,
                     request_safety s = request_safety::read) {
  return classify_attempt({{}, status, code}, c, s).verdict;
}

attempt_verdict net(std::error_code ec, request_safety s = request_safety::read) {
  return classify_attempt({ec, 0, {}}, retry_classifier::seed_default, s).verdict;
}

} // namespace

TEST_CASE("decision table: 2xx is success whatever the body says") {
  CHECK(http(200) == attempt_verdict::success);
  CHECK(http(201, "rate_limited") == attempt_verdict::success);
  CHECK(http(204, {}, retry_classifier::standard, request_safety::unkeyed_write) == attempt_verdict::success);
}

TEST_CASE("decision table: seed 000 default retries network errors, 429, 500, 502 and 503 except not_ready") {
  for (int status : {429, 500, 502, 503}) {
    INFO(status);
    CHECK(http(status) == attempt_verdict::retry);
    CHECK(http(status, "service_unavailable") == attempt_verdict::retry);
  }
  CHECK(http(503, "not_ready") == attempt_verdict::final);
  for (int status : {400, 401, 403, 404, 408, 409, 422, 425, 501, 504}) {
    INFO(status);
    CHECK(http(status) == attempt_verdict::final);
  }
  CHECK(http(400, "50200") == attempt_verdict::final); // numeric codes are the standard classifier's
}

TEST_CASE("decision table: the standard classifier adds 408, 425, 504 and the retryable numeric codes") {
  auto const std_c = retry_classifier::standard;
  for (int status : {408, 425, 429, 500, 502, 503, 504}) {
    INFO(status);
    CHECK(http(status, {}, std_c) == attempt_verdict::retry);
  }
  for (auto code : {"40901", "42900", "42901", "50000", "50200"}) {
    INFO(code);
    CHECK(http(400, code, std_c) == attempt_verdict::retry);
    CHECK(http(503, code, std_c) == attempt_verdict::retry);
  }
  CHECK(http(400, "40000", std_c) == attempt_verdict::final);
  CHECK(http(401, {}, std_c) == attempt_verdict::final);
  CHECK(http(403, "not_entitled", std_c) == attempt_verdict::final);
  CHECK(http(503, "not_ready", std_c) == attempt_verdict::final);
}

TEST_CASE("decision table: a body code not_ready makes a 503 final, and on any other status the status decides") {
  for (auto c : {retry_classifier::seed_default, retry_classifier::standard}) {
    INFO(static_cast<int>(c));
    CHECK(http(503, "not_ready", c) == attempt_verdict::final);
    for (int status : {429, 500, 502}) {
      INFO(status);
      CHECK(http(status, "not_ready", c) == attempt_verdict::retry);
    }
    for (int status : {400, 404, 501}) {
      INFO(status);
      CHECK(http(status, "not_ready", c) == attempt_verdict::final);
    }
  }
  for (int status : {408, 425, 504}) {
    INFO(status);
    CHECK(http(status, "not_ready") == attempt_verdict::final);
    CHECK(http(status, "not_ready", retry_classifier::standard) == attempt_verdict::retry);
  }
  // idempotency_conflict, by contrast, is final whatever the status.
  for (int status : {429, 500, 502, 503}) {
    INFO(status);
    CHECK(http(status, "idempotency_conflict", retry_classifier::standard) == attempt_verdict::final);
    CHECK(http(status, "40903", retry_classifier::standard) == attempt_verdict::final);
  }
}

TEST_CASE("decision table: 409 is classified by its body code under both classifiers") {
  for (auto c : {retry_classifier::seed_default, retry_classifier::standard}) {
    CHECK(http(409, "idempotency_conflict", c) == attempt_verdict::final);
    CHECK(http(409, "40903", c) == attempt_verdict::final);
    CHECK(http(409, "idempotency_in_progress", c) == attempt_verdict::retry);
    CHECK(http(409, "40901", c) == attempt_verdict::retry);
    CHECK(http(409, {}, c) == attempt_verdict::final);
  }
  CHECK(http(503, "idempotency_conflict") == attempt_verdict::final);
}

TEST_CASE("decision table: network errors by request safety") {
  using s = request_safety;
  // Never sent: always safe.
  CHECK(net(errc::connect_failed, s::unkeyed_write) == attempt_verdict::retry);
  CHECK(net(errc::connect_failed, s::keyed_write) == attempt_verdict::retry);
  // Possibly executed: only reads and keyed writes.
  for (auto e : {errc::attempt_timeout, errc::response_timeout, errc::connection_reset}) {
    INFO(wandura::to_string(e));
    CHECK(net(e, s::read) == attempt_verdict::retry);
    CHECK(net(e, s::keyed_write) == attempt_verdict::retry);
    auto const c = classify_attempt({e, 0, {}}, retry_classifier::standard, s::unkeyed_write);
    CHECK(c.verdict == attempt_verdict::final);
    CHECK(c.note == "not retried: write without idempotency key");
  }
  // Failures that would repeat.
  for (auto e : {errc::tls_failed, errc::response_too_large, errc::protocol_error, errc::transport_failed}) {
    INFO(wandura::to_string(e));
    CHECK(net(e) == attempt_verdict::final);
  }
  CHECK(net(asio::error::operation_aborted) == attempt_verdict::cancelled);
  CHECK(net(asio::error::connection_reset) == attempt_verdict::retry); // Asio's own codes map via the condition
  // A sender of the caller's reporting a rate limit or an outage as an error: retryable, as the condition says.
  CHECK(net(errc::rate_limited) == attempt_verdict::retry);
  CHECK(net(errc::unavailable) == attempt_verdict::retry);
}

TEST_CASE("decision table: a write without a key is never retried after any HTTP answer") {
  auto const c = classify_attempt({{}, 503, {}}, retry_classifier::seed_default, request_safety::unkeyed_write);
  CHECK(c.verdict == attempt_verdict::final);
  CHECK(c.note == "not retried: write without idempotency key");
  CHECK(http(503, {}, retry_classifier::seed_default, request_safety::keyed_write) == attempt_verdict::retry);
  CHECK(http(404, {}, retry_classifier::seed_default, request_safety::unkeyed_write) == attempt_verdict::final);
}
