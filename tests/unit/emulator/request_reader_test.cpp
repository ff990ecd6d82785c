// The emulator's HTTP request reader alone, fed bytes as a socket would deliver them.
#include "emulator/request_reader.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using wandura::emulator::detail::request_reader;
using event = request_reader::event;

namespace {

/// Feeds `wire` in pieces of `chunk` bytes; returns the targets of the requests read, then "refused <status>: <why>"
/// if the reader refused.
std::vector<std::string> read_all(std::string_view wire, std::size_t chunk) {
  request_reader reader;
  std::vector<std::string> seen;
  for (std::size_t at = 0; at < wire.size();) {
    std::string_view piece = wire.substr(at, chunk);
    auto const [what, consumed] = reader.feed(piece);
    at += consumed;
    if (what == event::request) {
      seen.push_back(std::string(reader.request().method) + " " + reader.request().target + " " +
                     reader.request().body);
    } else if (what == event::refused) {
      seen.push_back("refused " + std::to_string(reader.refusal_status()) + ": " + reader.refusal());
      break;
    }
  }
  return seen;
}

} // namespace

TEST_CASE("request reader: pipelined requests are read one at a time, however the bytes are split") {
  std::string const wire = "POST /v1/playback/tickets HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                           "GET /v1/config HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, wire.size()}) {
    INFO("chunk " << chunk);
    CHECK(read_all(wire, chunk) == std::vector<std::string>{"POST /v1/playback/tickets {}", "GET /v1/config "});
  }
}

TEST_CASE("request reader: Authorization and Idempotency-Key are read once, a repeat is refused") {
  request_reader reader;
  auto const r = reader.feed("GET / HTTP/1.1\r\nHost: x\r\nauthorization: Bearer k\r\nIdempotency-Key: a\r\n\r\n");
  REQUIRE(r.what == event::request);
  CHECK(reader.request().authorization == "Bearer k");
  CHECK(reader.request().idempotency_key == "a");
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: repeated Authorization header"});
}

TEST_CASE("request reader: control bytes in a header value and bad header names are refused") {
  // http_parser refuses most control bytes itself; the reader's own check backs it up. Either way: refused.
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7fz\r\n\r\n", 64).back().starts_with("refused 400: "));
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rX-B: b\r\n\r\n", 64).back().starts_with("refused 400: "));
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nX(A): a\r\n\r\n", 64).back().starts_with("refused 400: "));
}

TEST_CASE("request reader: what is too large, HTTP/2, other codings and upgrades are refused with their status") {
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 413: request body larger than 65536 bytes"});
  std::string const chunked_body = std::string("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") +
                                   "10001\r\n" + std::string(0x10001, 'a') + "\r\n0\r\n\r\n";
  CHECK(read_all(chunked_body, 4096) == std::vector<std::string>{"refused 413: request body larger than 65536 bytes"});
  CHECK(read_all("GET /" + std::string(8192, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 1000) ==
        std::vector<std::string>{"refused 414: request target longer than 8192 bytes"});
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8193, 'a') + "\r\n\r\n", 1000) ==
        std::vector<std::string>{"refused 431: header value longer than 8192 bytes"});
  // A name arriving in pieces is counted whole: 256 bytes are read, 257 refused.
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\n" + std::string(256, 'n') + ": v\r\n\r\n", 100) ==
        std::vector<std::string>{"GET / "});
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\n" + std::string(257, 'n') + ": v\r\n\r\n", 100) ==
        std::vector<std::string>{"refused 431: header name longer than 256 bytes"});
  CHECK(read_all("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 505: HTTP version not supported"});
  // A chunk size past 2^64 - 1 is named for what it is (http_parser calls it a bad Content-Length).
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n", 64) ==
        std::vector<std::string>{"refused 400: chunk size too large"});
  for (std::string const coding : {"", "Transfer-Encoding: chunked\r\n"}) { // a bad length, chunked or not
    CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\n" + coding + "Content-Length: 1x\r\n\r\n", 64)
              .back()
              .starts_with("refused 400: invalid character in content-length"));
  }
  // http_parser takes `gzip, chunked` as chunked alone: the body would arrive still gzip-coded.
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 501: transfer coding other than chunked"});
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 64) ==
        std::vector<std::string>{"POST / {}"});
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                 64) == std::vector<std::string>{"refused 400: repeated Transfer-Encoding header"});
  CHECK(read_all("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: empty Transfer-Encoding header"});
  CHECK(read_all("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: Transfer-Encoding in an HTTP/1.0 request"});
  CHECK(read_all("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: protocol upgrades are not supported"});
  CHECK(read_all("CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: protocol upgrades are not supported"});
}

