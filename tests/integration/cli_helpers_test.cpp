#include "apps/cli.hpp"

#include <cstdlib>
#include <vector>

#include <catch2/catch.hpp>

namespace {

// argv-style storage for arg_reader.
struct argv_of {
  std::vector<std::string> text;
  std::vector<char*> ptrs;
  explicit argv_of(std::vector<std::string> args) : text(std::move(args)) {
    for (auto& s : text) {
      ptrs.push_back(s.data());
    }
  }
  [[nodiscard]] std::span<char* const> span() const { return {ptrs.data(), ptrs.size()}; }
};

} // namespace

TEST_CASE("cli arguments: flags take the next argument or the text after '='") {
  argv_of a({"--film", "the-heiress-returns", "--episode=4", "--json"});
  wandura::cli::arg_reader r(a.span());
  REQUIRE(r.next());
  CHECK(r.flag() == "--film");
  CHECK(r.value() == "the-heiress-returns");
  REQUIRE(r.next());
  CHECK(r.flag() == "--episode");
  CHECK(r.integer(1, 10) == 4);
  REQUIRE(r.next());
  CHECK(r.flag() == "--json");
  CHECK_FALSE(r.next());
}

TEST_CASE("cli arguments: a missing value, a bad number or a bare word is a usage error") {
  argv_of missing({"--film"});
  wandura::cli::arg_reader r1(missing.span());
  REQUIRE(r1.next());
  CHECK_THROWS_AS(r1.value(), wandura::cli::usage_error);

  for (auto const* bad : {"0", "11", "4x", "", "-1", " 4"}) {
    argv_of a({"--episode", bad});
    wandura::cli::arg_reader r(a.span());
    REQUIRE(r.next());
    CHECK_THROWS_AS(r.integer(1, 10), wandura::cli::usage_error);
  }

  argv_of bare({"tickets"});
  wandura::cli::arg_reader r2(bare.span());
  CHECK_THROWS_AS(r2.next(), wandura::cli::usage_error);

  argv_of help({"-h"});
  wandura::cli::arg_reader r3(help.span());
  REQUIRE(r3.next());
  CHECK(r3.flag() == "--help");
}

TEST_CASE("cli policies: the three presets by name, anything else refused") {
  CHECK(wandura::cli::policy_from_name("interactive") == wandura::retry_policy::interactive());
  CHECK(wandura::cli::policy_from_name("background") == wandura::retry_policy::background());
  CHECK(wandura::cli::policy_from_name("standard") == wandura::retry_policy::standard());
  CHECK_THROWS_AS(wandura::cli::policy_from_name("Interactive"), wandura::cli::usage_error);
}

TEST_CASE("cli connection: flags win over the environment, the key is required") {
  ::setenv("WANDURA_BASE_URL", "http://127.0.0.1:9999", 1);
  ::setenv("WANDURA_API_KEY", "env-key", 1);
  wandura::cli::connection from_env;
  auto o = from_env.to_client_options();
  CHECK(o.base_url == "http://127.0.0.1:9999");
  CHECK(o.api_key == "env-key");
  CHECK(o.retry.log); // WARN lines go to stderr

  argv_of a({"--base-url", "http://127.0.0.1:1234", "--api-key", "flag-key"});
  wandura::cli::arg_reader r(a.span());
  wandura::cli::connection from_flags;
  while (r.next()) {
    REQUIRE(from_flags.read(r));
  }
  o = from_flags.to_client_options();
  CHECK(o.base_url == "http://127.0.0.1:1234");
  CHECK(o.api_key == "flag-key");

  ::unsetenv("WANDURA_API_KEY");
  ::unsetenv("WANDURA_BASE_URL");
  wandura::cli::connection none;
  CHECK_THROWS_AS(none.to_client_options(), wandura::cli::usage_error);
  wandura::cli::connection key_only;
  key_only.api_key = "k";
  CHECK(key_only.to_client_options().base_url == "http://127.0.0.1:8787");
}

TEST_CASE("cli json: strings are quoted with quotes, backslashes and control characters escaped") {
  CHECK(wandura::cli::json_string("plain") == "\"plain\"");
  CHECK(wandura::cli::json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(wandura::cli::json_string("l1\nl2\t\r") == "\"l1\\nl2\\t\\r\"");
  CHECK(wandura::cli::json_string(std::string_view("\x01\x1f", 2)) == "\"\\u0001\\u001f\"");
  CHECK(wandura::cli::json_string("Tập 4 · 第四集") == "\"Tập 4 · 第四集\""); // UTF-8 passes through
  CHECK(wandura::cli::json_string("") == "\"\"");
}
