#include "wandura/resilience/call_result.hpp"

#include <asio/error.hpp>

#include "wandura/detail/printable.hpp"

namespace wandura {

std::string_view to_string(stop_reason r) noexcept {
  switch (r) {
  case stop_reason::success: return "success";
  case stop_reason::not_retryable: return "not_retryable";
  case stop_reason::retries_exhausted: return "retries_exhausted";
  case stop_reason::budget_exhausted: return "budget_exhausted";
  case stop_reason::deadline_exceeded: return "deadline_exceeded";
  case stop_reason::cancelled: return "cancelled";
  case stop_reason::invalid_request: return "invalid_request";
  case stop_reason::shed: return "shed";
  }
  return "unknown";
}

namespace {

/// "HTTP 503 code=50200", "HTTP 404", "HTTP 200: invalid response: <why>", or the transport error's message with
/// the transport's words ("TLS failure: SSL certificate problem: ..."). The server's code goes in printable and
/// bounded, and the detail came so (call_result::detail): a server cannot break the message's one line.
std::string last_error_text(call_result const& r) {
  std::string text;
  if (r.has_response()) {
    text = "HTTP " + std::to_string(r.response.status);
    if (!r.error_code.empty()) {
      text += " code=";
      detail::append_printable(text, r.error_code);
    }
    if (r.error) {
      text += ": " + r.error.message();
    }
  } else if (r.error) {
    text = r.error.message();
  } else {
    return r.attempts == 0 ? "no attempt made" : "no answer yet"; // left with an attempt in flight
  }
  if (r.error && !r.detail.empty()) {
    text += ": " + r.detail; // printable and bounded where it was made (the transport, the retry loop)
  }
  return text;
}

std::string attempts_text(int attempts) {
  return std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts");
}

/// The code a caller matches on when the call stopped for what the server said.
std::error_code code_for_last_error(call_result const& r) {
  if (r.error == errc::invalid_response) {
    return r.error; // a 2xx whose body could not be read
  }
  if (r.has_response()) {
    if (r.response.status == 429) {
      return errc::rate_limited;
    }
    if (r.response.status == 401) {
      return errc::unauthorized;
    }
    // A status the policy retries ends the call only when no retry is left: all used (or retries off), or a write
    // without a key, which carries the note saying so.
    bool const worth_retrying_later =
        r.stopped == stop_reason::retries_exhausted || (r.stopped == stop_reason::not_retryable && !r.note.empty());
    return worth_retrying_later ? errc::unavailable : errc::http_error;
  }
  return r.error ? r.error : std::error_code(errc::transport_failed);
}

} // namespace

std::error_code error_code_of(call_result const& r) noexcept {
  switch (r.stopped) {
  case stop_reason::success: return {};
  case stop_reason::not_retryable:
  case stop_reason::retries_exhausted: return code_for_last_error(r);
  case stop_reason::budget_exhausted: return errc::budget_exhausted;
  case stop_reason::deadline_exceeded: // held back at the admission gate until past it, nothing sent: rate_limited
    return r.attempts == 0 && r.error == errc::rate_limited ? errc::rate_limited : errc::deadline_exceeded;
  case stop_reason::cancelled: return asio::error::operation_aborted;
  case stop_reason::invalid_request: return r.error ? r.error : std::error_code(errc::invalid_argument);
  case stop_reason::shed: return errc::rate_limited;
  }
  return errc::transport_failed; // not reached: every stop reason is named above
}

error to_error(call_result const& r, std::string_view operation) {
  error_info info;
  info.http_status = r.response.status;
  info.error_code = r.error_code;
  info.reason = r.reason;
  info.server_message = r.server_message;
  info.attempts = r.attempts;
  if (!r.request_id.empty()) {
    info.request_id = r.request_id;
  } else if (auto id = r.response.request_id()) {
    info.request_id = std::string(*id);
  }

  std::error_code const code = error_code_of(r);
  std::string why;
  switch (r.stopped) {
  case stop_reason::success:
  case stop_reason::not_retryable:
    why = r.note.empty() ? std::string("failed after ") + attempts_text(r.attempts) : r.note;
    break;
  case stop_reason::retries_exhausted:
    why = r.attempts <= 1 ? std::string("not retried: this call allows no retry")
                          : "retries exhausted after " + attempts_text(r.attempts);
    break;
  case stop_reason::budget_exhausted: why = "retry budget exhausted after " + attempts_text(r.attempts); break;
  case stop_reason::deadline_exceeded:
    why = "deadline of " + std::to_string(r.total_timeout.count()) + " ms reached " +
          (r.attempts == 0 ? std::string("before any attempt") : "after " + attempts_text(r.attempts));
    break;
  case stop_reason::cancelled: why = "cancelled after " + attempts_text(r.attempts); break;
  case stop_reason::invalid_request: why = "not sent"; break;
  case stop_reason::shed: why = "not sent: " + (r.note.empty() ? std::string("shed") : r.note); break;
  }
  std::string message(operation);
  if (!message.empty()) {
    message += ": ";
  }
  message += why;
  bool const had_attempt = r.attempts > 0;
  if (r.stopped == stop_reason::deadline_exceeded && !r.note.empty()) {
    message += " (" + r.note + ")";
  }
  // The last real error, when there is one to report (a cancellation or a deadline before any attempt has none).
  if (r.stopped != stop_reason::cancelled && (had_attempt || r.stopped == stop_reason::invalid_request)) {
    message += ": " + last_error_text(r);
  }
  if (!r.target.empty()) { // which request, last: the message still starts with the operation and why it stopped
    message += " (" + r.target + ")";
  }
  return error(code, message, std::move(info));
}

void throw_if_failed(call_result const& result, std::string_view operation) {
  if (!result.ok()) {
    throw to_error(result, operation);
  }
}

} // namespace wandura
