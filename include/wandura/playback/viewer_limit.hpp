// wandura::viewer_limit: the per-viewer ticket limit a client enforces before anything is sent (docs/protocol.md §2:
// anyone who can drive *your* ticket endpoint can spend your organisation's limit, so limit tickets per viewer on
// your side).
//
// A client takes one ticket of the viewer's allowance per episode it is about to send (plays first) and gives back
// the tickets the server certainly did not issue: episodes never sent, and those answered without a fresh ticket
// (reused, refused, shed). A ticket granted fresh stays taken, and so does one the server may have issued without
// the client reading it: its request was cancelled or left at its deadline in flight, or got no answer for it (a
// timeout, a reset, a 2xx that could not be read). Otherwise cancelling calls once their requests are out would
// spend the organisation's limit without bound. It takes it once per request: calls that join an identical
// request in flight take none. The default is a process-local token bucket per viewer, built by the client from
// `client_options::viewer_tickets_per_minute`; a fleet of processes plugs one limit shared through Redis
// (`wandura::fleet::configure`).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <asio/awaitable.hpp>

namespace wandura {

/// A per-viewer ticket allowance, taken before sending and given back when unused.
///
/// @par Errors
/// A limit whose backing service is away decides from local state rather than fail (degrade, never block).
/// `acquire` throws only `wandura::error` with `asio::error::operation_aborted` when the awaiting coroutine is
/// cancelled (the client's call then fails the same way, having sent nothing), and should do so promptly: a
/// cancelled call that is its request's only caller ends with its request (client.hpp, Cancellation), the limit's
/// decision included. Anything else it throws fails the
/// client's call as thrown (an `async_` form of the client completes with the exception's code, `std::errc::io_error`
/// for one that is not a `std::system_error`), nothing sent: a limit that cannot decide is not taken as allowing (it
/// would spend the organisation's limit without bound) nor as refusing (every viewer would be told to wait).
/// @par Thread safety
/// Implementations must be safe to call from many threads at once, and from coroutines on any executor.
class viewer_limit {
public:
  /// Which of a limit's accounts tickets were taken from. A limit held in one place takes every ticket from
  /// `primary`. A limit held by a service out of process (the fleet's, in Redis) takes from `primary` when the
  /// service decided, and from `fallback`, the process's own account, when it decided locally because the service
  /// was slow, down or failing. `release` is given the account back, so tickets return where they were taken
  /// whatever the service's state is by then.
  enum class account : std::uint8_t { primary, fallback };

  /// What `acquire` decided.
  struct decision {
    /// Whether every ticket asked for was taken.
    bool allowed = false;
    /// When refused: how long until the same request would be allowed (whole milliseconds, rounded up); for a
    /// request larger than the whole allowance, the time to refill it completely. Zero when allowed. Not negative
    /// (the client reads a negative one as zero).
    std::chrono::milliseconds retry_after{0};
    /// Where the tickets were taken from (meaningful when allowed); given back to `release` with them.
    account taken_from = account::primary;
  };

  viewer_limit() = default;
  viewer_limit(viewer_limit const&) = delete;
  viewer_limit& operator=(viewer_limit const&) = delete;
  virtual ~viewer_limit() = default;

  /// Takes `tickets` from the allowance of `viewer_ref`, all or nothing (a batch's episodes are either all taken
  /// or none). 0 tickets are always allowed.
  /// The client's call waits for the decision, its deadline included: a call whose deadline passes meanwhile ends
  /// with `errc::deadline_exceeded` once `acquire` returns, so a limit should decide within a bound of its own (the
  /// fleet's decides from local state once its Redis timeout passes; the client's own decides at once).
  /// @param viewer_ref who is counted: the batch's viewer_ref, or `device:<union_info>` when it has none (a
  ///        viewer_ref of `make_viewer_ref`'s form never starts so); owned by the operation.
  /// @param tickets how many tickets (episodes) to take.
  [[nodiscard]] virtual asio::awaitable<decision> acquire(std::string viewer_ref, std::uint32_t tickets) = 0;

  /// Gives back `tickets` taken by `acquire` and not used, to the account they were taken from; the allowance never
  /// exceeds its capacity. Unknown viewers are ignored. The client gives back the tickets of each account with a
  /// call of its own.
  ///
  /// Starts the give-back and returns at once without throwing: the client calls it when a call ends on any exit,
  /// destructors and cancellation included, where nothing can be awaited. A limit out of process completes it in
  /// the background (in order with the `acquire`s started after it from the same process); a local one at once.
  /// @param viewer_ref as given to `acquire`; copied if needed. @param tickets how many to give back.
  /// @param taken_from the `decision::taken_from` of the `acquire`s that took them.
  virtual void release(std::string_view viewer_ref, std::uint32_t tickets, account taken_from) noexcept = 0;
};

} // namespace wandura
