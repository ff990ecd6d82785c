// wandura::redis_client: an awaitable Redis client on hiredis 0.14's async context, driven by Asio.
//
// Asio waits for readiness on the connection's descriptor (hiredis's addRead/addWrite hooks, the contract of
// hiredis's own event-library adapters) and runs the timers; hiredis reads, writes and parses. The client has no
// thread of its own. RESP2 only and no TLS: the limits of hiredis 0.14 (docs/adr/0008-fleet-shared-state.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/error.hpp>

#include "wandura/fleet/detail/redis_command_op.hpp"
#include "wandura/fleet/fleet_error.hpp"
#include "wandura/fleet/redis_reply.hpp"

namespace wandura {

/// How a `redis_client` connects and how long it waits. `std::chrono::milliseconds::max()` in any duration means
/// no limit (it saturates, never overflows).
struct redis_options {
  /// `redis://[user:password@]host[:port][/db]` (see `redis_url`). `AUTH` and `SELECT` are sent on every connect.
  /// hiredis 0.14 resolves a host name with a blocking `getaddrinfo`: give an address or a name in /etc/hosts.
  std::string url = "redis://127.0.0.1:6379";
  /// How long one command waits for its reply, from its initiation, the wait for a reconnect included (a Redis
  /// host that stops answering, or answers the TCP connect and never the URL's `AUTH`, costs each command this,
  /// not `connect_timeout`). One exception: the first connection the client opens (ready or not in the end) is not
  /// charged to the commands that wait for it (their timeouts start when it is ready), so that a process's first
  /// commands get the same few milliseconds as every other. A command that times out while a reconnect is under way
  /// stays queued: it is sent if the connection becomes ready (its late reply is dropped, or compensated: below). The
  /// shared state is an optimisation: a few milliseconds, then the caller answers from local state.
  std::chrono::milliseconds command_timeout{5};
  /// How long a new connection may take to become ready (TCP connect, and the replies to the URL's `AUTH` and
  /// `SELECT`) before it is dropped as failed; the commands still waiting for it then complete with
  /// `errc::connect_failed` when its TCP connect did not complete (not sent), and with `errc::connection_reset` when
  /// it did (written behind `AUTH` and `SELECT`: Redis may run them). On a reconnect, those have mostly timed out
  /// already: see `command_timeout`.
  std::chrono::milliseconds connect_timeout{200};
  /// The wait before the first reconnect after a failed connect; doubled after each further failure up to
  /// `max_reconnect_backoff`, back to this after a successful connect. A connection that was up and broke is
  /// reconnected at the next command without waiting.
  /// Every wait is at least 1 ms (a zero or negative value means 1 ms), and the longest is never shorter than
  /// the first.
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds max_reconnect_backoff{2000};
  /// The most commands that may wait for replies on the connection (sent, not answered, timed out ones
  /// included). Beyond it a command fails at once with `fleet_errc::overloaded` instead of queueing behind a
  /// stalled server.
  std::size_t max_pending = 1024;
  /// The most bytes the connection holds unread for a reply not received whole yet: the bulk string or line being
  /// read (a line, i.e. a status or error, or the header of a bulk string or an array, at most 1 MiB whatever this
  /// says; the elements of an array already read are not counted). A peer that sends more is not a Redis answering
  /// the fleet's commands: the connection is dropped as `errc::protocol_error` as soon as the bytes read pass the
  /// bound, so that a huge or never-ending reply costs neither memory nor the event loop (the reader searches an
  /// unfinished line again at every read). The elements of arrays are bounded by `max_reply_elements`. The fleet's
  /// largest replies are an `MGET` of one batch (`ticket_batch::max_episodes` tickets, whose bodies came in HTTP
  /// responses of at most `transport_options::max_response_bytes`, 1 MiB by default), a resync page (200 keys with
  /// their `PTTL`) and a store's message on the erase channel (128 keys and expiries): 8 MiB leaves more than twice the
  /// room of the largest at the defaults; raise it with `max_response_bytes`. The erase subscription's connection
  /// applies the same bounds.
  std::size_t max_reply_bytes = std::size_t{8} << 20U;
  /// The most elements the arrays of one reply may declare in all, nested ones included (and never more than
  /// `max_reply_bytes / 3`: the shortest element takes three bytes, an empty status `+` and CR LF). hiredis 0.14
  /// allocates a pointer per declared element as an array's header is read, then an object of ~100 bytes per
  /// element as each arrives, and reads them on the event loop: 2 million empty statuses, 6 MB on the wire, would
  /// cost ~350 MB and a second of the loop. A header that declares more drops the connection as
  /// `errc::protocol_error` as it is read, before anything is allocated for its elements. The fleet's largest array
  /// is a resync page (about 400 elements); raise it for commands of one's own that read longer arrays (`SMEMBERS`
  /// of a large set). The erase subscription's connection applies the same bound.
  std::size_t max_reply_elements = 65536;
};

/// Counters of one client. A snapshot.
struct redis_client_stats {
  std::uint64_t commands = 0;         ///< commands initiated
  std::uint64_t timeouts = 0;         ///< commands that timed out (`attempt_timeout` or `response_timeout`)
  std::uint64_t connects = 0;         ///< connections established (connected, the URL's AUTH and SELECT accepted)
  std::uint64_t connect_failures = 0; ///< connect attempts that failed (refused, timeout, AUTH/SELECT refused)
  std::uint64_t disconnects = 0;      ///< established connections that were lost
  std::size_t pending = 0;            ///< commands sent and not answered yet (timed out ones included)
  std::uint64_t compensations = 0;    ///< compensating commands sent for late replies (`async_command`)
};

class redis_client;

namespace detail {
std::shared_ptr<redis_connection> make_redis_connection(asio::any_io_executor ex, redis_options options);
/// Closes `conn` on its executor (at once when called there, else by a handler posted there that holds it) and lets
/// go of it: the client's destructor, from any thread. Never blocks.
void release_redis_connection(std::shared_ptr<redis_connection> conn) noexcept;
redis_client_stats redis_connection_stats(redis_connection const& conn) noexcept;
/// The options `client` was made with: for a second connection to the same server (a subscription).
redis_options const& options_of(redis_client const& client) noexcept;
} // namespace detail

/// One pipelined connection to Redis, (re)connected on demand.
///
/// Commands are pipelined on one connection in the order they are initiated; replies are matched in order. The
/// connection is opened by the first command, reopened by the next command after it broke, and after a failed
/// connect not tried again before the backoff has passed (those commands fail at once with
/// `errc::connect_failed`, so a Redis that is down costs nothing).
///
/// @par Thread safety
/// As an Asio I/O object: distinct objects are safe, a shared object is not. Initiate commands from the
/// executor given at construction (a single-threaded io_context, or a strand); completions are posted to each
/// handler's associated executor. A coroutine running elsewhere (another thread of a multi-threaded io_context)
/// reaches the client, or a shared-state class built on it, through that executor:
///
///     auto lookup = cache.get(std::move(who)); // named first: GCC 12 may destroy temporaries of a co_await twice
///     auto found = co_await asio::co_spawn(redis_strand, std::move(lookup), asio::use_awaitable);
///
/// @par Lifetime
/// Destroying the client closes the connection; commands still pending complete with
/// `asio::error::operation_aborted` (if the io_context still runs). The destructor may run on any thread, e.g. that of
/// the last owner of a shared-state class while the executor reads replies on another: the connection is only ever
/// read, written and closed on the executor, so it is closed there, at once when the client is destroyed there, else
/// by a handler posted there that keeps what it needs alive (the destroying thread does not wait for it; an
/// io_context destroyed before that handler ran frees the connection with it). While connected, the client keeps a
/// read wait on the socket (hiredis wants to notice a close at once), so `io_context::run()` does not return by
/// itself while a connected client exists: `close()` it, destroy it, or stop the io_context, to end `run()`. An
/// io_context destroyed with commands pending destroys their handlers without running them, as Asio does with its
/// own operations (a coroutine awaiting one is destroyed with its frames, and what they own, this client included).
class redis_client {
public:
  /// @param ex where hiredis is driven and timers run. No connection is made before the first command.
  /// @param options the server URL and the command and connect timeouts; copied.
  /// @throws wandura::error with `errc::invalid_argument` for a bad `options.url` (the message never contains the
  ///         password), a `command_timeout` or `connect_timeout` of 0 or less, or a `max_pending`,
  ///         `max_reply_bytes` or `max_reply_elements` of 0 (each would switch Redis off while looking like an
  ///         outage). Bounds above 0 are taken as given: one below what the fleet's replies need (above) fails
  ///         those replies as `errc::protocol_error`, named in the fleet's WARN line.
  redis_client(asio::any_io_executor ex, redis_options options);
  ~redis_client();
  redis_client(redis_client const&) = delete;
  redis_client& operator=(redis_client const&) = delete;

