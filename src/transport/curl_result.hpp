// Internal: how a finished libcurl transfer maps to the SDK's error code and message (docs/adr/0002).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace wandura::detail {

/// Most response header bytes accepted for one request, in bytes: every status and header line of every response,
/// interim (1xx) responses included. Below the 300 KiB libcurl 8 (and Debian's 7.88) enforces over the same lines,
/// which fails as a receive error: the SDK's cap fires first, so that the outcome is a final response_too_large and
/// does not depend on the libcurl version.
inline constexpr std::size_t max_response_header_bytes = std::size_t{256} << 10U;

/// What the transport saw of a transfer, which decides how libcurl's result maps to an error code.
struct transfer_facts {
  bool request_started = false;  ///< libcurl got past connecting (CURLOPT_PREREQFUNCTION ran).
  bool response_started = false; ///< the status line of a response arrived.
  /// Some bytes of a response arrived, perhaps less than its status line (libcurl's first-byte time is set). Read
  /// from libcurl only when the attempt timed out before a status line arrived (`transport_impl`).
  bool response_bytes_arrived = false;
  bool headers_complete = false;  ///< ...and the empty line that ends its header block.
  bool interim_only = false;      ///< ...which was an interim (1xx) response's: no final response has begun.
  bool headers_too_large = false; ///< the header callback refused headers over max_response_header_bytes.
  bool body_too_large = false;    ///< the header or write callback refused the body for the size cap.
  /// The Content-Length is not one valid length (RFC 9110 §8.6): two different values, or a value that is not
  /// `1*DIGIT` (a sign, inner white space, an empty element, a list of different numbers, past 2^63 - 1).
  bool invalid_length = false;
  bool has_length = false; ///< a Content-Length header arrived (its value in `length`)
  std::uint64_t length = 0;
  /// libcurl set out to send the request again on another connection (its connection closed, or an HTTP/2 server
  /// refused the stream), and the transport refused: the request is not replayable, went out twice already, or its
  /// response had begun (easy_setup.cpp, `on_prereq`).
  bool resend_refused = false;
  /// libcurl sent the request a second time within the attempt (the transport allows one such resend).
  bool resent = false;
  /// libcurl's first-byte time, once set, means a response byte arrived: the request went out whole with its
  /// headers on an HTTP/1.x connection. libcurl also sets that time when its upload loop starts sending a body,
  /// which it does for any body over HTTP/2 and for a POST body of 64 KiB or more over HTTP/1.1 (7.88's
  /// MAX_INITIAL_POST_SIZE); HTTP/2 hands a status over with its whole HEADERS frame, so there the header callback
  /// alone says whether a response began. Decided as the request goes out (easy_setup.cpp, `on_prereq`), where the
  /// connection's protocol is known.
  bool first_byte_time_is_response = false;
  /// The status code of a status line the transport refuses, or 0: `101 Switching Protocols`, which no request of
  /// the transport asks for (it offers no upgrade; the connection would speak another protocol from then on), or a
  /// code past 599, which HTTP does not define (RFC 9110 §15: 100-599; libcurl itself refuses codes under 100).
  int refused_status = 0;
};

/// Maps a CURLcode (as int, so that this header needs no curl.h) to the SDK's error code. 0 maps to success,
/// unless the response ended inside its header block (libcurl 7.88 takes "HTTP/1.1 200\r\n" then a close for a
/// complete response). `curl_text` is libcurl's error text (`CURLOPT_ERRORBUFFER`): libcurl 7.88 reports a chunked
/// body that breaks the chunked coding's grammar as CURLE_RECV_ERROR, as it does a failed read, and only its text
/// tells them apart.
[[nodiscard]] std::error_code map_curl_result(int curl_code, transfer_facts const& facts,
                                              std::string_view curl_text = {}) noexcept;

/// The message of a failed transfer: what happened in a few words, then libcurl's own text
/// (`CURLOPT_ERRORBUFFER`, may be empty) or, without one, curl_easy_strerror's; not libcurl's text when the
/// transport's own callbacks ended the transfer (a size cap, a Content-Length, an upgrade, a resend refused), for
/// which libcurl only says that a callback refused. libcurl's text, which may quote
/// the server (a certificate's subject name), goes in through `detail::append_printable`, bounded at
/// CURL_ERROR_SIZE bytes: the message is one line of printable ASCII, and every message built from it
/// (`attempt_result::detail`, `transport::send`'s `what()`, the client's) quotes it as it is.
[[nodiscard]] std::string describe_curl_result(int curl_code, transfer_facts const& facts, std::string_view curl_text);

} // namespace wandura::detail
