#include "wandura/resilience/retry_event.hpp"

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

TEST_CASE("retry event: the WARN line reads exactly as the seed's example") {
  wandura::retry_event e;
  e.retry = 1;
  e.max_retries = 2;
  e.delay = std::chrono::milliseconds(231);
  e.http_status = 503;
  e.error_code = "50200";
  CHECK(wandura::format_retry_line(e) == "retry 1/2 in 231 ms: HTTP 503 code=50200");
  e.error_code = {};
  CHECK(wandura::format_retry_line(e) == "retry 1/2 in 231 ms: HTTP 503");
}

TEST_CASE("retry event: network errors are named by their message") {
  wandura::retry_event e;
  e.retry = 1;
  e.max_retries = 3;
  e.delay = std::chrono::milliseconds(412);
  e.error = wandura::errc::connection_reset;
  CHECK(wandura::format_retry_line(e) == "retry 1/3 in 412 ms: connection reset");
}

TEST_CASE("retry event: the server's code goes in the line escaped and bounded") {
  wandura::retry_event e;
  e.retry = 1;
  e.max_retries = 2;
  e.delay = std::chrono::milliseconds(231);
  e.http_status = 503;
  e.error_code = "bad\r\nWARN forged";
  CHECK(wandura::format_retry_line(e) == "retry 1/2 in 231 ms: HTTP 503 code=bad\\x0d\\x0aWARN forged");
  std::string const long_code(5'000, 'x');
  e.error_code = long_code;
  CHECK(wandura::format_retry_line(e) == "retry 1/2 in 231 ms: HTTP 503 code=" + std::string(200, 'x') + "...");
}
