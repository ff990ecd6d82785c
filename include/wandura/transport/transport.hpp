// wandura::transport: HTTP attempts over one libcurl multi handle driven by Asio.
//
// One `CURLM` per transport keeps the connection pool, TLS session cache, DNS cache and HTTP/2 connections that
// every request of a client shares. Asio watches the sockets libcurl asks about (`CURLMOPT_SOCKETFUNCTION`) and
// runs its timer (`CURLMOPT_TIMERFUNCTION`); every libcurl call happens on one strand, so the `io_context` may be
// run by any number of threads (docs/adr/0002-transport-event-loop.md).
//
// No retries happen here: one call is one attempt. The retry loop (resilience layer) sits above `http_sender`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>

#include "wandura/transport/detail/send_op.hpp"
#include "wandura/transport/http_request.hpp"
#include "wandura/transport/http_response.hpp"
#include "wandura/transport/http_sender.hpp"
#include "wandura/transport/transport_options.hpp"

namespace wandura {

namespace detail {
struct transport_access; // the transport's own tests reach its internals through this (src/transport)
}

/// Counters of one transport, for tests and metrics. Each field is read atomically on its own: the two totals are
/// counted as events happen; the gauges (`sockets_open`, `requests_in_flight`, `requests_queued`) are copied from
/// the transport's strand-only state on its strand whenever it changes, before a completion is handed out;
/// `pooled_transfers` is read under the pool's lock.
struct transport_stats {
  /// Connections libcurl opened (sum of CURLINFO_NUM_CONNECTS over the requests handed to libcurl), counted once
  /// per request when it leaves libcurl, however it ends: a response, an error, its attempt timeout, a
  /// cancellation or the transport's destruction. With keep-alive working, far below `requests_completed`.
  std::uint64_t connections_opened = 0;
  /// Sockets currently open (connected, connecting or idle in the pool).
  std::uint64_t sockets_open = 0;
  /// Requests handed to libcurl and not finished yet.
  std::uint64_t requests_in_flight = 0;
  /// Requests waiting for a slot because `max_in_flight` were running.
  std::uint64_t requests_queued = 0;
  /// Requests finished, whatever the outcome (responses, transport errors, cancellations).
  std::uint64_t requests_completed = 0;
  /// Pooled per-request states (each with its libcurl easy handle); grows to the peak concurrency, then reused.
  std::uint64_t pooled_transfers = 0;
};

/// The libcurl-based `http_sender`. Sends single attempts; never retries (one case of a stale pooled connection
/// aside, see `async_send`'s "Retries and idempotency").
///
/// @par Thread safety
/// All member functions may be called from any thread, concurrently. Completions are posted to the completion
/// handler's associated executor (the awaiting coroutine's executor), never run inline inside libcurl. An
/// `io_context` that one thread runs is best made so, `asio::io_context(1)` (concurrency hint 1): Asio then queues
/// the handlers that thread posts (each completion, each of the loop's own steps) without taking its lock.
///
/// @par Lifetime
/// Destroying the transport aborts the requests still in flight: each completes with
/// `asio::error::operation_aborted` (if the io_context still runs). Idle keep-alive connections are closed.
/// The io_context must outlive the transport's pending work.
///
/// @par Signals
/// The transport sets `CURLOPT_NOSIGNAL` (it runs on any thread of the io_context), so libcurl does not ignore
/// `SIGPIPE` around its writes. Writes to a peer that closed the connection are made with `MSG_NOSIGNAL` where
/// libcurl can, but TLS writes and some platforms can still raise `SIGPIPE`, whose default action ends the
/// process: ignore it in the application (`std::signal(SIGPIPE, SIG_IGN)` at start), as libcurl's documentation
/// asks of every multi-threaded program; the write then fails with `EPIPE` and the request with
/// `connection_reset`. The project's own programs do so.
class transport final : public http_sender {
public:
  /// @param ex where the transport runs libcurl (through a strand of its own) and where handlers without an
  ///        associated executor complete. The io_context behind it may be run by several threads.
  /// @param options pool limits and TLS settings, copied.
  /// @throws std::system_error with `errc::transport_failed` if libcurl cannot be initialised; `wandura::error`
  ///         with `errc::invalid_argument` if `options.user_agent` holds a control byte other than HTAB (0x00-0x08,
  ///         0x0A-0x1F) or DEL (0x7F), the message naming the byte and its offset, or if `options.ca_bundle` is not
  ///         empty and names no regular file that can be opened and holds at least one PEM certificate (read now;
  ///         libcurl reads it again for its TLS connections), the message naming the path and why.
  explicit transport(asio::any_io_executor ex, transport_options options = {});
  ~transport() override;

