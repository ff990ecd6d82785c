// Error codes, error conditions and the exception type of the Wandura SDK.
//
// Every failure the SDK reports is a std::error_code. Codes of the `wandura::errc` enum belong to
// `wandura::error_category()`; cancellation is reported as `asio::error::operation_aborted` (Asio's own code), so
// that code written against Asio recognises it. Codes compare equal to the broad `wandura::condition`s below, so a
// caller can ask "is this retryable?" or "was this a timeout?" without listing codes:
//
//     catch (wandura::error const& e) {
//       if (e.code() == wandura::condition::rate_limited) { ... }
//     }
//
// Thread safety: everything here is immutable after construction and safe to use from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace wandura {

/// Failures of the SDK. The numeric values are stable and never reused.
enum class errc {
  // --- transport: one HTTP attempt -------------------------------------------------------------------------
  /// The host name could not be resolved or no connection could be made (refused, unreachable, connect timeout, or
  /// the system would not let the transport watch the new connection's socket or the name lookup's: out of memory,
  /// or past `fs.epoll.max_user_watches`). The request was never sent, so retrying it is always safe, even for writes
  /// without an idempotency key.
  connect_failed = 1,
  /// The per-attempt timeout fired before any byte of a response arrived. The request may have been executed.
  attempt_timeout = 2,
  /// The per-attempt timeout fired after the first byte of the response arrived: in its status line (a server that
  /// sends it a byte at a time included), its headers or its body.
  response_timeout = 3,
  /// The connection was reset or closed by the peer after the request was (at least partly) sent: mid-request,
  /// before the response, or mid-body, including a response cut before its end (a status line and then the close,
  /// a body shorter than its Content-Length, a chunked body without its last chunk) and an HTTP/2 session or stream
  /// failure. An incomplete response: the request may have been executed.
  connection_reset = 4,
  /// TLS handshake or certificate verification failed (untrusted certificate, wrong host name, protocol error).
  tls_failed = 5,
  /// The response body exceeded the configured cap (`transport_options::max_response_bytes`, default 1 MiB), or
  /// its header lines exceeded 256 KiB, interim 1xx responses' included (one header line: 100 KiB). The same answer
  /// would come back: final.
  response_too_large = 6,
  /// The peer sent something that is not valid HTTP: a status code outside 100-599, a `101 Switching Protocols`
  /// no request asked for, a Content-Length that is not one length, a body that breaks its chunked coding, broken
  /// framing. The same answer would come back: final. (From Redis, in the fleet layer: not valid RESP, or a reply
  /// no command waits for.)
  protocol_error = 7,
  /// Any other transport failure (out of memory in libcurl, an unsupported URL, ...). The message says which.
  transport_failed = 8,

  // --- resilience: the retry loop around the attempts ----------------------------------------------------
  /// The call's total deadline passed, or the next retry would have ended past it.
  deadline_exceeded = 20,
  /// The client's retry budget (10 % of the requests of the current minute's window, at least 10) refused a retry.
  budget_exhausted = 21,
  /// A caller-chosen idempotency key is not 1-200 visible ASCII characters (0x21-0x7E). docs/protocol.md §1 code 90010.
  invalid_idempotency_key = 22,
  /// The server answered with an HTTP status that is final for this call: the call's retry policy does not retry
  /// it (400, 404, 409 `idempotency_conflict`, 501, ...; see `wandura::error::http_status`). Sending the same
  /// request again is not expected to help.
  http_error = 23,
  /// The server refused for rate (HTTP 429) and the call stopped with no retry left, or the client held the call
  /// back, nothing sent, until past its deadline (a 429's hold-off on its counter, or the counter's pace). A 429
  /// whose own wait would end past the deadline ends the call as `deadline_exceeded`, the 429 as its status.
  rate_limited = 24,
  /// The server answered with a status the call's retry policy retries (500, 502, 503 and a 409
  /// `idempotency_in_progress`; STANDARD also 408, 425, 504 and the retryable numeric codes such as 50200), and no
  /// retry was left: the policy's retries were used (or are off), or the request was a write without an
  /// idempotency key. The same request may succeed later; `wandura::error::http_status` says which status. (A 429
  /// is `rate_limited`; retries stopped by the deadline or the retry budget are `deadline_exceeded` and
  /// `budget_exhausted`.)
  unavailable = 25,

  // --- playback: typed API ----------------------------------------------------------------------------------
  /// A response body is not the JSON the API documents (malformed, truncated, wrong types, numbers out of range);
  /// also the `error` of one item of a ticket batch that could not be read (`unreadable_item_code`).
  invalid_response = 40,
  /// An argument is outside what the API accepts (more than 3 episodes, an empty film_ref, ...); nothing was sent.
  invalid_argument = 41,
  /// The API key was missing or unknown (HTTP 401 `unauthorized`).
  unauthorized = 42,
  // 43 was `viewer_limited`: a viewer over the per-viewer limit is an item outcome (`item_outcome::viewer_limited`),
  // never an error of the call.
};

