// The seam between the transport and everything above it: "send one attempt of one request".
//
// `wandura::transport` (libcurl multi on Asio) implements it for real; `wandura::testing::fake_transport`
// implements it for tests, scripting a failure at any step. The retry loop and the playback client only ever see
// this interface.
#pragma once

#include <string>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "wandura/transport/http_request.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura {

/// What one attempt produced: either a transport failure in `error`, or an HTTP response (any status) in
/// `response` with `error` empty. An HTTP error status is a response, not a transport failure.
struct attempt_result {
  std::error_code error;
  http_response response;
  /// With `error`: what happened in words, with libcurl's own error text when it gave one (e.g. "SSL certificate
  /// problem: self-signed certificate"); may be empty. Never holds a header value (an API key). Empty otherwise.
  /// One line of printable ASCII: libcurl's text, which may quote the server (a certificate's subject name), is
  /// written as `detail::printable` writes it (each byte outside 0x20-0x7E as `\xHH`, at most 256 bytes of it), so
  /// that it can go into a log line or a message as it is. The retry loop takes a sender's words through the same
  /// escaping (idempotent for these), so a sender of one's own that returns raw text cannot break a line either.
  std::string detail;
};

/// Sends single attempts. Implementations must be safe to call from any thread and from many coroutines at once.
class http_sender {
public:
  http_sender() = default;
  http_sender(http_sender const&) = delete;
  http_sender& operator=(http_sender const&) = delete;
  virtual ~http_sender() = default;

  /// Sends `request` once, with no retry.
  ///
  /// Completes with `attempt_result::error` set to a `wandura::errc` transport code (connect_failed,
  /// attempt_timeout, response_timeout, connection_reset, tls_failed, response_too_large, protocol_error,
  /// transport_failed, invalid_argument for a request it refuses to send, e.g. a header value holding a control
  /// byte)
  /// or `asio::error::operation_aborted`, and `attempt_result::detail` saying what happened; never throws for those.
  ///
  /// @param request must stay alive and unchanged until the returned awaitable completes.
  /// @param options the attempt's time limits; read when the attempt starts.
  /// @par Cancellation
  /// Terminal cancellation through the awaiting coroutine's cancellation slot aborts the attempt in any phase and
  /// completes with `asio::error::operation_aborted`.
  [[nodiscard]] virtual asio::awaitable<attempt_result> send_attempt(http_request const& request,
                                                                     attempt_options const& options) = 0;

  /// The executor completions are delivered on when the caller has none of its own. A `client` over this sender
  /// takes it as its own executor: the work of calls made from other execution contexts runs there, so it must be
  /// run (a sender whose executor nobody runs leaves such calls waiting until their deadlines).
  [[nodiscard]] virtual asio::any_io_executor get_executor() const = 0;
};

} // namespace wandura
