#include "wandura/fleet/fleet_error.hpp"

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

TEST_CASE("fleet error codes: every enumerator has a name and a message in the wandura.fleet category") {
  for (auto e : {wandura::fleet_errc::server_error, wandura::fleet_errc::auth_failed, wandura::fleet_errc::overloaded,
                 wandura::fleet_errc::unexpected_reply}) {
    std::error_code ec = e;
    CHECK(std::string(ec.category().name()) == "wandura.fleet");
    CHECK(ec.message().find("unknown") == std::string::npos);
    CHECK(wandura::to_string(e) != "unknown");
  }
  CHECK(wandura::to_string(static_cast<wandura::fleet_errc>(99)) == "unknown");
}

TEST_CASE("fleet error codes: only overload is worth retrying") {
  CHECK(std::error_code(wandura::fleet_errc::overloaded) == wandura::condition::retryable);
  CHECK(std::error_code(wandura::fleet_errc::server_error) != wandura::condition::retryable);
  CHECK(std::error_code(wandura::fleet_errc::auth_failed) != wandura::condition::retryable);
  CHECK(std::error_code(wandura::fleet_errc::unexpected_reply) != wandura::condition::retryable);
}