  transport(transport const&) = delete;
  transport& operator=(transport const&) = delete;

  /// Sends `request` once and reads the whole response.
  ///
  /// On the wire: one HTTP/1.1 or HTTP/2 request on a pooled keep-alive connection (a new one when none is
  /// free), no redirects followed, `Expect: 100-continue` never used.
  ///
  /// Completes with `(error_code{}, response)` for any HTTP status (a 503 is a response, not an error), or with
  /// one of:
  /// - `errc::connect_failed`: name not resolved, connection refused, connect timeout; nothing was sent.
  /// - `errc::attempt_timeout`: `options.timeout` passed before any response byte arrived.
  /// - `errc::response_timeout`: `options.timeout` passed mid-response (from the status line's first byte on).
  /// - `errc::connection_reset`: after the request was (partly) sent, the connection was reset or closed, or the
  ///   response was cut before its end (a status line and then the close, a body shorter than its
  ///   `Content-Length`, a chunked body without its last chunk), or HTTP/2 failed on the stream or connection
  ///   (`CURLE_HTTP2`, `CURLE_HTTP2_STREAM`; with the error code PROTOCOL_ERROR it is `protocol_error`, below). An
  ///   incomplete response: worth another attempt when the request is safe to resend. Before the request went out,
  ///   the same failures are `connect_failed`.
  /// - `errc::tls_failed`: handshake or certificate verification failed.
  /// - `errc::response_too_large`: the body exceeded `transport_options::max_response_bytes`, or the response's
  ///   header lines exceeded 256 KiB, counted over every header block, interim (1xx) responses' included (one
  ///   header line: libcurl's 100 KiB). Final: the same answer would come back. Over HTTP/2, libcurl 7.88 holds
  ///   one header block to 128 KiB itself and fails the connection past that, before the transport sees a line:
  ///   `connection_reset`, as any broken HTTP/2 connection.
  /// - `errc::protocol_error`: the server's reply is not valid HTTP, including a `Content-Length` that is not one
  ///   length (RFC 9110 §8.6): its value must be `1*DIGIT` between optional white space, or a comma-separated list
  ///   of that one number (`96, 96`); a sign, white space inside a number, an empty value or list element, different
  ///   numbers in a list or on two header lines, or a number past 2^63 - 1 is refused before the body is read. The
  ///   `Content-Length` of a 1xx, 204 or 304 response frames nothing (RFC 9112 §6.3) and is not checked. Also a
  ///   chunked body that breaks the chunked coding (RFC 9112 §7.1): a chunk size that is not hexadecimal or is over
  ///   64 bits, a chunk not followed by CR LF. A status code outside 100-599, or a `101 Switching Protocols` (no
  ///   request asks for an upgrade). Over HTTP/2, a stream or connection ended with the error code PROTOCOL_ERROR
  ///   (nghttp2 refusing a malformed response: two `content-length`s, a bad `:status`, a connection-specific
  ///   header; or the server calling the request malformed). Final: the same answer would come back.
  /// - `errc::invalid_argument`: a request header name is not an HTTP token, or a value holds a byte RFC 9110 does
  ///   not allow in a field value: a control byte other than HTAB (0x00-0x08, 0x0A-0x1F; CR and LF would end the
  ///   header line and let the value add headers of its own) or DEL (0x7F). Visible ASCII, SP, HTAB and bytes
  ///   0x80-0xFF pass. Or the request has a `Content-Length` or `Transfer-Encoding` header (any case): the transport
  ///   frames the body itself (RFC 9112 §6). The message names the header, the byte (`\xHH`) and its offset, never
  ///   the value; nothing was sent. Or `request.url` does not start with `http://` or `https://` (another scheme,
  ///   or none): nothing was sent.
  /// - `errc::transport_failed`: anything else (a URL libcurl cannot parse, out of memory); `send()`'s message names
  ///   the cause.
  /// - `asio::error::operation_aborted`: cancelled, or the transport was destroyed.
  ///
  /// @param request must stay alive and unchanged until the operation completes (the body is sent from it).
  /// @param options the attempt's timeouts in milliseconds; a `timeout` of zero or less means none, and so does
  ///        one that would end past the clock's range (`milliseconds::max()`); zero `connect_timeout` means
  ///        `transport_options::default_connect_timeout`.
  /// @param token completion token with signature `void(std::error_code, http_response)`.
  ///
  /// @par Cancellation
  /// Supports terminal, partial and total cancellation through the handler's associated cancellation slot, in
  /// every phase (queued, resolving, connecting, sending, receiving): the easy handle is removed from libcurl on
  /// the strand and the operation completes with `asio::error::operation_aborted`. An HTTP/1.1 connection it used
  /// is closed, not reused; on HTTP/2 its stream is reset at once, by closing the connection when no other stream
  /// uses it (the same when `options.timeout` passes). The removal is always posted to the strand, so a
  /// signal emitted from any thread, or from code running inside a libcurl callback, is safe.
  /// @par Retries and idempotency
  /// No retries here, with one exception that HTTP clients make for pooled connections: when the reused keep-alive
  /// connection a request went out on closes before any byte of the response (the server closed it as idle while
  /// the request was on its way, or an HTTP/2 server refused the stream), libcurl sends the request once more on
  /// another connection, within the same attempt and its timeout (once, and only before any byte of a response:
  /// libcurl itself would try up to five times, each outside the retry budget). The transport lets it do so only
  /// for a replayable
  /// request: a GET, or one carrying an `Idempotency-Key` header (the server answers a repeat with the first
  /// result). Any other request then fails with `errc::connection_reset`: the server may have read it, and it is
  /// never put on the wire twice. `connect_failed` guarantees the request was not sent (always safe to retry,
  /// docs/protocol.md §1); a connect that fails for that second copy is `connection_reset`. Every other error may
  /// follow a request the server executed. A pooled HTTP/1.1 connection that holds bytes before the request goes
  /// out (a stray or repeated response, a 408 sent before closing it as idle) answers nothing asked: it is given
  /// up unused, and the request, whatever it is, goes on a new connection (nothing of it was sent), so that such
  /// bytes are never read as its response. Idle connections are checked once for each batch of requests the
  /// transport starts together: bytes that arrive while that batch is being sent are not looked for (and bytes
  /// that arrive after a request went out cannot be told from its answer).
  template <class CompletionToken>
  auto async_send(http_request const& request, attempt_options options, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, http_response)>(
        [impl = impl_](auto handler, http_request const* req, attempt_options const& opts) {
          using handler_type = std::decay_t<decltype(handler)>;
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto* op = detail::send_op<handler_type>::create(std::move(handler), detail::transport_executor(*impl));
          detail::start_send(*impl, *req, opts, op, slot);
        },
        token, &request, options);
  }

