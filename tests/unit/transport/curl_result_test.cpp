#include "transport/curl_result.hpp"

#include <string>

#include <catch2/catch.hpp>
#include <curl/curl.h>

#include "wandura/error.hpp"

namespace {

using wandura::errc;
using wandura::detail::describe_curl_result;
using wandura::detail::map_curl_result;
using wandura::detail::transfer_facts;

struct facts_set {
  transfer_facts none;    ///< nothing sent
  transfer_facts sent;    ///< request sent, no response byte
  transfer_facts headers; ///< inside the response's header block
  transfer_facts body;    ///< headers complete, body arriving
};

facts_set make_facts() {
  facts_set f;
  f.sent.request_started = true;
  f.headers = f.sent;
  f.headers.response_started = true;
  f.body = f.headers;
  f.body.headers_complete = true;
  return f;
}

} // namespace

TEST_CASE("transport errors: connect, timeout, TLS and protocol results map to typed error codes") {
  auto const f = make_facts();
  CHECK_FALSE(map_curl_result(CURLE_OK, f.none));
  CHECK_FALSE(map_curl_result(CURLE_OK, f.body));
  CHECK(map_curl_result(CURLE_COULDNT_CONNECT, f.none) == errc::connect_failed);
  CHECK(map_curl_result(CURLE_COULDNT_RESOLVE_HOST, f.none) == errc::connect_failed);
  CHECK(map_curl_result(CURLE_OPERATION_TIMEDOUT, f.none) == errc::connect_failed);
  CHECK(map_curl_result(CURLE_OPERATION_TIMEDOUT, f.sent) == errc::attempt_timeout);
  CHECK(map_curl_result(CURLE_OPERATION_TIMEDOUT, f.body) == errc::response_timeout);
  auto part_of_status_line = f.sent;
  part_of_status_line.response_bytes_arrived = true;
  CHECK(map_curl_result(CURLE_OPERATION_TIMEDOUT, part_of_status_line) == errc::response_timeout);
  for (auto rc : {CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE}) {
    CHECK(map_curl_result(rc, f.none) == errc::tls_failed);
  }
  CHECK(map_curl_result(CURLE_WEIRD_SERVER_REPLY, f.sent) == errc::protocol_error);
  CHECK(map_curl_result(CURLE_URL_MALFORMAT, f.none) == errc::transport_failed);
  CHECK(map_curl_result(CURLE_OUT_OF_MEMORY, f.none) == errc::transport_failed);
  CHECK(map_curl_result(CURLE_OUT_OF_MEMORY, f.body) == errc::transport_failed);
  // The retry loop relies on the conditions: resets and timeouts are retryable, TLS failures are not.
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.sent) == wandura::condition::retryable);
  CHECK(map_curl_result(CURLE_OPERATION_TIMEDOUT, f.sent) == wandura::condition::timeout);
  CHECK_FALSE(map_curl_result(CURLE_PEER_FAILED_VERIFICATION, f.none) == wandura::condition::retryable);
}

