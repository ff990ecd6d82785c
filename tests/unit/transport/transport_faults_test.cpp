#include "wandura/transport/transport.hpp"

// Hostile input and broken responses: headers that would inject lines, oversized headers, responses cut before
// their end, broken HTTP/2 framing. Each maps to the error a retry loop can act on (docs/adr/0002).
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "run_awaitable.hpp"
#include "test_ca_certificate.hpp"
#include "test_http_server.hpp"
#include "transport_fixtures.hpp"
#include "wandura/error.hpp"

namespace {

using test_support::post;
using test_support::run;
using wandura::errc;
using wandura::testing::server_behaviour;
using wandura::testing::test_http_server;

/// The message `send()` throws with, or "" when it does not throw.
std::string send_message(asio::io_context& io, wandura::transport& tr, wandura::http_request const& request) {
  try {
    run(io, tr.send(request, {}));
  } catch (wandura::error const& e) {
    return e.what();
  }
  return {};
}

/// 96 bytes: the body the crafted responses carry.
std::string const body96 =
    R"({"org_id":"o","limits":{"playback":1,"catalog":1,"creatives":1,"videos":1,"video":1,"config":1}})";

/// A 200 response carrying `body96`, with one Content-Length line per element of `lengths`, sent as given.
std::string with_lengths(std::vector<std::string> const& lengths) {
  std::string out = "HTTP/1.1 200 OK\r\n";
  for (auto const& l : lengths) {
    out += "Content-Length:" + l + "\r\n";
  }
  return out + "\r\n" + body96;
}

/// One GET of a fresh transport (attempt timeout 5 s), answered with `reply` verbatim, then a close (`raw`) or
/// nothing more (`raw_then_stall`); `message` gets send()'s message (a second GET) after a close, the attempt's
/// detail otherwise.
wandura::attempt_result answered_with(std::string const& reply, std::string* message = nullptr,
                                      server_behaviour then = server_behaviour::raw,
                                      wandura::transport_options const& transport_options = {}) {
  test_http_server server(then);
  server.set_body(reply);
  asio::io_context io;
  wandura::transport tr(io.get_executor(), transport_options);
  wandura::http_request request;
  request.url = server.url("/v1/config");
  wandura::attempt_options options;
  options.timeout = std::chrono::seconds(5);
  auto result = run(io, tr.send_attempt(request, options));
  if (message != nullptr) {
    *message = then == server_behaviour::raw ? send_message(io, tr, request) : result.detail;
  }
  return result;
}

std::vector<std::string> const injected_values = {
    "Bearer k\r\nX-Injected: yes", "Bearer k\nX-Injected: yes",
    "Bearer k\rX-Injected: yes",   std::string("Bearer k\0X-Injected: yes", 24),
    "Bearer k\x01X-Injected: yes", "Bearer k\x7fX-Injected: yes"};

} // namespace

TEST_CASE("transport: a header value with a control byte is refused before anything is sent, naming the header") {
  test_http_server server;
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  for (auto const& value : injected_values) {
    auto request = post(server.url());
    request.headers.push_back({"Idempotency-Key", value});
    auto const result = run(io, tr.send_attempt(request, {}));
    CHECK(result.error == errc::invalid_argument);
    auto const message = send_message(io, tr, request);
    CHECK(message.find("Idempotency-Key") != std::string::npos);
    CHECK(message.find("X-Injected") == std::string::npos); // the value may be a key: never echoed
  }
  auto bad_name = post(server.url());
  bad_name.headers.push_back({"X-Injected: yes\r\nAccept", "x"});
  CHECK(run(io, tr.send_attempt(bad_name, {})).error == errc::invalid_argument);
  CHECK(server.connections_accepted() == 0);

  // The transport is unharmed: a clean request goes out.
  auto const clean = run(io, tr.send_attempt(post(server.url()), {}));
  CHECK_FALSE(clean.error);
  CHECK(server.last_request_head().find("X-Injected") == std::string::npos);
}