/// Broad classes of failures that `errc` values, Asio and system codes compare equal to.
enum class condition {
  /// Worth retrying later: `connect_failed`, `attempt_timeout`, `response_timeout`, `connection_reset`,
  /// `rate_limited` (429) and `unavailable` (a status the policy retries, 5xx by default); and the system and Asio
  /// codes for a connection refused, reset or aborted, an unreachable network or host, a timeout and an early end
  /// of file (`std::errc::connection_reset`, `asio::error::connection_reset`, `asio::error::eof`, ...).
  retryable = 1,
  /// A timeout: attempt, response or the call's deadline (and `std::errc::timed_out` from the system or Asio).
  timeout = 2,
  /// `errc::rate_limited`: the server refused for rate (HTTP 429) and the call stopped, or the client held the call
  /// back until past its deadline.
  rate_limited = 3,
  /// The client's retry budget refused a retry.
  budget_exhausted = 4,
};

/// The category of `wandura::errc`. Its name is "wandura".
[[nodiscard]] std::error_category const& error_category() noexcept;
/// The category of `wandura::condition`. Its name is "wandura.condition".
[[nodiscard]] std::error_category const& condition_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}
[[nodiscard]] inline std::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), condition_category()};
}

/// The short stable name of a code, e.g. "connect_failed"; "unknown" for values outside the enum.
[[nodiscard]] std::string_view to_string(errc e) noexcept;

/// What the server said about a failed call, and how many attempts were made. Carried by `wandura::error`. A call
/// its caller left before it ended (cancelled, or its deadline passed while an attempt or a retry wait went on)
/// carries the attempts so far and the last response's status only: its `error_code`, `reason`, `request_id` and
/// `server_message` are empty. Every member has a default, so that an initializer naming only some of them (designated
/// or not, the last one added included) compiles without a -Wmissing-field-initializers warning.
struct error_info {
  /// HTTP status of the last response; 0 when none was read whole: none arrived, or the transport gave it up
  /// (`response_too_large`, `response_timeout`, `connection_reset`, `protocol_error`), whatever its status line said.
  int http_status = 0;
  std::string error_code{}; ///< The server's `error_code` string (or numeric code as text); empty when none.
  std::string reason{};     ///< The server's `reason`, e.g. "prefetch_shed"; empty when none.
  std::string request_id{}; ///< The server's `request_id` (body or `X-Request-Id`); empty when none.
  int attempts = 0;         ///< Attempts made, the first one included; 0 when nothing was sent.
  /// The server's text for humans (the error body's `error`, e.g. "Unknown film."), as sent: neither escaped nor
  /// bounded; a program that shows it quotes it through its own escaping. Empty when none.
  std::string server_message{};
};

/// The exception every throwing SDK call uses. It carries, besides the error code, what the server said (when it
/// answered) and how many attempts were made, so that a log line needs nothing else.
///
/// `what()` says where and why the call stopped, for example
/// "issue_tickets: retry budget exhausted after 2 attempts: HTTP 503 code=service_unavailable". It is one line:
/// text that a server or Redis chose (an error code, an error reply) is quoted in it escaped and bounded, while
/// `info()` keeps that text as it was sent.
///
/// @par Thread safety
/// Immutable after construction; safe to read from any thread.
class error : public std::system_error {
public:
  error(std::error_code code, std::string const& message, error_info info = {});

  [[nodiscard]] int http_status() const noexcept { return info_.http_status; }
  [[nodiscard]] std::string const& server_error_code() const noexcept { return info_.error_code; }
  [[nodiscard]] std::string const& reason() const noexcept { return info_.reason; }
  [[nodiscard]] std::string const& request_id() const noexcept { return info_.request_id; }
  [[nodiscard]] int attempts() const noexcept { return info_.attempts; }
  [[nodiscard]] std::string const& server_message() const noexcept { return info_.server_message; }
  [[nodiscard]] error_info const& info() const noexcept { return info_; }
  /// The message given at construction, exactly (unlike `std::system_error`, the code's message is not appended:
  /// SDK messages already name the last real error).
  [[nodiscard]] char const* what() const noexcept override { return message_.c_str(); }

private:
  std::string message_;
  error_info info_;
};

} // namespace wandura

template <> struct std::is_error_code_enum<wandura::errc> : std::true_type {};
template <> struct std::is_error_condition_enum<wandura::condition> : std::true_type {};