TEST_CASE("transport errors: a response cut short, and HTTP/2 failures, are retryable connection resets") {
  auto const f = make_facts();
  for (auto rc :
       {CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM}) {
    INFO("CURLcode " << static_cast<int>(rc));
    CHECK(map_curl_result(rc, f.sent) == errc::connection_reset);
    CHECK(map_curl_result(rc, f.body) == errc::connection_reset);
    CHECK(map_curl_result(rc, f.none) == errc::connect_failed); // before the request went out: never sent
    CHECK(map_curl_result(rc, f.sent) == wandura::condition::retryable);
  }
  // libcurl 7.88 returns CURLE_OK for a status line followed by the end of the connection.
  CHECK(map_curl_result(CURLE_OK, f.headers) == errc::connection_reset);
  CHECK(describe_curl_result(CURLE_OK, f.headers, "") == "connection closed inside the response headers");
  // libcurl's words for an empty reply or a short body go by its state; the facts say where the response ended.
  CHECK(describe_curl_result(CURLE_GOT_NOTHING, f.body, "") == "connection closed before the end of the response body");
  CHECK(describe_curl_result(CURLE_GOT_NOTHING, f.sent, "Empty reply from server") ==
        "connection closed before any response byte (libcurl: Empty reply from server)");
  CHECK(describe_curl_result(CURLE_PARTIAL_FILE, f.sent, "") == "connection closed before any response byte");
  // An interim 1xx response and then the end: no final response began, whatever libcurl returns.
  auto interim = f.body;
  interim.interim_only = true;
  CHECK(describe_curl_result(CURLE_GOT_NOTHING, interim, "") ==
        "connection closed after an interim 1xx response, before the final one");
  CHECK(map_curl_result(CURLE_GOT_NOTHING, interim) == errc::connection_reset);
  CHECK(map_curl_result(CURLE_OK, interim) == errc::connection_reset);
  CHECK(describe_curl_result(CURLE_PARTIAL_FILE, f.body, "transfer closed with 10 bytes remaining to read") ==
        "connection closed before the end of the response body (libcurl: transfer closed with 10 bytes remaining "
        "to read)");
  // A read error is a reset; libcurl's words for a broken chunked coding make it a protocol error, but not its
  // "Out of memory" there, nor the phrase elsewhere in the text.
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "Illegal or missing hexadecimal sequence in chunked-encoding") ==
        errc::protocol_error);
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "chunk hex-length char not a hex digit: 0x7a") ==
        errc::protocol_error); // libcurl 8's words
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "invalid chunk size: '-5'") == errc::protocol_error);
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "Out of memory in chunked-encoding") == errc::connection_reset);
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "Recv failure: Connection reset by peer") == errc::connection_reset);
  CHECK(map_curl_result(CURLE_PARTIAL_FILE, f.body, "Malformed encoding found in chunked-encoding") ==
        errc::connection_reset);
  // An HTTP/2 stream or connection ended as a PROTOCOL_ERROR (nghttp2 refusing a malformed response, or the
  // server a malformed request) is final; any other HTTP/2 error code stays a reset.
  for (auto rc : {CURLE_HTTP2_STREAM, CURLE_HTTP2}) {
    CHECK(map_curl_result(rc, f.headers, "HTTP/2 stream 1 was not closed cleanly: PROTOCOL_ERROR (err 1)") ==
          errc::protocol_error);
    CHECK(map_curl_result(rc, f.sent, "HTTP/2 stream 3 reset by server (error 0x1 PROTOCOL_ERROR)") ==
          errc::protocol_error); // libcurl 8's words
    CHECK(map_curl_result(rc, f.body, "HTTP/2 stream 1 was not closed cleanly: INTERNAL_ERROR (err 2)") ==
          errc::connection_reset);
    CHECK(map_curl_result(rc, f.sent, "HTTP/2 stream 1 was not closed cleanly: REFUSED_STREAM (err 7)") ==
          errc::connection_reset);
  }
  CHECK(map_curl_result(CURLE_RECV_ERROR, f.body, "PROTOCOL_ERROR") == errc::connection_reset);
  CHECK(describe_curl_result(CURLE_HTTP2_STREAM, f.sent,
                             "HTTP/2 stream 1 was not closed cleanly: PROTOCOL_ERROR (err 1)") ==
        "an HTTP/2 protocol error: a malformed response, or a request the server called malformed (libcurl: HTTP/2 "
        "stream 1 was not closed cleanly: PROTOCOL_ERROR (err 1))");
}

TEST_CASE("transport errors: oversized bodies and headers are final response_too_large naming which") {
  auto f = make_facts();
  transfer_facts big_body = f.body;
  big_body.body_too_large = true;
  transfer_facts big_headers = f.headers;
  big_headers.headers_too_large = true;
  CHECK(map_curl_result(CURLE_WRITE_ERROR, big_body) == errc::response_too_large);
  CHECK(map_curl_result(CURLE_WRITE_ERROR, big_headers) == errc::response_too_large);
  // libcurl 7.88 refuses a header line over 100 KiB as out of memory, before the header callback sees it.
  CHECK(map_curl_result(CURLE_OUT_OF_MEMORY, f.headers) == errc::response_too_large);
  CHECK_FALSE(map_curl_result(CURLE_WRITE_ERROR, big_headers) == wandura::condition::retryable);
  // The transport's own refusal: libcurl's words for it ("Failed writing header") add nothing and are left out.
  CHECK(describe_curl_result(CURLE_WRITE_ERROR, big_headers, "Failed writing header") ==
        "response headers over 256 KiB");
  CHECK(describe_curl_result(CURLE_WRITE_ERROR, big_body, "Failed writing header") ==
        "response body over transport_options::max_response_bytes");
  transfer_facts lengths = f.headers;
  lengths.invalid_length = true;
  transfer_facts upgrade = f.headers;
  upgrade.refused_status = 101;
  transfer_facts status = f.headers;
  status.refused_status = 999;
  transfer_facts resend = f.sent;
  resend.resend_refused = true;
  for (auto const* facts : {&lengths, &upgrade, &status, &resend}) {
    CHECK(describe_curl_result(CURLE_WRITE_ERROR, *facts, "Failed writing header").find("libcurl") ==
          std::string::npos);
  }
  CHECK(describe_curl_result(CURLE_OUT_OF_MEMORY, f.headers, "") ==
        "a response header line over libcurl's 100 KiB limit");
  CHECK(describe_curl_result(CURLE_WRITE_ERROR, big_body, "") ==
        "response body over transport_options::max_response_bytes");
  CHECK(describe_curl_result(CURLE_COULDNT_CONNECT, f.none, "Failed to connect to 127.0.0.1 port 1") ==
        std::string(curl_easy_strerror(CURLE_COULDNT_CONNECT)) + " (libcurl: Failed to connect to 127.0.0.1 port 1)");
}

