// The connection behind a `wandura::redis_client`: one hiredis async context at a time, reconnected on demand
// with backoff. Not public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include "context_shutdown.hpp"
#include "hiredis_asio.hpp"
#include "reconnect_backoff.hpp"
#include "reply_size.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/detail/redis_command_op.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/redis_url.hpp"

struct redisAsyncContext;
struct redisReadTask;
struct redisReply;

namespace wandura::detail {

class redis_connection : public std::enable_shared_from_this<redis_connection>, public parked_handlers {
public:
  redis_connection(asio::any_io_executor ex, redis_options options);
  ~redis_connection();
  redis_connection(redis_connection const&) = delete;
  redis_connection& operator=(redis_connection const&) = delete;

  void start(std::span<std::string_view const> args, std::shared_ptr<redis_command_op> const& op);
  /// Closes the connection for good: every command not answered yet and every later one completes with
  /// `asio::error::shut_down`; no connection is opened again. Idempotent.
  void close();
  /// The client is gone (`release_redis_connection`): closes the connection as `close` does, but every command not
  /// answered yet, and every later one (initiated through a weak hold), completes with `operation_aborted`.
  void abort();
  /// Marks the client gone, from the thread that destroys it, before `abort` runs on the executor: a command
  /// initiated on the executor in between (through a weak hold taken earlier) is refused unsent. Any thread.
  void mark_released() noexcept { released_.store(true, std::memory_order_release); }
  [[nodiscard]] bool closed() const noexcept { return closed_; }
  /// Completes `op` once; later calls for the same op do nothing.
  static void finish(redis_command_op& op, std::error_code ec, redis_reply reply = {});
  /// At the shutdown of the connection's execution context (`context_shutdown`): frees the handler and the
  /// compensation of every command not answered yet without running them; their replies, if any come, are dropped.
  void abandon(asio::execution_context& context) noexcept override;

  [[nodiscard]] asio::any_io_executor const& executor() const noexcept { return executor_; }
  [[nodiscard]] redis_url const& url() const noexcept { return url_; }
  [[nodiscard]] redis_options const& options() const noexcept { return options_; }
  [[nodiscard]] redis_client_stats stats() const noexcept;
  /// A reply came that no command waits for: the connection is dropped as a protocol error (from the reader).
  void refuse_unexpected_reply() noexcept { down_reason_ = errc::protocol_error; }
  /// An array of `count` elements begins at `task` in the reply being read (from the reader): false, and the
  /// connection is dropped as a protocol error, when the arrays of that reply would declare more elements than
  /// `redis_options::max_reply_bytes` could carry (`declared_elements`).
  [[nodiscard]] bool admit_array(redisReadTask const& task, int count) noexcept;

private:
  /// `close` and `abort`: `why` is what the commands complete with.
  void shut(std::error_code why);
  bool ensure_context(std::error_code& ec);
  bool open_context(std::error_code& ec);
  void send_setup();
  void watch_cancellation(std::shared_ptr<redis_command_op> const& op);
  void arm_timeout(std::shared_ptr<redis_command_op> const& op);
  void on_ready();
  void arm_deadline_timer(std::chrono::steady_clock::time_point at);
  void expire_overdue();
  /// Whether a part of `op`'s reply has arrived (not all of it): its timeout is then `errc::response_timeout`.
  [[nodiscard]] bool reply_started(redis_command_op const& op) const noexcept;
  /// A connection that failed to become ready, for `why` (`errc::connect_failed`, or `fleet_errc::auth_failed`):
  /// counted, and no new one is tried before the backoff's next wait has passed.
  void note_connect_failure(std::error_code why);
  /// The reply a command failed with `ec` completes with: the refusal of AUTH or SELECT for `auth_failed` (e.g.
  /// `WRONGPASS ...`), nil otherwise.
  [[nodiscard]] redis_reply failure_reply(std::error_code ec) const noexcept;
  void send_compensation(redis_command_op& op, redisReply const& late) noexcept;
  /// Empties `compensate`, destroying its target from the executor, never inside a hiredis callback.
  void retire(redis_compensation& compensate) noexcept;
  void on_context_gone();
  /// After each read: drops the connection as a protocol error when the reply being read passed
  /// `redis_options::max_reply_bytes` (`reply_too_large`).
  void bound_unfinished_reply();
  [[nodiscard]] std::error_code failure_code(redisAsyncContext const* ac) const noexcept;

  static void on_connect(redisAsyncContext const* ac, int status);
  static void on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);

  asio::any_io_executor executor_;
  redis_options options_;
  redis_url url_;
  redisAsyncContext* ac_ = nullptr;
  std::shared_ptr<hiredis_asio_adapter> adapter_;
  asio::steady_timer connect_timer_;
  /// Commands in initiation order, which is deadline order (one timeout per connection); completed ones are
  /// dropped when the timer next fires. One timer for all of them: no timer system call per command.
  std::deque<std::shared_ptr<redis_command_op>> deadlines_;
  asio::steady_timer deadline_timer_;
  bool deadline_timer_armed_ = false;
  /// Commands sent while the client's first connection is not ready yet (connecting, or AUTH/SELECT unanswered):
  /// their timeouts start when it is (`on_ready`); connecting is bounded by `connect_timeout` instead. On every
  /// later connection (`charge_connecting_`) a command's timeout runs from its initiation, so this stays empty and
  /// `deadlines_` in initiation order.
  std::deque<std::shared_ptr<redis_command_op>> awaiting_ready_;
  bool opened_before_ = false;     ///< a connection was opened before the current one
  bool charge_connecting_ = false; ///< the current connection is a reconnect: its making counts against commands
  bool connected_ = false;
  bool ready_ = false;    ///< connected, and AUTH/SELECT answered
  int setup_pending_ = 0; ///< AUTH/SELECT replies still to come on this connection
  bool closed_ = false;
  std::atomic<bool> released_{false}; ///< `mark_released`: the client is gone (set on any thread)
  std::error_code closed_reason_;     ///< `shut_down` after `close`, `operation_aborted` after `abort`
  std::error_code down_reason_;       ///< why we closed the context ourselves; wins over what hiredis saw
  std::chrono::steady_clock::time_point next_connect_at_{};
  /// Why the last connection failed to become ready: what commands within the backoff after it fail with.
  std::error_code last_connect_failure_;
  /// The error reply of the last AUTH or SELECT refused, at most `max_setup_refusal_bytes` of it.
  std::string setup_refusal_;
  reconnect_backoff backoff_;
  redis_client_stats stats_;
  declared_elements declared_elements_; ///< of the reply being read
  std::string command_buffer_;          ///< the command being sent, in RESP: reused, hiredis copies it out
};

} // namespace wandura::detail
