#include "transport/header_check.hpp"

#include <string>

#include <catch2/catch.hpp>

using wandura::detail::check_headers;
using wandura::detail::is_header_name;
using wandura::detail::is_header_value;

TEST_CASE("header check: names are RFC 9110 tokens, values hold no control byte but HTAB") {
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

TEST_CASE("header check: a control byte is found at every position of a long value, UTF-8 and tabs pass") {
  std::string const clean = "Bearer 0123456789abcdef\t\xC3\xA9\x80\xFF tail of the key ~";
  CHECK(is_header_value(clean));
  for (char const bad : {'\r', '\n', '\0', '\x01', '\x08', '\x0B', '\x0C', '\x0E', '\x1B', '\x1F', '\x7F'}) {
    for (std::size_t at = 0; at < clean.size(); ++at) {
      std::string value = clean;
      value[at] = bad;
      INFO("byte " << static_cast<int>(bad) << " at " << at);
      CHECK_FALSE(is_header_value(value));
    }
  }
  for (char const fine : {'\t', ' ', '~', '\x80', '\xFF'}) {
    for (std::size_t at = 0; at < clean.size(); ++at) {
      std::string value = clean;
      value[at] = fine;
      INFO("byte " << static_cast<int>(fine) << " at " << at);
      CHECK(is_header_value(value)); // HTAB, SP, visible ASCII and obs-text (0x80-0xFF) are field-value bytes
    }
  }
}

TEST_CASE("header check: the message names the header and never echoes its value") {
  CHECK(check_headers({{"Authorization", "Bearer ok"}, {"Accept", "application/json"}}).empty());
  auto const why = check_headers({{"Accept", "application/json"}, {"Authorization", "Bearer s3cret\r\nX: 1"}});
  CHECK(why == "request header Authorization: value holds a carriage return (CR) at byte 13");
  CHECK(why.find("s3cret") == std::string::npos);
  CHECK(check_headers({{"Accept", "a"}, {"Bad Name", "v"}}) == "request header 1: name is not an HTTP token");
  CHECK(check_headers({{"X-Viewer", "v\x7f"}}) ==
        "request header X-Viewer: value holds a control byte (\\x7f) at byte 1");
}

TEST_CASE("header check: Content-Length and Transfer-Encoding, in any case, are the transport's own") {
  for (auto name : {"Content-Length", "content-length", "CONTENT-LENGTH", "Transfer-Encoding", "transfer-encoding",
                    "TrAnSfEr-EnCoDiNg"}) {
    INFO(name);
    auto const why = check_headers({{"Accept", "a"}, {name, "0"}});
    CHECK(why == std::string("request header ") + name + ": message framing is set by the transport from the body");
  }
  CHECK(
      check_headers({{"Content-Type", "application/json"}, {"Content-Length-Hint", "5"}, {"TE", "trailers"}}).empty());
}
