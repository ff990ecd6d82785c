#include "transport/curl_result.hpp"

#include <curl/curl.h>

#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

[[nodiscard]] bool is_tls_failure(CURLcode rc) noexcept {
  switch (rc) {
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CLIENTCERT:
  case CURLE_USE_SSL_FAILED: return true;
  default: return false;
  }
}

/// The connection ended (or failed) before the whole response arrived: a reset, a close before the end of the
/// headers or of the body, or an HTTP/2 stream or connection error. The request was sent unless libcurl never got
/// past connecting.
[[nodiscard]] bool is_cut_short(CURLcode rc) noexcept {
  switch (rc) {
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM: return true;
  default: return false;
  }
}

/// A chunked body whose chunk sizes or framing break the chunked coding's grammar (RFC 9112 section 7.1), which
/// libcurl reports as CURLE_RECV_ERROR, as it does a failed read: only its text tells them apart. 7.88 says "<what>
/// in chunked-encoding" (lib/transfer.c); the 8.x parser "chunk hex-length char not a hex digit: 0x7a", "chunk
/// hex-length longer than 16", "invalid chunk size: '...'" (lib/http_chunks.c). Its "Out of memory" there is not
/// the peer's doing; a failed read's text never names a chunk.
[[nodiscard]] bool is_malformed_chunking(CURLcode rc, std::string_view curl_text) noexcept {
  auto const names = [&](std::string_view word) { return curl_text.find(word) != std::string_view::npos; };
  return rc == CURLE_RECV_ERROR && (names("chunked-encoding") || names("chunk ")) && !names("Out of memory");
}

/// libcurl 7.88 reports a header line over its 100 KiB limit (CURL_MAX_HTTP_HEADER) as out of memory, before the
/// header callback sees it: out of memory inside a header block is taken for that.
[[nodiscard]] bool is_header_line_too_long(CURLcode rc, transfer_facts const& facts) noexcept {
  return rc == CURLE_OUT_OF_MEMORY && facts.response_started && !facts.headers_complete;
}

/// An HTTP/2 stream or connection ended with the error code PROTOCOL_ERROR: nghttp2 found the response malformed
/// (two different `content-length` values, one that is not a number, a `:status` that is not three digits, a
/// connection-specific header) and reset the stream itself, or the server reset it calling the request malformed.
/// Either way the same request gets the same end. libcurl names the code in its text: 7.88 "HTTP/2 stream 1 was
/// not closed cleanly: PROTOCOL_ERROR (err 1)", 8.x "... (error 0x1 PROTOCOL_ERROR)".
[[nodiscard]] bool is_http2_protocol_error(CURLcode rc, std::string_view curl_text) noexcept {
  return (rc == CURLE_HTTP2_STREAM || rc == CURLE_HTTP2) && curl_text.find("PROTOCOL_ERROR") != std::string_view::npos;
}

} // namespace

std::error_code map_curl_result(int curl_code, transfer_facts const& facts, std::string_view curl_text) noexcept {
  auto const rc = static_cast<CURLcode>(curl_code);
  if (rc == CURLE_OK) {
    // A status line (or an interim 1xx response) and then the end of the connection: libcurl 7.88 may call that a
    // complete response.
    bool const cut = (facts.response_started && !facts.headers_complete) || facts.interim_only;
    return cut ? make_error_code(errc::connection_reset) : std::error_code();
  }
  if (facts.body_too_large || facts.headers_too_large || is_header_line_too_long(rc, facts)) {
    return make_error_code(errc::response_too_large);
  }
  if (facts.invalid_length || facts.refused_status != 0 || is_malformed_chunking(rc, curl_text) ||
      is_http2_protocol_error(rc, curl_text)) {
    return make_error_code(errc::protocol_error);
  }
  if (facts.resend_refused) {
    return make_error_code(errc::connection_reset); // the first copy went out on a connection that then closed
  }
  if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_COULDNT_CONNECT) {
    // A connect that failed after the request went out is libcurl's resend: the first copy may have been read.
    return make_error_code(facts.request_started ? errc::connection_reset : errc::connect_failed);
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    if (!facts.request_started) {
      return make_error_code(errc::connect_failed); // connect (or TLS handshake) timeout: nothing was sent
    }
    bool const answering = facts.response_started || facts.response_bytes_arrived;
    return make_error_code(answering ? errc::response_timeout : errc::attempt_timeout);
  }
  if (is_cut_short(rc)) {
    // Cut before the request went out (e.g. during the TLS handshake) means it was never sent.
    return make_error_code(facts.request_started ? errc::connection_reset : errc::connect_failed);
  }
  if (is_tls_failure(rc)) {
    return make_error_code(errc::tls_failed);
  }
  if (rc == CURLE_WEIRD_SERVER_REPLY || rc == CURLE_BAD_CONTENT_ENCODING || rc == CURLE_UNSUPPORTED_PROTOCOL) {
    return make_error_code(errc::protocol_error);
  }
  return make_error_code(errc::transport_failed);
}