  /// Sends one command, e.g. `{"SET", key, value, "PX", "60000"}`, and waits for its reply.
  ///
  /// Completes with `(error_code{}, reply)` for every non-error reply (`nil` included), or with:
  /// - `fleet_errc::server_error` and the error reply (its text says which: `NOSCRIPT`, `WRONGTYPE`, ...);
  /// - `errc::attempt_timeout`: no byte of the reply within `redis_options::command_timeout` (a reconnect's wait
  ///   included, see there), and
  ///   `errc::response_timeout` when a part of it arrived, not all (the reply, if it comes later, is dropped, or
  ///   given to the compensation of the overload below; the connection stays while the late reply stays within
  ///   `redis_options::max_reply_bytes`);
  /// - `errc::connect_failed`: no connection (refused, connect timeout, or within the reconnect backoff after one);
  ///   not sent;
  /// - `fleet_errc::auth_failed`: `AUTH` or `SELECT` of the URL refused, with the refusal as the reply (an error
  ///   reply, e.g. `WRONGPASS invalid username-password pair or user is disabled.`); not executed. Commands within
  ///   the reconnect backoff after such a refusal fail the same way, not sent;
  /// - `fleet_errc::overloaded`: `max_pending` commands already wait for replies; not sent;
  /// - `errc::connection_reset`: the connection closed or broke before the whole reply arrived, a connection
  ///   dropped because its `AUTH` or `SELECT` went unanswered within `connect_timeout` included (the command was
  ///   written behind them: Redis may run it when it reads them);
  /// - `errc::protocol_error`: the server sent bytes that are not RESP2, a reply no command waits for, or a reply
  ///   longer than `redis_options::max_reply_bytes` or whose arrays declare more than
  ///   `redis_options::max_reply_elements` elements (or than `max_reply_bytes` could carry)
  ///   (even one to a command that timed out already: a timeout keeps the connection only while the late reply
  ///   stays within the bound). The connection is dropped; commands it carried fail so, later ones connect again;
  /// - `asio::error::shut_down`: the client was closed (`close()`), before the reply came or before the command
  ///   was initiated; not sent in the latter case;
  /// - `asio::error::operation_aborted`: cancelled, or the client was destroyed;
  /// - `errc::invalid_argument`: `args` is empty, or is a command of hiredis's subscribe and monitor modes, which
  ///   this client cannot carry (hiredis 0.14 calls such a command's callback once per message, or never): one
  ///   whose name, ignoring case, is `MONITOR` or `PMONITOR`, `UNSUBSCRIBE` or `PUNSUBSCRIBE`, or `SUBSCRIBE` or
  ///   `PSUBSCRIBE` followed by a channel (a name followed by CR LF and more bytes in the same argument counts as
  ///   that name: hiredis reads the formatted command). Not sent, not counted; the connection serves on. For
  ///   Pub/Sub, use a connection of its own.
  ///
  /// @param args the command and its arguments, binary safe (any bytes, CR/LF and NUL included; empty arguments
  ///        too). Copied into hiredis's output buffer when the operation starts (for `use_awaitable`, when it is
  ///        awaited), so they must live until then.
  /// @param token completion token with signature `void(std::error_code, redis_reply)`.
  ///
  /// @par Cancellation
  /// Terminal, partial and total cancellation through the handler's cancellation slot: the operation completes
  /// with `operation_aborted` at once. A command already written is still executed by Redis; its reply is dropped
  /// (or given to the compensation of the overload below).
  /// @par Retries
  /// None: every failure is reported to the caller, who falls back (the fleet classes) or retries.
  template <class CompletionToken> auto async_command(std::span<std::string_view const> args, CompletionToken&& token) {
    return async_command(args, redis_compensation{}, std::forward<CompletionToken>(token));
  }