TEST_CASE("transport: a caller's Content-Length or Transfer-Encoding is refused before anything is sent") {
  // A Content-Length: 0 with a body would make the body a second request on the connection (request smuggling).
  test_http_server server;
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  for (auto const& header : std::vector<wandura::http_header>{{"Content-Length", "0"},
                                                              {"content-length", "38"},
                                                              {"Transfer-Encoding", "chunked"},
                                                              {"TRANSFER-ENCODING", "identity"}}) {
    INFO(header.name);
    auto request = post(server.url());
    request.body = "GET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    request.headers.push_back(header);
    auto const result = run(io, tr.send_attempt(request, {}));
    CHECK(result.error == errc::invalid_argument);
    CHECK(send_message(io, tr, request).find("request header " + header.name + ": message framing") !=
          std::string::npos);
  }
  CHECK(server.connections_accepted() == 0);
  CHECK(server.requests_read() == 0);
}

TEST_CASE("transport: a user_agent with a control byte is refused at construction") {
  asio::io_context io;
  for (auto const& value : injected_values) {
    wandura::transport_options options;
    options.user_agent = value;
    try {
      wandura::transport tr(io.get_executor(), options);
      FAIL("constructed with a user_agent holding a control byte");
    } catch (wandura::error const& e) {
      CHECK(e.code() == errc::invalid_argument);
      CHECK(std::string(e.what()).find("user_agent") != std::string::npos);
      CHECK(std::string(e.what()).find("X-Injected") == std::string::npos);
    }
  }
}

TEST_CASE("transport: a ca_bundle naming no readable file of PEM certificates is refused at construction") {
  // transport.hpp, the constructor: errc::invalid_argument naming the path and why; the default (empty) and a file
  // holding a certificate are accepted.
  test_support::scratch_directory const dir("wandura-ca-bundle");
  std::filesystem::create_directories(dir.path() / "certs");
  std::string const pem(test_support::test_ca_pem);
  struct refused {
    std::string path;
    std::string_view why;
  };
  std::vector<refused> const cases = {
      {(dir.path() / "missing.pem").string(), "\": cannot be opened: No such file or directory"},
      {(dir.path() / "certs").string(), "\": is a directory; give one PEM file"},
      {dir.write("empty.pem", ""), "\": holds no PEM certificate"},
      {dir.write("text.pem", "not a certificate\n"), "\": holds no PEM certificate"},
      {dir.write("cut.pem", pem.substr(0, pem.size() / 2)), "\": holds no PEM certificate"},
      {std::string("a\0b", 3), "\": holds a NUL byte"},
      {"/dev/null", "\": is not a regular file"},
      {dir.write("crl-only.pem", test_support::test_crl_pem), "\": holds no PEM certificate"},
  };
  asio::io_context io;
  for (auto const& c : cases) {
    CAPTURE(c.path);
    wandura::transport_options options;
    options.ca_bundle = c.path;
    try {
      wandura::transport tr(io.get_executor(), options);
      FAIL("constructed with that ca_bundle");
    } catch (wandura::error const& e) {
      CHECK(e.code() == errc::invalid_argument);
      std::string const what = e.what();
      CHECK(what.find("transport_options::ca_bundle \"") == 0);
      CHECK(what.find(c.why) != std::string::npos);
    }
  }
  wandura::transport_options options;
  options.ca_bundle = dir.write("ca.pem", "a comment before the certificate\n" + pem);
  CHECK_NOTHROW(wandura::transport(io.get_executor(), options));
  options.ca_bundle = dir.write("ca-and-crl.pem", std::string(test_support::test_crl_pem) + pem);
  CHECK_NOTHROW(wandura::transport(io.get_executor(), options));
  options.ca_bundle.clear(); // the system's bundle, not read by the SDK
  CHECK_NOTHROW(wandura::transport(io.get_executor(), options));
}

TEST_CASE("transport: a 1 MiB response header line is a final response_too_large naming the headers") {
  test_http_server server(server_behaviour::long_header_line);
  server.set_oversized_bytes(std::size_t{1} << 20U);
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  auto request = post(server.url());
  auto const result = run(io, tr.send_attempt(request, {}));
  CHECK(result.error == errc::response_too_large);
  CHECK_FALSE(result.error == wandura::condition::retryable);
  CHECK(send_message(io, tr, request).find("response header line over") != std::string::npos);
}

