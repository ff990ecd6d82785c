// Per-attempt tracing hook: one begin and one end event for every HTTP attempt the retry engine sends, carrying
// the attribute names of the OpenTelemetry HTTP client semantic conventions, so that a user can open one client
// span per attempt in the tracer they already run (docs/testing.md, "Telemetry", shows a compiled binding), and one
// event at the end of every logical call.
//
// Who reports a call's end, once per call:
// - `retry_engine::call` reports the end of each call it runs, when it completes, with any outcome (success,
//   failure after retries, deadline, cancellation, a request refused before sending), unless
//   `retry_options::report_call_end` is false;
// - `wandura::client` reports the end of each of its calls itself (its calls may be answered from its ticket cache
//   without an engine call, or span several), and turns the engine's report off, so that a client call ends once.
// A call whose coroutine is destroyed before it completes (its io_context destroyed with the call in flight), or
// that ends with an exception (out of memory), reports no end from the engine; from the client, it ends with
// `asio::error::operation_aborted` (the call was abandoned, and counts as a failure, as in the client's stats).
//
//     struct span_observer final : wandura::attempt_observer {
//       void* on_attempt_begin(wandura::attempt_begin const& a) noexcept override {
//         auto* span = tracer.start(a.method, {{"http.request.method", a.method}, {"url.full", a.url_full},
//                                               {"server.address", a.server_address},
//                                               {"http.request.resend_count", a.resend_count}});
//         return span;
//       }
//       void on_attempt_end(void* span, wandura::attempt_begin const&, wandura::attempt_end const& e) noexcept override
//       {
//         static_cast<my_span*>(span)->end(e.status_code, e.error_type);
//       }
//     };
//
// Thread safety: the engine calls the observer from whichever thread runs the attempt, from many attempts at once;
// an observer must be thread-safe and must not throw. Every string_view in an event lives until the call returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "wandura/transport/http_request.hpp"

namespace wandura {

/// What is known when an attempt starts. Names in comments are the OpenTelemetry attribute names.
struct attempt_begin {
  std::string_view operation;      ///< The logical call, e.g. "issue_tickets", "start_episode", "get_config"
                                   ///< (`wandura.operation`); for a request shared by calls joined to it (the
                                   ///< client's coalescing), the operation of the call that started it.
  std::string_view method;         ///< "GET" or "POST" (`http.request.method`).
  std::string_view url_full;       ///< The URL without its query and fragment (`url.full`); never holds the key;
                                   ///< empty when the URL holds user information (an '@' in its host or,
                                   ///< where no host was read, anywhere before its query).
  std::string_view server_address; ///< The host, without brackets for IPv6 (`server.address`).
  int server_port = 0;             ///< The port, explicit or the scheme's default (`server.port`).
  int resend_count = 0;            ///< 0 for the first attempt of a call, n for its n-th retry
                                   ///< (`http.request.resend_count`).
};

/// How an attempt ended.
struct attempt_end {
  int status_code = 0;                  ///< The response's status; 0 when none arrived (`http.response.status_code`).
  std::string_view error_type;          ///< Empty on success; else the status as text for a status >= 400 ("503"),
                                        ///< or the transport error's short name ("connect_failed") (`error.type`).
                                        ///< A 2xx is a success here even when its body cannot be read: the
                                        ///< exchange succeeded; the call retries it as it would a reset, and its
                                        ///< `call_end::error` says `invalid_response` if none is read.
  std::chrono::nanoseconds duration{0}; ///< From sending to the end of the response or the failure.
};

/// How a logical call ended (all its attempts, retry waits and hold-offs included).
struct call_end {
  std::string_view operation; ///< As in `attempt_begin::operation` ("other" when the engine's call has none).
  /// Empty on success; else what the call failed with: from the engine, `error_code_of` its `call_result` (the code
  /// of `to_error`); from `wandura::client`, the code of the exception the call throws.
  std::error_code error;
  /// From the call's start to its end on the caller's clock (the engine's: from `retry_engine::call` starting, before
  /// its first admission, to its completion).
  std::chrono::nanoseconds duration{0};
};

/// Receives the begin and end of every attempt, and the end of every logical call (once per call: see the file
/// comment for who reports it, and for a binding to a tracer).
class attempt_observer {
public:
  attempt_observer() = default;
  attempt_observer(attempt_observer const&) = delete;
  attempt_observer& operator=(attempt_observer const&) = delete;
  virtual ~attempt_observer() = default;
  /// An attempt is about to be sent. @returns a context handed back to `on_attempt_end` (e.g. a span), or null.
  virtual void* on_attempt_begin(attempt_begin const& attempt) noexcept = 0;
  /// The attempt `attempt`, for which `on_attempt_begin` returned `context`, has ended with `end`.
  virtual void on_attempt_end(void* context, attempt_begin const& attempt, attempt_end const& end) noexcept = 0;
  /// A logical call has ended, after the end of its last attempt. Called once per call, from the call itself,
  /// just before it completes: for `wandura::client`, a coroutine awaiting the call hears it on its own executor
  /// (a caller on another `io_context` than the client's: there, while the call's attempts are reported on the
  /// client's), an `async_` call, which starts on the client's executor, there. The observer is called from several
  /// threads when those contexts run on several (as a client's context run by several threads does anyway). Does
  /// nothing unless overridden.
  ///
  /// A client call that stops waiting early (cancelled, or its deadline passed while its request was in flight)
  /// ends at once: the attempt it waited for ends after it, as it is aborted, or when it completes for the other
  /// calls joined to the same request. Such an attempt's `on_attempt_end` then follows this call's `on_call_end`.
  virtual void on_call_end(call_end const& call) noexcept { (void)call; }
};

/// The attributes of an attempt of `operation` sending `request`, the `resend_count`-th retry of its call. The
/// views point into `request.url` and `operation`; nothing is allocated.
[[nodiscard]] attempt_begin make_attempt_begin(std::string_view operation, http_request const& request,
                                               int resend_count) noexcept;

/// The OpenTelemetry `error.type` of an attempt that ended with `status` (0: none) and `error`: "" on success
/// (no error and a status of 100-399, or none), the status as three digits for a status of 400-599, else the short
/// name of the error code (`to_string(errc)`, "operation_aborted" for cancellation), or "_OTHER" (another error, or
/// a status outside 100-599 and not 0 without one: `http_client_metrics` counts such an attempt under "_OTHER" too,
/// as it does one with neither a status nor an error, which the SDK never reports: an attempt without a response
/// has an error). Static storage; no allocation.
[[nodiscard]] std::string_view attempt_error_type(int status, std::error_code error) noexcept;

} // namespace wandura
