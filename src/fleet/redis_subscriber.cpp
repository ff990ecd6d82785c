#include "redis_subscriber.hpp"

#include <algorithm>
#include <array>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ip/address.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <hiredis/hiredis.h>

#include "reply_size.hpp"

namespace wandura::detail {
namespace {

constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);

/// `argv` as one RESP2 command.
std::string format_command(std::vector<std::string_view> const& argv) {
  std::vector<char const*> data;
  std::vector<std::size_t> lens;
  for (auto const& a : argv) {
    data.push_back(a.data());
    lens.push_back(a.size());
  }
  char* out = nullptr;
  int const n = redisFormatCommandArgv(&out, static_cast<int>(argv.size()), data.data(), lens.data());
  std::string command = n > 0 ? std::string(out, static_cast<std::size_t>(n)) : std::string();
  redisFreeCommand(out);
  return command;
}

using reader_ptr = std::unique_ptr<redisReader, decltype(&redisReaderFree)>;
using reply_ptr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

std::string_view text_of(redisReply const& r) {
  return {r.str, static_cast<std::size_t>(r.len)};
}

/// A `subscribe` or `message` push of our channel: its kind ("subscribe", "message") and payload; empty otherwise.
std::pair<std::string_view, std::string_view> push_of(redisReply const& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements < 3 || r.element[0]->type != REDIS_REPLY_STRING) {
    return {};
  }
  auto const* payload = r.element[2];
  return {text_of(*r.element[0]), payload->type == REDIS_REPLY_STRING ? text_of(*payload) : std::string_view()};
}

} // namespace

redis_subscriber::redis_subscriber(asio::any_io_executor ex, redis_options const& options, std::string channel,
                                   handlers h)
    : executor_(std::move(ex)), url_(redis_url::parse(options.url)), connect_timeout_(options.connect_timeout),
      max_reply_bytes_(options.max_reply_bytes), max_reply_elements_(options.max_reply_elements), backoff_(options),
      channel_(std::move(channel)), handlers_(std::move(h)), socket_(executor_), timer_(executor_) {}

void redis_subscriber::start() {
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->run(); }, asio::detached);
}

void redis_subscriber::stop() {
  stopped_ = true; // from here on no handler runs
  // The socket and timer are closed on the executor, where the subscription's coroutine uses them.
  asio::post(executor_, [self = shared_from_this()] {
    std::error_code ignored;
    self->socket_.close(ignored);
    self->timer_.cancel();
  });
}

void redis_subscriber::arm_deadline(std::chrono::milliseconds after) {
  expire_after(timer_, after);
  timer_.async_wait([this, weak = weak_from_this()](std::error_code wait_ec) {
    if (auto self = weak.lock(); self && !wait_ec && !live_) {
      std::error_code ignored;
      socket_.close(ignored); // took too long
    }
  });
}

void redis_subscriber::set_live(bool live) {
  if (live_ != live && !stopped_) {
    live_ = live;
    handlers_.on_state(live);
  }
}

asio::awaitable<void> redis_subscriber::run() {
  while (!stopped_) {
    auto const began = std::chrono::steady_clock::now();
    co_await serve_one_connection();
    std::error_code ignored;
    socket_.close(ignored); // whatever ended it, nothing is read from it again
    set_live(false);
    if (stopped_) {
      break;
    }
    // A connection that lasted resets the backoff; one that failed at once doubles it (reconnect_backoff.hpp).
    if (std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began) >
        backoff_.longest()) {
      backoff_.reset();
    }
    expire_after(timer_, backoff_.next());
    auto [waited] = co_await timer_.async_wait(as_tuple);
    (void)waited;
  }
}

asio::awaitable<void> redis_subscriber::serve_one_connection() {
  std::error_code ec;
  socket_ = asio::ip::tcp::socket(executor_);
  // As hiredis does: an address, or a name resolved by the system (blocking; /etc/hosts or an address is best).
  asio::ip::tcp::resolver resolver(executor_);
  auto const endpoints = resolver.resolve(url_.host, std::to_string(url_.port), ec);
  if (ec || endpoints.empty()) {
    co_return;
  }
  arm_deadline(connect_timeout_); // the TCP connect, as for the command connection
  auto [connect_ec] = co_await socket_.async_connect(*endpoints.begin(), as_tuple);
  if (connect_ec || stopped_) {
    timer_.cancel();
    co_return;
  }
  // AUTH and SUBSCRIBE answered within the longest reconnect backoff, or the connection is dropped and tried again:
  // a server that never confirms does not hold the subscription forever.
  arm_deadline(std::max(connect_timeout_, backoff_.longest()));
  std::string setup;
  bool const auth = !url_.password.empty();
  if (auth) {
    setup = url_.user.empty() ? format_command({"AUTH", url_.password})
                              : format_command({"AUTH", url_.user, url_.password});
  }
  setup += format_command({"SUBSCRIBE", channel_});
  auto [write_ec, written] = co_await asio::async_write(socket_, asio::buffer(setup), as_tuple);
  (void)written;
  if (write_ec || stopped_) {
    timer_.cancel();
    co_return;
  }
  declared_elements elements(max_reply_bytes_, max_reply_elements_); // outlives the reader, which points to it
  reader_ptr reader(redisReaderCreate(), &redisReaderFree);
  if (!reader) {
    timer_.cancel();
    co_return; // out of memory
  }
  bound_arrays(*reader, elements);
  bool awaiting_auth = auth;
  std::array<char, 4096> buffer{};
  while (!stopped_) {
    auto [read_ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), as_tuple);
    if (read_ec || stopped_ || redisReaderFeed(reader.get(), buffer.data(), n) != REDIS_OK) {
      break;
    }
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) {
        co_return; // not RESP2, or an array longer than the bound (`declared_elements`): drop the connection
      }
      if (raw == nullptr) {
        break; // wait for more bytes
      }
      reply_ptr reply(static_cast<redisReply*>(raw), &freeReplyObject);
      if (awaiting_auth) {
        awaiting_auth = false;
        if (reply->type == REDIS_REPLY_ERROR) {
          co_return; // AUTH refused
        }
        continue;
      }
      auto const [kind, payload] = push_of(*reply);
      if (kind == "subscribe") {
        timer_.cancel();
        set_live(true);
      } else if (kind == "message" && live_ && !stopped_) {
        handlers_.on_message(payload);
      }
    }
    if (reply_too_large(*reader, max_reply_bytes_)) {
      break; // a huge or never-ending push: not the Redis the subscription is for
    }
  }
  timer_.cancel();
}

} // namespace wandura::detail
