#include "wandura/detail/base_url.hpp"

#include "wandura/error.hpp"

#include <catch2/catch.hpp>

#include <string>

using wandura::detail::checked_base_url;

namespace {

/// The message of the error `checked_base_url(url)` throws; fails the test when it returns or throws another code.
std::string refusal(std::string_view url) {
  try {
    auto const accepted = checked_base_url(url);
    FAIL_CHECK("accepted as " << accepted);
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    return e.what();
  }
  return {};
}

} // namespace

TEST_CASE("base_url: a plain http or https URL is returned as it is") {
  CHECK(checked_base_url("https://api.wandura.example") == "https://api.wandura.example");
  CHECK(checked_base_url("http://127.0.0.1:8787") == "http://127.0.0.1:8787");
  CHECK(checked_base_url("https://api.wandura.example/base/v2") == "https://api.wandura.example/base/v2");
}

TEST_CASE("base_url: the scheme is case-insensitive and comes back in lower case") {
  CHECK(checked_base_url("HTTP://127.0.0.1:8787") == "http://127.0.0.1:8787");
  CHECK(checked_base_url("HtTpS://api.wandura.example") == "https://api.wandura.example");
}

TEST_CASE("base_url: trailing slashes are dropped, so that /v1/... can be appended") {
  CHECK(checked_base_url("http://127.0.0.1:8787/") == "http://127.0.0.1:8787");
  CHECK(checked_base_url("http://127.0.0.1:8787///") == "http://127.0.0.1:8787");
  CHECK(checked_base_url("https://api.wandura.example/base/") == "https://api.wandura.example/base");
}

TEST_CASE("base_url: an IPv6 literal keeps its brackets and port") {
  CHECK(checked_base_url("http://[::1]:8787") == "http://[::1]:8787");
  CHECK(checked_base_url("http://[::1]:8787/") == "http://[::1]:8787");
  CHECK(checked_base_url("https://[2001:db8::7]/api") == "https://[2001:db8::7]/api");
  CHECK(checked_base_url("http://[fe80::1%25eth0]:8787") == "http://[fe80::1%25eth0]:8787"); // zone kept
  refusal("http://[::1");
  refusal("http://[not-an-address]:80");
}

TEST_CASE("base_url: the port must be 1-65535") {
  CHECK(refusal("http://127.0.0.1:99999").find("port") != std::string::npos);
  CHECK(refusal("http://127.0.0.1:65536").find("port") != std::string::npos);
  CHECK(refusal("http://127.0.0.1:0").find("port") != std::string::npos);
  CHECK(refusal("http://127.0.0.1:-1").find("port") != std::string::npos);
  CHECK(checked_base_url("http://127.0.0.1:65535") == "http://127.0.0.1:65535");
  CHECK(checked_base_url("http://127.0.0.1:1") == "http://127.0.0.1:1");
}

TEST_CASE("base_url: a query or a fragment is refused, even an empty one") {
  CHECK(refusal("https://api.wandura.example?x=1").find("query") != std::string::npos);
  CHECK(refusal("https://api.wandura.example/base?x=1").find("query") != std::string::npos);
  CHECK(refusal("https://api.wandura.example/?").find("query") != std::string::npos);
  CHECK(refusal("https://api.wandura.example#frag").find("fragment") != std::string::npos);
  CHECK(refusal("https://api.wandura.example/base#").find("fragment") != std::string::npos);
}

TEST_CASE("base_url: userinfo is refused and never echoed") {
  CHECK(refusal("https://user:pass@api.wandura.example").find("pass") == std::string::npos);
  for (auto url : {"https://alice:s3cret@api.wandura.example", "https://alice:s3cret@api.wandura.example:99999",
                   "https://alice:s3cret@api.wandura.example/?x=1", "ftp://alice:s3cret@api.wandura.example",
                   "https://:s3cret@api.wandura.example", "https://alice:s3cret@", "alice:s3cret@api.wandura.example",
                   "https://alice:s3cret@api.wandura.example#frag", "HTTPS://alice:s3cret@[::1]:8787/"}) {
    INFO("url: " << url);
    std::string const message = refusal(url);
    CHECK_FALSE(message.empty());
    CHECK(message.find("s3cret") == std::string::npos);
    CHECK(message.find("alice") == std::string::npos);
  }
  CHECK(refusal("https://alice@api.wandura.example").find("userinfo") != std::string::npos);
}

TEST_CASE("base_url: an '@' in the path is a mistyped password too, refused and not echoed") {
  // Found by fuzz_base_url: libcurl reads the host as `u` and the rest as a path.
  std::string const message = refusal("https://u/er:passap@i.wandura.e|ample");
  CHECK(message.find("userinfo") != std::string::npos);
  CHECK(message.find("pass") == std::string::npos);
}

TEST_CASE("base_url: a percent-encoded host is refused, so that the result is what the host was written as") {
  // Found by fuzz_base_url: `http://%36` became `http://6`, which libcurl then reads as `http://0.0.0.6`.
  CHECK(refusal("http://%36").find("percent-encoded") != std::string::npos);
  CHECK(refusal("http://%41pi.example:80/base").find("percent-encoded") != std::string::npos);
  CHECK(checked_base_url("http://api.example/a%20b") == "http://api.example/a%20b"); // in the path it is fine
}

TEST_CASE("base_url: bytes outside visible ASCII are refused and shown escaped") {
  CHECK(refusal("https://api.wand\xc3\xbcra.example").find("\\xc3\\xbc") != std::string::npos);
  CHECK(refusal("https://api.wandura.example/\x7f").find("visible ASCII") != std::string::npos);
}

TEST_CASE("base_url: other schemes, no host, white space and control bytes are refused") {
  for (auto url : {"", "api.wandura.example", "ftp://api.wandura.example", "file:///etc/passwd", "https://",
                   "https:///path", "http://:8787", "https://api.wandura.example/a b", " https://api.wandura.example",
                   "https://api.wandura.example\r\nX-Injected: 1", "https://api.wandura.example\t", "mailto:x"}) {
    INFO("url: " << url);
    refusal(url);
  }
  using namespace std::string_view_literals;
  refusal("https://api.wandura.example\0.evil"sv);
}

TEST_CASE("base_url: a refusal says what a base URL must be and what it got") {
  CHECK(refusal("ftp://127.0.0.1:1") ==
        "base_url must be an http:// or https:// URL with a host, got \"ftp://127.0.0.1:1\"");
}

TEST_CASE("base_url: a refused URL without '@' is quoted in the message, control bytes escaped") {
  std::string const message = refusal("ftp://api.wandura.example\x01");
  CHECK(message.find("\"ftp://api.wandura.example\\x01\"") != std::string::npos);
  CHECK(message.find('\x01') == std::string::npos);
}
