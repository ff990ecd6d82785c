// The state of one Redis command between its initiation and its completion: the handler (type-erased here so
// that the connection's code lives in one .cpp), its deadline and the cancellation slot. Not public API.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include "wandura/fleet/redis_reply.hpp"

namespace wandura {
/// Given the reply to a command whose waiter is gone (it timed out or was cancelled before the reply came), the
/// command that undoes what that command did (a compensating command), or an empty vector for none. See
/// `redis_client::async_command`.
using redis_compensation = std::function<std::vector<std::string>(redis_reply const& late_reply)>;
} // namespace wandura

namespace wandura::detail {

class redis_connection;

/// One command in flight. Shared by the connection's reply callback, its deadline queue and the cancellation
/// handler; the first of them to call `redis_connection::finish` completes it, the others find `done` set.
class redis_command_op {
public:
  redis_command_op() = default;
  virtual ~redis_command_op() = default;
  redis_command_op(redis_command_op const&) = delete;
  redis_command_op& operator=(redis_command_op const&) = delete;

  /// Hands the outcome to the handler: always posted to the handler's executor, never run inline (the caller
  /// may be inside a hiredis callback).
  virtual void deliver(std::error_code ec, redis_reply reply) = 0;
  /// Destroys the handler without running it: its execution context is shut down and will run nothing more.
  virtual void discard() noexcept = 0;

  std::chrono::steady_clock::time_point deadline{}; ///< when the command times out
  asio::cancellation_slot slot;                     ///< the handler's slot, cleared before the handler runs
  redis_compensation compensate;                    ///< run on a late reply, at most once; may be empty
  bool done = false;
};

template <class Handler> class redis_command_op_for final : public redis_command_op {
public:
  redis_command_op_for(asio::any_io_executor const& ex, Handler handler)
      : work_(asio::get_associated_executor(handler, ex)), handler_(std::move(handler)) {}

  void deliver(std::error_code ec, redis_reply reply) override {
    auto ex = work_.get_executor();
    work_.reset();
    asio::post(ex, [handler = std::move(*handler_), ec, reply = std::move(reply)]() mutable {
      std::move(handler)(ec, std::move(reply));
    });
    handler_.reset();
  }
  void discard() noexcept override {
    handler_.reset();
    work_.reset();
  }

private:
  asio::executor_work_guard<asio::associated_executor_t<Handler, asio::any_io_executor>> work_;
  std::optional<Handler> handler_;
};

/// Sends `args` on `conn` (connecting first when needed) and arranges for `op` to complete exactly once.
void start_redis_command(redis_connection& conn, std::span<std::string_view const> args,
                         std::shared_ptr<redis_command_op> const& op);
/// The executor the connection runs on.
[[nodiscard]] asio::any_io_executor redis_connection_executor(redis_connection const& conn) noexcept;

} // namespace wandura::detail