TEST_CASE("transport: a 470 KB response header block is a final response_too_large, not a retryable reset") {
  test_http_server server(server_behaviour::large_header_block);
  server.set_oversized_bytes(470'000);
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  auto request = post(server.url());
  auto const result = run(io, tr.send_attempt(request, {}));
  CHECK(result.error == errc::response_too_large);
  CHECK_FALSE(result.error == wandura::condition::retryable); // a retry loop makes this one attempt
  CHECK(server.requests_read() == 1);
  CHECK(send_message(io, tr, request).find("response headers over 256 KiB") != std::string::npos);

  // Just under the limit is a response.
  server.set_oversized_bytes(200'000);
  auto const fits = run(io, tr.send_attempt(request, {}));
  CHECK_FALSE(fits.error);
  CHECK(fits.response.status == 200);
  CHECK(fits.response.headers.find_all("x-filler").size() == 200);
}

TEST_CASE("transport: a Content-Length that is not one decimal length is a protocol_error, not a cut body") {
  // RFC 9110 section 8.6. libcurl alone reads the digits a value starts with and keeps the last line's: `5, 500`
  // and `5 500` framed a 5-byte body, and `+96` or a second line replaced the first.
  REQUIRE(body96.size() == 96);
  for (std::vector<std::string> const& lengths : std::vector<std::vector<std::string>>{{" 5, 500"},
                                                                                       {" 5 500"},
                                                                                       {" +96"},
                                                                                       {" -1"},
                                                                                       {""},
                                                                                       {" "},
                                                                                       {" 96,"},
                                                                                       {" ,96"},
                                                                                       {" 96,,96"},
                                                                                       {" 0x60"},
                                                                                       {" 96", " 5, 7"},
                                                                                       {" 5", " +96"},
                                                                                       {" +96", " 5"},
                                                                                       {" 96", " 96, 5"},
                                                                                       {" 96", " 5"},
                                                                                       {" 9223372036854775808"}}) {
    std::string lines;
    for (auto const& l : lengths) {
      lines += "[" + l + "]";
    }
    INFO("Content-Length lines " << lines);
    std::string message;
    auto const result = answered_with(with_lengths(lengths), &message);
    CHECK(result.error == errc::protocol_error);
    CHECK_FALSE(result.error == wandura::condition::retryable);
    INFO(message);
    CHECK(message.find("Content-Length") != std::string::npos); // libcurl itself refuses some ("-1", "")
  }
  // 2^63 - 1 is a length (over any cap); one more is not.
  CHECK(answered_with(with_lengths({" 9223372036854775807"})).error == errc::response_too_large);
  // With no practical cap (SIZE_MAX), a declared length is a promise, not bytes: a body that ends short of
  // 2^63 - 1 is a truncated body, not memory claimed up front (a reserve of the declared length threw).
  wandura::transport_options unlimited;
  unlimited.max_response_bytes = SIZE_MAX;
  for (auto const* length : {" 9223372036854775807", " 1099511627776", " 200000"}) {
    INFO("Content-Length" << length);
    auto const truncated = answered_with(with_lengths({length}), nullptr, server_behaviour::raw, unlimited);
    CHECK(truncated.error == errc::connection_reset);
    CHECK(truncated.error == wandura::condition::retryable);
  }
  // One number, as a list of itself, on several lines, between white space: the body is read whole.
  for (std::vector<std::string> const& lengths : std::vector<std::vector<std::string>>{
           {"96"}, {" \t96 \t"}, {" 96, 96"}, {" 96,096"}, {" 96", " 96"}, {" 96", " 96, 96"}}) {
    auto const result = answered_with(with_lengths(lengths));
    REQUIRE_FALSE(result.error);
    CHECK(result.response.body.view() == body96);
  }
}

TEST_CASE("transport: the Content-Length of a 1xx, 204 or 304 response frames nothing and is not checked") {
  // RFC 9112 section 6.3: such a response ends with its header block, whatever its Content-Length says.
  auto const hinted = answered_with("HTTP/1.1 100 Continue\r\nContent-Length: 5, 7\r\n\r\n"
                                    "HTTP/1.1 103 Early Hints\r\nContent-Length: +1\r\n\r\n" +
                                    with_lengths({" 96"}));
  REQUIRE_FALSE(hinted.error);
  CHECK(hinted.response.status == 200);
  CHECK(hinted.response.body.view() == body96);
  CHECK(hinted.response.headers.find_all("content-length").size() == 1);
  // A 304 names the length of the representation it stands for: not a body over the cap, nor a body at all.
  auto const not_modified = answered_with("HTTP/1.1 304 Not Modified\r\nContent-Length: 1000000000000\r\n\r\n");
  REQUIRE_FALSE(not_modified.error);
  CHECK(not_modified.response.status == 304);
  CHECK(not_modified.response.body.view().empty());
  auto const no_content = answered_with("HTTP/1.1 204 No Content\r\nContent-Length: 5, 7\r\n\r\n");
  REQUIRE_FALSE(no_content.error);
  CHECK(no_content.response.status == 204);
}

TEST_CASE("transport: a response begins where libcurl says, at the first line of a header block") {
  // libcurl reads a status line with several blanks before its code, or a lowercase `http/`; a header whose name
  // begins with `HTTP/` is no status line. Each must leave the final response's own headers read and checked.
  auto const spaced = answered_with("HTTP/1.1  103 Early\r\nLink: </a>\r\n\r\n"
                                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 3\r\nX-Request-Id: r1\r\n"
                                    "Content-Length: 0\r\n\r\n");
  REQUIRE_FALSE(spaced.error);
  CHECK(spaced.response.status == 503);
  CHECK(spaced.response.headers.find("retry-after") == std::optional<std::string_view>("3"));
  CHECK(spaced.response.headers.find("x-request-id") == std::optional<std::string_view>("r1"));
  CHECK(spaced.response.headers.find("link") == std::nullopt); // the 103's
  // Two different lengths after such an interim response are still refused before the body.
  CHECK(answered_with("HTTP/1.1  103 Early\r\n\r\n" + with_lengths({" 96", " 97"})).error == errc::protocol_error);
  // A header named `HTTP/1.1` between two lengths: the second is still seen.
  CHECK(answered_with("HTTP/1.1 200 OK\r\nContent-Length: 10\r\nHTTP/1.1: x\r\nContent-Length: 64\r\n\r\n" +
                      std::string(64, 'a'))
            .error == errc::protocol_error);
  auto const lower = answered_with("http/1.1 200 OK\r\nX-Request-Id: r2\r\n" + with_lengths({" 96"}).substr(17));
  REQUIRE_FALSE(lower.error);
  CHECK(lower.response.status == 200);
  CHECK(lower.response.headers.find("x-request-id") == std::optional<std::string_view>("r2"));
}

TEST_CASE("transport: a 101 Switching Protocols, never asked for, is a protocol_error at once") {
  // libcurl would wait, until the attempt's timeout, for an answer in the protocol switched to.
  std::string message;
  auto const started = std::chrono::steady_clock::now();
  auto const result = answered_with("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", &message,
                                    server_behaviour::raw_then_stall);
  CHECK(result.error == errc::protocol_error);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
  CHECK(message.find("101 Switching Protocols") != std::string::npos);
}

TEST_CASE("transport: a status code past 599 is a protocol_error, final, which names it") {
  // libcurl reads any three digits; HTTP defines 100-599 (libcurl itself refuses a code under 100).
  for (std::string const code : {"600", "999"}) {
    std::string message;
    auto const result = answered_with("HTTP/1.1 " + code + " Odd\r\nContent-Length: 2\r\n\r\n{}", &message);
    CHECK(result.error == errc::protocol_error);
    CHECK_FALSE(result.error == wandura::condition::retryable);
    CHECK(message.find("a status code past 599 (" + code + ")") != std::string::npos);
  }
  auto const highest = answered_with("HTTP/1.1 599 Last\r\nContent-Length: 2\r\n\r\n{}");
  REQUIRE_FALSE(highest.error);
  CHECK(highest.response.status == 599);
}

TEST_CASE("transport: an interim 1xx response and then the end is a connection_reset that says so") {
  std::string message;
  auto const result = answered_with("HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n", &message);
  CHECK(result.error == errc::connection_reset);
  CHECK(message.find("after an interim 1xx response, before the final one") != std::string::npos);
}

TEST_CASE("transport: header bytes of interim 1xx responses count toward the 256 KiB cap: response_too_large") {
  std::string const pad = "X-Pad: " + std::string(991, 'h') + "\r\n"; // 1,000 bytes
  auto lines = [&](int count) {
    std::string out;
    for (int i = 0; i < count; ++i) {
      out += pad;
    }
    return out;
  };
  // Endless 103s (bounded here at 400 KiB), each small: libcurl's own 300 KiB limit used to end it as a receive
  // error, a retryable connection_reset.
  std::string hints;
  while (hints.size() < 400 * 1024) {
    hints += "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n";
  }
  // 150 KB of 103 then 120 KB of 200: each block under the cap, both over it.
  std::string const split = "HTTP/1.1 103 Early Hints\r\n" + lines(150) + "\r\nHTTP/1.1 200 OK\r\n" + lines(120) +
                            "Content-Length: 2\r\n\r\n{}";
  for (auto const& reply : {hints + with_lengths({" 96"}), split}) {
    std::string message;
    auto const result = answered_with(reply, &message);
    CHECK(result.error == errc::response_too_large);
    CHECK_FALSE(result.error == wandura::condition::retryable);
    CHECK(message.find("response headers over 256 KiB") != std::string::npos);
  }
  // Under the cap in all: a response.
  auto const fits = answered_with("HTTP/1.1 103 Early Hints\r\n" + lines(100) + "\r\nHTTP/1.1 200 OK\r\n" + lines(100) +
                                  "Content-Length: 2\r\n\r\n{}");
  REQUIRE_FALSE(fits.error);
  CHECK(fits.response.headers.find_all("x-pad").size() == 100); // the final response's only
}

TEST_CASE("transport: chunked trailers are not merged into the response headers") {
  // RFC 9110 section 6.5.1. A trailer-only Retry-After: 3600 made the client give up on a 503.
  std::string const body = R"({"error_code":"service_unavailable"})";
  auto const chunked = [&](std::string const& head) {
    return "HTTP/1.1 503 Service Unavailable\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n" + "24\r\n" + body +
           "\r\n0\r\nRetry-After: 3600\r\nContent-Length: 99999999\r\nX-Trailer: yes\r\n\r\n";
  };
  REQUIRE(body.size() == 0x24);
  std::string message;
  auto const trailer_only = answered_with(chunked(""), &message);
  INFO(message);
  REQUIRE_FALSE(trailer_only.error);
  CHECK(trailer_only.response.status == 503);
  CHECK(trailer_only.response.body.view() == body);
  CHECK_FALSE(trailer_only.response.retry_after().has_value());
  CHECK(trailer_only.response.headers.find_all("content-length").empty());
  CHECK(trailer_only.response.headers.find_all("x-trailer").empty());
  CHECK(trailer_only.response.headers.find_all("transfer-encoding").size() == 1); // the header section is whole

  auto const both = answered_with(chunked("Retry-After: 1\r\n"));
  REQUIRE_FALSE(both.error);
  CHECK(both.response.headers.find_all("retry-after").size() == 1);
  CHECK(both.response.retry_after() == std::optional<std::string_view>("1"));
}

TEST_CASE("transport: a status line and then a close is a retryable connection_reset, not an empty 200") {
  test_http_server server(server_behaviour::status_line_only);
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  auto request = post(server.url());
  auto const result = run(io, tr.send_attempt(request, {}));
  CHECK(result.error == errc::connection_reset);
  CHECK(result.error == wandura::condition::retryable);
  CHECK(send_message(io, tr, request).find("connection closed inside the response headers") != std::string::npos);
}

TEST_CASE("transport: a body cut before its Content-Length or its last chunk is a retryable connection_reset") {
  for (auto behaviour : {server_behaviour::short_body, server_behaviour::missing_last_chunk}) {
    INFO("behaviour " << static_cast<int>(behaviour));
    test_http_server server(behaviour);
    asio::io_context io;
    wandura::transport tr(io.get_executor());
    auto request = post(server.url());
    auto const result = run(io, tr.send_attempt(request, {}));
    CHECK(result.error == errc::connection_reset);
    CHECK(result.error == wandura::condition::retryable);
    CHECK(send_message(io, tr, request).find("(libcurl: ") != std::string::npos); // libcurl's own words
    CHECK(tr.stats().sockets_open == 0);
  }
}

TEST_CASE("transport: a chunked body that breaks the chunked coding is a protocol_error, final") {
  std::string const head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::string const chunks : {"zz\r\n{}\r\n0\r\n\r\n", "-5\r\n{}\r\n0\r\n\r\n",
                                   "ffffffffffffffffff\r\n{}\r\n0\r\n\r\n", "2\r\n{}XX0\r\n\r\n"}) {
    INFO(chunks);
    std::string message;
    auto const result = answered_with(head + chunks, &message);
    CHECK(result.error == errc::protocol_error);
    CHECK_FALSE(result.error == wandura::condition::retryable);
    CHECK(message.find("a chunked body that is not valid chunked coding") != std::string::npos);
    CHECK(message.find("(libcurl: ") != std::string::npos); // libcurl's own words follow
  }
  // Cut before its last chunk, the same body is incomplete, not malformed.
  auto const cut = answered_with(head + "2\r\n{}\r\n");
  CHECK(cut.error == errc::connection_reset);
}

TEST_CASE("transport: an h2c request answered with bytes that are not HTTP/2 is a retryable connection_reset") {
  // libcurl sees no frame at all here (CURLE_GOT_NOTHING); its HTTP/2 session and stream errors (CURLE_HTTP2,
  // CURLE_HTTP2_STREAM) map the same way, which curl_result_test.cpp checks.
  test_http_server server(server_behaviour::garbage);
  asio::io_context io;
  wandura::transport_options options;
  options.http2_prior_knowledge = true;
  wandura::transport tr(io.get_executor(), options);
  auto request = post(server.url());
  auto const result = run(io, tr.send_attempt(request, {}));
  INFO(send_message(io, tr, request));
  CHECK(result.error == errc::connection_reset);
  CHECK(result.error == wandura::condition::retryable);
}

namespace {

TEST_CASE("lifetime: an io_context destroyed with a send pending frees the send and the coroutine that owns the "
          "transport") {
  // The pending send's handler is the coroutine, whose frame owns the transport, which holds the send: a cycle no
  // io_context queue holds. Destroying the io_context must free it, as it frees any other pending operation.
  test_http_server stalled(server_behaviour::stall);
  std::weak_ptr<wandura::transport> watch;
  auto const request = post(stalled.url()); // outlives the io_context: the transport holds its address
  {
    asio::io_context io;
    auto tr = std::make_shared<wandura::transport>(io.get_executor());
    watch = tr;
    asio::co_spawn(
        io,
        [](std::shared_ptr<wandura::transport> owner, wandura::http_request const& r) -> asio::awaitable<void> {
          wandura::attempt_options options;
          options.timeout = std::chrono::seconds(30);
          auto attempt = owner->send_attempt(r, options);
          (void)co_await std::move(attempt);
        }(tr, request),
        asio::detached);
    tr.reset();                                                     // the coroutine's frame holds the transport now
    for (int i = 0; i < 300 && stalled.requests_read() == 0; ++i) { // bounded: until the request arrived
      io.run_for(std::chrono::milliseconds(10));
    }
    REQUIRE(stalled.requests_read() == 1);
    REQUIRE_FALSE(watch.expired());
  } // ~io_context with the send pending
  CHECK(watch.expired());
}

} // namespace