TEST_CASE("request reader: an HTTP/1.1 request needs one Host header, an HTTP/1.0 one none") {
  CHECK(read_all("GET /v1/config HTTP/1.1\r\nAuthorization: a\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: an HTTP/1.1 request without a Host header"});
  CHECK(read_all("GET /v1/config HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 64) ==
        std::vector<std::string>{"refused 400: repeated Host header"});
  CHECK(read_all("GET /v1/config HTTP/1.0\r\n\r\n", 64) == std::vector<std::string>{"GET /v1/config "});
  CHECK(read_all("GET /v1/config HTTP/1.1\r\nHost:\r\n\r\n", 64) == std::vector<std::string>{"GET /v1/config "});
  CHECK(read_all("GET /v1/config HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 64) ==
        std::vector<std::string>{"GET /v1/config "});
  for (std::string const host : {"x, y", "a/b", "u@h", "a b"}) {
    CAPTURE(host);
    CHECK(read_all("GET /v1/config HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 64) ==
          std::vector<std::string>{"refused 400: invalid Host header"});
  }
  // Pipelined: the second request's missing Host refuses it, not the first.
  CHECK(read_all("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 64) ==
        std::vector<std::string>{"GET /a ", "refused 400: an HTTP/1.1 request without a Host header"});
}

TEST_CASE("request reader: Expect: 100-continue asks for one interim response per request") {
  request_reader reader;
  auto const r = reader.feed("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  CHECK(r.what == event::need_more);
  CHECK(reader.take_continue());
  CHECK_FALSE(reader.take_continue());
  CHECK(reader.feed("{}").what == event::request);
}

TEST_CASE("request reader: 100 Continue is due only once the header section is accepted, and never to HTTP/1.0") {
  SECTION("headers in two reads: nothing is due after the first, whose Expect line the rest may still refuse") {
    request_reader reader;
    CHECK(reader.feed("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nX-More: 1").what == event::need_more);
    CHECK_FALSE(reader.take_continue());
    CHECK(reader.feed("\r\nContent-Length: 999999\r\n\r\n").what == event::refused);
    CHECK(reader.refusal_status() == 413);
    CHECK_FALSE(reader.take_continue());
  }
  SECTION("headers in two reads, accepted: due after the second") {
    request_reader reader;
    CHECK(reader.feed("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n").what == event::need_more);
    CHECK_FALSE(reader.take_continue());
    CHECK(reader.feed("Content-Length: 2\r\n\r\n").what == event::need_more);
    CHECK(reader.take_continue());
    CHECK(reader.feed("{}").what == event::request);
  }
  SECTION("a request that arrived whole needs none, even when bytes follow it alone") {
    request_reader reader;
    CHECK(reader.feed("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}").what ==
          event::request);
    CHECK(reader.feed("\r\n").what == event::need_more); // a line break between requests, which RFC 9112 allows
    CHECK_FALSE(reader.take_continue());
  }
  SECTION("HTTP/1.0: the expectation is ignored") {
    request_reader reader;
    CHECK(reader.feed("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n").what == event::need_more);
    CHECK_FALSE(reader.take_continue());
    CHECK(reader.feed("{}").what == event::request);
  }
}

TEST_CASE("request reader: an absolute-form target is read as its path and query") {
  CHECK(read_all("GET http://127.0.0.1:8080/v1/config?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", 64) ==
        std::vector<std::string>{"GET /v1/config?a=1 "});
  CHECK(read_all("GET HTTPS://api.example/v1/videos HTTP/1.1\r\nHost: api.example\r\n\r\n", 64) ==
        std::vector<std::string>{"GET /v1/videos "});
  CHECK(read_all("GET http://api.example HTTP/1.1\r\nHost: api.example\r\n\r\n", 64) ==
        std::vector<std::string>{"GET / "});
  CHECK(read_all("GET http://api.example?x HTTP/1.1\r\nHost: api.example\r\n\r\n", 64) ==
        std::vector<std::string>{"GET /?x "});
  CHECK(read_all("GET /http://x/y HTTP/1.1\r\nHost: x\r\n\r\n", 64) == std::vector<std::string>{"GET /http://x/y "});
}