  /// As `async_command` above, for a command whose effect must not outlive a caller that stopped waiting: when
  /// the command completed with a timeout (`errc::attempt_timeout`, `errc::response_timeout`) or `operation_aborted`
  /// and its reply comes after all, `compensate` is called once with that reply (an error reply included) and the
  /// command it returns, if not empty, is sent on the same connection, after the late one (Redis runs them in that
  /// order), its reply dropped; `redis_client_stats::compensations` counts them. E.g. a token-bucket take that timed
  /// out, answered "granted" late, gives its tokens back. Nothing is called when no reply comes (the connection broke
  /// or was closed, the client or its execution context went: Redis may or may not have run the command), nor when the
  /// reply came in time. The compensating command runs after the late one, not necessarily right after it: commands
  /// written meanwhile (by this client or by others) may run between them.
  /// @param args as above.
  /// @param compensate called on the client's executor, inside the read of the reply: it must not block. An
  ///        exception it throws is swallowed (nothing is sent). Once the command is answered, lost or compensated,
  ///        it is destroyed from the client's executor (a handler posted there; at once when the execution context
  ///        is shut down), so what it captures may own the client. Its place among `max_pending` passes to the
  ///        compensating command: a command it starts sees the late one still pending.
  /// @param token as above: completes with the same errors, cancelled the same way.
  template <class CompletionToken>
  auto async_command(std::span<std::string_view const> args, redis_compensation compensate, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, redis_reply)>(
        // The connection is held weakly: an awaitable keeps its initiation until the command completes, and a
        // strong hold there would keep the connection, and the command, alive past the client's destruction.
        [weak = std::weak_ptr(conn_), ex = detail::redis_connection_executor(*conn_)](
            auto handler, std::span<std::string_view const> command, redis_compensation undo) {
          using handler_type = std::decay_t<decltype(handler)>;
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto op = std::make_shared<detail::redis_command_op_for<handler_type>>(ex, std::move(handler));
          op->slot = slot;
          op->compensate = std::move(undo);
          if (auto const conn = weak.lock()) {
            detail::start_redis_command(*conn, command, op);
          } else { // initiated (a deferred token) after the client was destroyed
            op->compensate = nullptr;
            op->done = true;
            op->deliver(asio::error::operation_aborted, {});
          }
        },
        token, args, std::move(compensate));
  }

