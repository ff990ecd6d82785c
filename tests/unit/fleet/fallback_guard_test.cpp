// The degrade-never-block bookkeeping every shared-state class uses (src/fleet/fallback_guard.hpp).
#include "fleet/fallback_guard.hpp"

#include <string>
#include <vector>

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/fleet/fleet_error.hpp"

using namespace std::chrono_literals;

TEST_CASE("fallback guard: one WARN line per outage, every local answer counted, Redis probed after the interval") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("ticket_cache", "127.0.0.1:6379", options);
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  REQUIRE(guard.ask_redis(t0));
  guard.redis_failed(wandura::errc::attempt_timeout, t0);
  CHECK(guard.degraded());
  for (int i = 1; i <= 9; ++i) {
    CHECK_FALSE(guard.ask_redis(t0 + i * 10ms)); // within the probe interval: local, counted
  }
  CHECK(guard.fallbacks() == 10);
  REQUIRE(guard.ask_redis(t0 + 500ms)); // probe
  guard.redis_failed(wandura::errc::connect_failed, t0 + 500ms);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("WARN fleet ticket_cache: redis 127.0.0.1:6379 unavailable ("));

  REQUIRE(guard.ask_redis(t0 + 1000ms));
  guard.redis_answered();
  CHECK_FALSE(guard.degraded());
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "INFO fleet ticket_cache: redis 127.0.0.1:6379 is back after 11 local answers");
  guard.redis_answered();
  CHECK(lines.size() == 2);

  guard.redis_failed(wandura::errc::connection_reset, t0 + 2s); // a new outage: a new WARN line
  CHECK(lines.size() == 3);
  CHECK(guard.fallbacks() == 12);
}

TEST_CASE("fallback guard: without a logger it still counts") {
  wandura::detail::fallback_guard guard("viewer_limit", "h:1", {});
  guard.redis_failed(wandura::errc::attempt_timeout, std::chrono::steady_clock::now());
  CHECK(guard.fallbacks() == 1);
  CHECK(guard.degraded());
}

TEST_CASE("fallback guard: shut_down answers locally for good, without a line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("viewer_limit", "127.0.0.1:6379", options);
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  REQUIRE(guard.ask_redis(t0));
  guard.redis_failed(asio::error::shut_down, t0); // the fleet was shut down: no outage, no WARN line
  CHECK(guard.degraded());
  CHECK(guard.fallbacks() == 1);
  CHECK_FALSE(guard.ask_redis(t0 + 10ms));
  CHECK_FALSE(guard.ask_redis(t0 + 1h)); // never probed again, whatever the interval
  CHECK(guard.fallbacks() == 3);
  CHECK(lines.empty());
}

TEST_CASE("fallback guard: the WARN line quotes Redis's error reply as one bounded line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("ticket_cache", "127.0.0.1:6379", options);
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  guard.redis_failed(wandura::fleet_errc::server_error, t0, "NOAUTH Authentication required.\r\nINFO forged line");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "WARN fleet ticket_cache: redis 127.0.0.1:6379 unavailable (redis answered an error reply: NOAUTH "
                    "Authentication required.\\x0d\\x0aINFO forged line); answering from local state until it is back");
  guard.redis_answered();
  guard.redis_failed(wandura::fleet_errc::server_error, t0 + 1s, std::string(1000, 'E'));
  REQUIRE(lines.size() == 3);
  CHECK(lines[2].size() < 400); // the first 200 bytes and "..."
  CHECK(lines[2].find(std::string(200, 'E') + "...)") != std::string::npos);
}

TEST_CASE("fallback guard: the arguments Redis echoes after an unknown command stay out of the WARN line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); }};
  wandura::detail::fallback_guard guard("viewer_limit", "127.0.0.1:6379", options);
  guard.redis_failed(wandura::fleet_errc::server_error, std::chrono::steady_clock::now(),
                     "ERR unknown command 'EVALSHA', with args beginning with: 'a008' '1' "
                     "'wandura:{acme}:viewer:30pm-b30:viewer-x' ");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "WARN fleet viewer_limit: redis 127.0.0.1:6379 unavailable (redis answered an error reply: ERR "
                    "unknown command 'EVALSHA'); answering from local state until it is back");
}