  /// `async_send` as a coroutine that throws: the response (any HTTP status), or `wandura::error` carrying the
  /// transport error code (`operation_aborted` when cancelled) and a message that names the request (method, path
  /// and host, as `call_result::target` does: never the query, fragment or user information, which may hold
  /// credentials), what happened and libcurl's own error text,
  /// escaped as in `attempt_result::detail`. Same lifetime rules; `options` is copied at the call, so a temporary is
  /// fine even when the awaitable is co_spawn'ed later. Cancellation as `async_send`'s, for what reaches it: like any
  /// Asio coroutine, it is cancelled through the awaiting coroutine's cancellation state, which lets only terminal
  /// cancellation through unless that coroutine widens it:
  /// `co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation())`.
  [[nodiscard]] asio::awaitable<http_response> send(http_request const& request, attempt_options const& options);

  /// `http_sender`: `async_send` as a coroutine that never throws for transport errors; the error, if any, is in
  /// `attempt_result::error`. Same lifetime and cancellation rules as `send()`.
  [[nodiscard]] asio::awaitable<attempt_result> send_attempt(http_request const& request,
                                                             attempt_options const& options) override;

  /// The executor given at construction.
  [[nodiscard]] asio::any_io_executor get_executor() const override;

  /// A snapshot of the counters; safe from any thread.
  [[nodiscard]] transport_stats stats() const noexcept;

private:
  /// `async_send` completing with `(error_code, http_response, std::string detail)`: what `send()` puts in its
  /// message. On `impl`, shared: `send()`'s coroutine may start after the transport is gone.
  template <class CompletionToken>
  static auto async_send_with_detail(std::shared_ptr<detail::transport_impl> impl, http_request const& request,
                                     attempt_options options, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, http_response, std::string)>(
        [impl = std::move(impl)](auto handler, http_request const* req, attempt_options const& opts) {
          using handler_type = std::decay_t<decltype(handler)>;
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto* op = detail::send_op<handler_type, detail::send_shape::with_detail>::create(
              std::move(handler), detail::transport_executor(*impl));
          detail::start_send(*impl, *req, opts, op, slot);
        },
        token, &request, options);
  }
  static asio::awaitable<http_response> do_send(std::shared_ptr<detail::transport_impl> impl,
                                                http_request const& request, attempt_options options);

  std::shared_ptr<detail::transport_impl> impl_;

  friend struct detail::transport_access;
};

} // namespace wandura