TEST_CASE("transport errors: libcurl's text is quoted as one line of printable ASCII, bounded") {
  auto f = make_facts();
  // libcurl quotes what the server sent, e.g. a certificate's subject name, in its error text.
  std::string const quoted =
      describe_curl_result(CURLE_PEER_FAILED_VERIFICATION, f.none,
                           "SSL: certificate subject name 'evil\r\nWARN forged\x1b[2J\x7f caf\xc3\xa9' does not match");
  CHECK(quoted == std::string(curl_easy_strerror(CURLE_PEER_FAILED_VERIFICATION)) +
                      " (libcurl: SSL: certificate subject name 'evil\\x0d\\x0aWARN forged\\x1b[2J\\x7f caf\\xc3\\xa9' "
                      "does not match)");
  // The whole of libcurl's error buffer (CURL_ERROR_SIZE, its terminating NUL included) is kept, never more.
  std::string const full(CURL_ERROR_SIZE - 1, '\n');
  std::string const all = describe_curl_result(CURLE_SSL_CONNECT_ERROR, f.none, full);
  CHECK(all.find("...") == std::string::npos);
  CHECK(all.find('\n') == std::string::npos);
  std::string const longer = describe_curl_result(CURLE_SSL_CONNECT_ERROR, f.none, std::string(1000, 'x'));
  CHECK(longer.find(std::string(CURL_ERROR_SIZE, 'x') + "...)") != std::string::npos);
  CHECK(longer.find(std::string(CURL_ERROR_SIZE + 1, 'x')) == std::string::npos);
}

TEST_CASE("transport errors: a second copy of a request that could not go out is a reset, never connect_failed") {
  // libcurl sends a request again on a new connection when the reused one closed before any response byte. The
  // first copy went out: a failed connect for the second (or the transport refusing it) is not "nothing was sent".
  auto const f = make_facts();
  CHECK(map_curl_result(CURLE_COULDNT_CONNECT, f.sent) == errc::connection_reset);
  CHECK(map_curl_result(CURLE_COULDNT_RESOLVE_HOST, f.sent) == errc::connection_reset);
  auto refused = f.sent;
  refused.resend_refused = true;
  CHECK(map_curl_result(CURLE_ABORTED_BY_CALLBACK, refused) == errc::connection_reset);
  CHECK(describe_curl_result(CURLE_ABORTED_BY_CALLBACK, refused, "").find("not sent again") != std::string::npos);
  CHECK(describe_curl_result(CURLE_COULDNT_CONNECT, f.sent, "").find("the new connection for sending again failed") !=
        std::string::npos);
  // One resend per attempt, and none once the response has begun: each says so.
  auto twice = refused;
  twice.resent = true;
  CHECK(map_curl_result(CURLE_ABORTED_BY_CALLBACK, twice) == errc::connection_reset);
  CHECK(describe_curl_result(CURLE_ABORTED_BY_CALLBACK, twice, "").find("not sent a third time") != std::string::npos);
  auto answering = refused;
  answering.response_started = true;
  CHECK(describe_curl_result(CURLE_ABORTED_BY_CALLBACK, answering, "") ==
        "the HTTP/2 stream was refused after its response had begun: not sent again");
  answering.resent = true; // the second copy's answer had begun: said so, not "before any response byte"
  CHECK(describe_curl_result(CURLE_ABORTED_BY_CALLBACK, answering, "") ==
        "the HTTP/2 stream was refused after its response had begun: not sent again");
  CHECK(map_curl_result(CURLE_COULDNT_CONNECT, f.none) == errc::connect_failed);
}
