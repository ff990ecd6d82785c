// One HTTP request as the transport sends it, and the options of one attempt.
//
// Thread safety: plain values; distinct objects may be used from distinct threads.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace wandura {

enum class http_method { get, post };

/// The method as sent, "GET" or "POST" (`attempt_begin::method`). Static storage.
[[nodiscard]] std::string_view method_name(http_method method) noexcept;

/// A request header. Names are sent as given; HTTP treats them case-insensitively. A value of spaces and tabs only
/// is sent as an empty value (HTTP does not count whitespace around a value as part of it).
struct http_header {
  std::string name;
  std::string value;
};

/// An HTTP request. The transport copies nothing out of it after the attempt completes; it must stay alive and
/// unchanged until the awaited `send` completes.
struct http_request {
  http_method method = http_method::get;
  /// Absolute URL starting with `http://` or `https://` (in any case), e.g. "https://api.example/v1/config". Any
  /// other scheme, and a URL without one ("127.0.0.1:8080/v1/config", which libcurl would guess to be plain http),
  /// fails with `errc::invalid_argument` and nothing is sent; a URL libcurl cannot parse, with
  /// `errc::transport_failed`.
  std::string url;
  /// Extra headers (Authorization, Content-Type, Idempotency-Key, ...). The transport adds only
  /// `transport_options::user_agent` (unless a `User-Agent` is here) and what HTTP needs (Host, Content-Length,
  /// Accept-Encoding when compression is on); libcurl's own defaults (`Accept: */*`, a form `Content-Type` on a
  /// POST body, `Expect: 100-continue`) are not sent. `Content-Length` and `Transfer-Encoding` (in any case) are
  /// refused: the transport frames the message from `body` (RFC 9112 §6), and a length of the caller's that
  /// disagrees with it would make the rest of the body a second request. A refused header fails the attempt with
  /// `errc::invalid_argument` and nothing is sent, as does a name that is not an HTTP token or a value with a
  /// control byte (see `transport::async_send`).
  std::vector<http_header> headers;
  /// Request body; sent byte-identical on every attempt. A GET is sent without one: a body set on a GET is not sent.
  std::string body;
};

/// Options of one attempt.
struct attempt_options {
  /// The whole attempt: connecting, sending and receiving the full response. Milliseconds; zero or less: none.
  std::chrono::milliseconds timeout{8000};
  /// Connecting only (DNS, TCP, TLS handshake); bounded by `timeout` too. Milliseconds; zero: not "none" but the
  /// transport's `transport_options::default_connect_timeout`.
  std::chrono::milliseconds connect_timeout{3000};
};

} // namespace wandura
