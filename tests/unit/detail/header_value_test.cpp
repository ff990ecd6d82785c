#include "wandura/detail/header_value.hpp"

#include "wandura/error.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace std::string_view_literals;
using wandura::detail::check_header_value;
using wandura::detail::find_forbidden_header_byte;

namespace {

std::string refusal(std::string_view name, std::string_view value) {
  try {
    check_header_value(name, value);
    FAIL_CHECK("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    return e.what();
  }
  return {};
}

} // namespace

TEST_CASE("header value: ordinary values pass, other control bytes included") {
  CHECK_FALSE(find_forbidden_header_byte("Bearer test-key").has_value());
  CHECK_FALSE(find_forbidden_header_byte("").has_value());
  CHECK_FALSE(find_forbidden_header_byte("wandura-cpp/0.1 (linux)\t\x01\x7f\xc3\xa9").has_value());
  CHECK_NOTHROW(check_header_value("Authorization", "Bearer test-key"));
  CHECK_NOTHROW(check_header_value("User-Agent", "a\tb"));
}

TEST_CASE("header value: CR, LF and NUL are found at their offset") {
  CHECK(find_forbidden_header_byte("k\r\nX-Injected: yes") == 1U);
  CHECK(find_forbidden_header_byte("key\nX-Injected: yes") == 3U);
  CHECK(find_forbidden_header_byte("ke\ry") == 2U);
  CHECK(find_forbidden_header_byte("secret\0tail"sv) == 6U);
  CHECK(find_forbidden_header_byte("\n") == 0U);
}

TEST_CASE("header value: the refusal names the header and the byte, never the value") {
  std::string const crlf = refusal("Authorization", "Bearer s3cr3t\r\nX-Injected: yes");
  CHECK(crlf.find("Authorization") != std::string::npos);
  CHECK(crlf.find("carriage return") != std::string::npos);
  CHECK(crlf.find("byte 13") != std::string::npos);
  CHECK(crlf.find("s3cr3t") == std::string::npos);
  CHECK(crlf.find("Injected") == std::string::npos);

  std::string const lf = refusal("User-Agent", "agent\nX-Injected: 1");
  CHECK(lf.find("User-Agent") != std::string::npos);
  CHECK(lf.find("line feed") != std::string::npos);
  CHECK(lf.find("agent\n") == std::string::npos);

  std::string const nul = refusal("Idempotency-Key", "key-1\0hidden"sv);
  CHECK(nul.find("Idempotency-Key") != std::string::npos);
  CHECK(nul.find("NUL") != std::string::npos);
  CHECK(nul.find("hidden") == std::string::npos);
}
