#include "transport/header_check.hpp"

#include <string>

#include <catch2/catch.hpp>

using wandura::detail::check_headers;
using wandura::detail::is_header_name;
using wandura::detail::is_header_value;

TEST_CASE("header check: names are RFC 9110 tokens, values hold no CR, LF or NUL") {
  CHECK(is_header_name("Idempotency-Key"));
  CHECK(is_header_name("x!#$%&'*+-.^_`|~9"));
  CHECK_FALSE(is_header_name(""));
  CHECK_FALSE(is_header_name("X Injected"));
  CHECK_FALSE(is_header_name("X:Y"));
  CHECK_FALSE(is_header_name("X\r\nY"));
  CHECK_FALSE(is_header_name("caf\xC3\xA9"));
  CHECK(is_header_value(""));
  CHECK(is_header_value("Bearer k3y with spaces\tand tabs"));
  CHECK_FALSE(is_header_value("Bearer k\r\nX-Injected: yes"));
  CHECK_FALSE(is_header_value("Bearer k\nX-Injected: yes"));
  CHECK_FALSE(is_header_value("Bearer k\r"));
  CHECK_FALSE(is_header_value(std::string("Bearer k\0tail", 13)));
}

TEST_CASE("header check: a CR, LF or NUL is found at every position of a long value, UTF-8 and tabs pass") {
  std::string const clean = "Bearer 0123456789abcdef\t\xC3\xA9\x0E\x7F tail of the key";
  CHECK(is_header_value(clean));
  for (char const bad : {'\r', '\n', '\0'}) {
    for (std::size_t at = 0; at < clean.size(); ++at) {
      std::string value = clean;
      value[at] = bad;
      INFO("byte " << static_cast<int>(bad) << " at " << at);
      CHECK_FALSE(is_header_value(value));
    }
  }
  for (char const fine : {'\x01', '\x0C', '\x0E', '\x80', '\xFF'}) {
    std::string value = clean;
    value[17] = fine;
    CHECK(is_header_value(value)); // other control bytes near CR, and bytes above 0x7F, are not refused
  }
}

TEST_CASE("header check: the message names the header and never echoes its value") {
  CHECK(check_headers({{"Authorization", "Bearer ok"}, {"Accept", "application/json"}}).empty());
  auto const why = check_headers({{"Accept", "application/json"}, {"Authorization", "Bearer s3cret\r\nX: 1"}});
  CHECK(why == "request header Authorization: value holds CR, LF or NUL");
  CHECK(why.find("s3cret") == std::string::npos);
  CHECK(check_headers({{"Accept", "a"}, {"Bad Name", "v"}}) == "request header 1: name is not an HTTP token");
}