std::string describe_curl_result(int curl_code, transfer_facts const& facts, std::string_view curl_text) {
  auto const rc = static_cast<CURLcode>(curl_code);
  std::string out;
  if (facts.headers_too_large) {
    out = "response headers over " + std::to_string(max_response_header_bytes / 1024) + " KiB";
  } else if (is_header_line_too_long(rc, facts)) {
    out = "a response header line over libcurl's " + std::to_string(CURL_MAX_HTTP_HEADER / 1024) + " KiB limit";
  } else if (facts.body_too_large) {
    out = "response body over transport_options::max_response_bytes";
  } else if (facts.invalid_length) {
    out = "a Content-Length that is not one length (two different values, or not a decimal number)";
  } else if (facts.refused_status == 101) {
    out = "a 101 Switching Protocols response to a request that asked for no upgrade";
  } else if (facts.refused_status != 0) {
    out = "a status code past 599 (" + std::to_string(facts.refused_status) + "), which HTTP does not define";
  } else if (facts.resend_refused) {
    if (facts.response_started) {
      out = "the HTTP/2 stream was refused after its response had begun: not sent again";
    } else if (facts.resent) {
      out = "sent twice in this attempt, and twice the connection closed or the HTTP/2 stream was refused before "
            "any response byte: not sent a third time";
    } else {
      out = "the connection closed, or the HTTP/2 stream was refused, before any response byte, and a request "
            "without an idempotency key is not sent again";
    }
  } else if (facts.request_started && (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)) {
    out = "the connection closed, or the HTTP/2 stream was refused, before any response byte, and the new "
          "connection for sending again failed";
  } else if (is_malformed_chunking(rc, curl_text)) {
    out = "a chunked body that is not valid chunked coding";
  } else if (is_http2_protocol_error(rc, curl_text)) {
    out = "an HTTP/2 protocol error: a malformed response, or a request the server called malformed";
  } else if (rc == CURLE_OK || rc == CURLE_PARTIAL_FILE || rc == CURLE_GOT_NOTHING) {
    // libcurl's own words for these ("Server returned nothing (no headers, no data)" after a body's first bytes
    // over HTTP/2) go by its state, not by what arrived: the facts say where the response ended.
    out = facts.interim_only       ? "connection closed after an interim 1xx response, before the final one"
          : facts.headers_complete ? "connection closed before the end of the response body"
          : facts.response_started ? "connection closed inside the response headers"
                                   : "connection closed before any response byte";
  } else {
    out = curl_easy_strerror(rc);
  }
  // A transfer the transport's own callbacks ended (a size cap, a Content-Length, an upgrade, a resend) gets libcurl's
  // words for the callback's refusal ("Failed writing header"), which say nothing the message did not.
  bool const refused_here = facts.body_too_large || facts.headers_too_large || facts.invalid_length ||
                            facts.refused_status != 0 || facts.resend_refused;
  if (!curl_text.empty() && rc != CURLE_OK && !refused_here) {
    // libcurl's text may quote what the server sent (a certificate's subject name): escaped here, once, for every
    // message built from it. Its buffer holds CURL_ERROR_SIZE bytes, so nothing libcurl wrote is cut.
    out.append(" (libcurl: ");
    append_printable(out, curl_text, CURL_ERROR_SIZE);
    out.append(")");
  }
  return out;
}

} // namespace wandura::detail
