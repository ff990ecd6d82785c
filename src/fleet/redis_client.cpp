#include "wandura/fleet/redis_client.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include "redis_connection.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"

namespace wandura {

redis_client::redis_client(asio::any_io_executor ex, redis_options options)
    : conn_(detail::make_redis_connection(std::move(ex), std::move(options))), server_name_(conn_->url().redacted()) {}

redis_client::~redis_client() {
  detail::release_redis_connection(std::move(conn_));
}

asio::awaitable<redis_reply> redis_client::command(std::vector<std::string> args) {
  std::string const server = server_name_; // this client may be destroyed while the command waits
  std::vector<std::string_view> views(args.begin(), args.end());
  auto [ec, reply] = co_await async_command(views, asio::experimental::as_tuple(asio::use_awaitable));
  if (ec) {
    std::string message = "redis " + server + ": " + ec.message();
    if (reply.is_error()) { // the server's text: one line, bounded, whatever it holds
      message += ": ";
      detail::append_printable(message, reply.text);
    }
    throw error(ec, message);
  }
  co_return std::move(reply);
}

void redis_client::close() noexcept {
  conn_->close();
}

bool redis_client::closed() const noexcept {
  return conn_->closed();
}

asio::any_io_executor redis_client::get_executor() const noexcept {
  return conn_->executor();
}

std::string const& redis_client::server_name() const noexcept {
  return server_name_;
}

redis_client_stats redis_client::stats() const noexcept {
  return conn_->stats();
}

namespace detail {
redis_options const& options_of(redis_client const& client) noexcept {
  return client.conn_->options();
}
} // namespace detail

} // namespace wandura
