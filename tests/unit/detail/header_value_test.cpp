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

TEST_CASE("header value: visible ASCII, SP, HTAB and obs-text pass") {
  CHECK_FALSE(find_forbidden_header_byte("Bearer test-key").has_value());
  CHECK_FALSE(find_forbidden_header_byte("").has_value());
  CHECK_FALSE(find_forbidden_header_byte("wandura-cpp/0.1 (linux)\t\x80\xc3\xa9\xff ~").has_value());
  CHECK_NOTHROW(check_header_value("Authorization", "Bearer test-key"));
  CHECK_NOTHROW(check_header_value("User-Agent", "a\tb caf\xc3\xa9"));
}

TEST_CASE("header value: every control byte but HTAB, and DEL, is refused (RFC 9110 section 5.5)") {
  for (int b = 0; b < 256; ++b) {
    std::string value = "Bearer k";
    value += static_cast<char>(b);
    value += "tail";
    bool const allowed = b == '\t' || (b >= 0x20 && b != 0x7F);
    INFO("byte " << b);
    CHECK(find_forbidden_header_byte(value).has_value() == !allowed);
    if (!allowed) {
      CHECK(find_forbidden_header_byte(value) == 8U);
    }
  }
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

TEST_CASE("header value: another control byte is refused naming the header, its offset and the byte in hex") {
  std::string const soh = refusal("Authorization", "Bearer s3cr3t\x01tail");
  CHECK(soh == "header Authorization: value holds a control byte (\\x01) at byte 13; refused, nothing sent");
  std::string const del = refusal("User-Agent", "agent\x7ftail");
  CHECK(del == "header User-Agent: value holds a control byte (\\x7f) at byte 5; refused, nothing sent");
  CHECK(refusal("Authorization", "Bearer \x1f").find("(\\x1f) at byte 7") != std::string::npos);
}
