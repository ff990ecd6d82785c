// One Redis Pub/Sub subscription, kept alive: its own connection, reconnected with backoff, reporting each message
// and whether the subscription is live. Not public API.
//
// It does not use hiredis's async context: in subscribe mode hiredis 0.14 asserts on the shape of every array reply
// (an `assert` in `__redisGetSubscribeCallback`), so a server that answers a well-formed but unexpected array would
// abort the process. The connection is an Asio socket; hiredis's reader only parses RESP2, and anything unexpected
// drops the connection like any other failure.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "reconnect_backoff.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/redis_url.hpp"

namespace wandura::detail {

class redis_subscriber : public std::enable_shared_from_this<redis_subscriber> {
public:
  struct handlers {
    /// Each message's payload on the channel.
    std::function<void(std::string_view)> on_message;
    /// True once Redis confirmed the subscription; false when the connection carrying it is lost (messages may
    /// have been missed from then on).
    std::function<void(bool)> on_state;
  };

  /// @param options the server (`url`: host, port and credentials; the database does not matter to Pub/Sub), the
  ///        connect timeout and the reconnect backoff. @throws wandura::error for a bad URL.
  redis_subscriber(asio::any_io_executor ex, redis_options const& options, std::string channel, handlers h);
  redis_subscriber(redis_subscriber const&) = delete;
  redis_subscriber& operator=(redis_subscriber const&) = delete;
  ~redis_subscriber() = default;

  /// Connects and subscribes, then keeps doing so after every loss, until `stop`.
  void start();
  /// No handler starts after this returns (none runs, when called on the executor); the connection is closed on
  /// the executor. Any thread.
  void stop();

private:
  asio::awaitable<void> run();
  /// One connection: connect, AUTH, SUBSCRIBE, then messages until it fails. Returns when it did.
  asio::awaitable<void> serve_one_connection();
  /// Closes the socket `after` from now unless the subscription is live by then (or the timer is reused).
  void arm_deadline(std::chrono::milliseconds after);
  void set_live(bool live);

  asio::any_io_executor executor_;
  redis_url url_;
  std::chrono::milliseconds connect_timeout_;
  std::size_t max_reply_bytes_;    ///< `redis_options::max_reply_bytes`: past it the connection is dropped
  std::size_t max_reply_elements_; ///< `redis_options::max_reply_elements`: past it the connection is dropped
  reconnect_backoff backoff_;
  std::string channel_;
  handlers handlers_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_; ///< the connect and setup deadlines, then the wait before reconnecting
  bool live_ = false;
  std::atomic<bool> stopped_{false};
};

} // namespace wandura::detail
