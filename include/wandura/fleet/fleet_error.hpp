// Error codes of the fleet layer (shared state through Redis) that `wandura::errc` has no value for.
//
// The fleet layer reports a failure with an existing `wandura::errc` where one fits:
// - `errc::connect_failed`: no connection to Redis (refused, unreachable, connect timeout, or the reconnect
//   backoff after such a failure has not passed yet); the command was not sent.
// - `errc::attempt_timeout`: the command's timeout (`redis_options::command_timeout`) passed without a byte of the
//   reply; `errc::response_timeout` when part of it had come.
// - `errc::connection_reset`: the connection closed or broke before the reply was complete: Redis closed or reset
//   it, or the client dropped it because its `AUTH` or `SELECT` went unanswered within the connect timeout. The
//   command may have run.
// - `errc::protocol_error`: Redis (or whatever listens on its port) sent bytes that are not RESP2.
// - `errc::invalid_argument`: a bad `redis://` URL or argument; nothing was sent.
// - `asio::error::operation_aborted`: cancelled through the awaiting coroutine's cancellation slot, or the client
//   was destroyed.
// and with a `wandura::fleet_errc` below otherwise. Codes compare equal to `wandura::condition::retryable` when
// trying again later can succeed.
//
// Thread safety: everything here is immutable and safe to use from any thread.
#pragma once

#include <string_view>
#include <system_error>

namespace wandura {

/// Failures specific to the fleet layer. The numeric values are stable and never reused.
enum class fleet_errc {
  /// Redis answered the command with an error reply (`-ERR ...`, `-WRONGTYPE ...`, `-NOSCRIPT ...`); the reply's
  /// text is in the `redis_reply` the operation completed with. Not retryable as such.
  server_error = 1,
  /// Redis refused the credentials of the URL (`AUTH`) or the database number (`SELECT`). Not retryable.
  auth_failed = 2,
  /// More commands are waiting for replies on the connection than `redis_options::max_pending` (Redis stalled);
  /// the command was not sent. Retryable.
  overloaded = 3,
  /// Redis answered a script with a reply of a shape the script never returns (wrong type or length).
  unexpected_reply = 4,
};

/// The category of `wandura::fleet_errc`. Its name is "wandura.fleet".
[[nodiscard]] std::error_category const& fleet_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(fleet_errc e) noexcept {
  return {static_cast<int>(e), fleet_category()};
}

/// The short stable name of a code, e.g. "server_error"; "unknown" for values outside the enum.
[[nodiscard]] std::string_view to_string(fleet_errc e) noexcept;

} // namespace wandura

template <> struct std::is_error_code_enum<wandura::fleet_errc> : std::true_type {};