  /// Closes the connection for good, as an Asio socket's `close`: commands still waiting for replies complete
  /// with `asio::error::shut_down` (not `operation_aborted`: they were not cancelled, the caller may fall back),
  /// and every later command completes with `asio::error::shut_down` at once, without connecting and without
  /// being counted in `redis_client_stats::commands`. No connection is opened again; nothing of the client keeps
  /// `io_context::run()` busy afterwards. Calling it again does nothing.
  ///
  /// @par Thread safety
  /// As `async_command`: call it from the executor given at construction.
  void close() noexcept;

  /// Whether `close()` was called. Same thread rule as `close`.
  [[nodiscard]] bool closed() const noexcept;

  /// `async_command` as a coroutine that throws: the reply, or `wandura::error` with the code above and a
  /// message naming the server (`redis 127.0.0.1:6379: ...`, never the password) and, for an error reply, its
  /// text as one line: its first 200 bytes, each byte outside 0x20-0x7E as `\xHH`, `...` marking a longer one
  /// (the error's `what()` stays one bounded line whatever the server sends). `args` are owned by the coroutine.
  /// Same cancellation rules.
  [[nodiscard]] asio::awaitable<redis_reply> command(std::vector<std::string> args);

  /// The executor given at construction.
  [[nodiscard]] asio::any_io_executor get_executor() const noexcept;
  /// `host:port[/db]` of the server, without credentials: for log lines.
  [[nodiscard]] std::string const& server_name() const noexcept;
  /// A snapshot of the counters.
  [[nodiscard]] redis_client_stats stats() const noexcept;

private:
  friend redis_options const& detail::options_of(redis_client const& client) noexcept;
  std::shared_ptr<detail::redis_connection> conn_;
  std::string server_name_;
};

} // namespace wandura
