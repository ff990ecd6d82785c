// The redis client against a fake server on loopback that answers garbage or closes mid-reply.
#include "wandura/fleet/redis_client.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "fleet_test_support.hpp"
#include "repeated_text.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

using namespace std::chrono_literals;

namespace {

using outcome = std::tuple<std::error_code, wandura::redis_reply>;

// Accepts one connection, waits for the first command's bytes, writes `answer` and closes the connection.
asio::awaitable<void> answer_once(asio::ip::tcp::acceptor& acceptor, std::string answer) {
  auto socket = co_await acceptor.async_accept(asio::use_awaitable);
  std::array<char, 512> buf{};
  co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
  co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
  socket.close();
}

outcome send_command(asio::io_context& io, wandura::redis_client& client, std::vector<std::string_view> args) {
  return test_support::run(io, [&]() -> asio::awaitable<outcome> {
    co_return co_await client.async_command(args, asio::experimental::as_tuple(asio::use_awaitable));
  }());
}

// A fake server that answers its first connection's first command with `answer`, and a client of it.
struct fake_server {
  explicit fake_server(std::string answer, std::size_t bound = wandura::redis_options{}.max_reply_bytes)
      : max_reply_bytes(bound) {
    asio::co_spawn(io, answer_once(acceptor, std::move(answer)), asio::detached);
  }
  std::size_t max_reply_bytes;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  wandura::redis_client client{io.get_executor(),
                               {.url = "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()),
                                .command_timeout = 2s,
                                .max_reply_bytes = max_reply_bytes}};
};

outcome ask_fake_server(std::string answer) {
  fake_server server(std::move(answer));
  return send_command(server.io, server.client, {"GET", "k"});
}

} // namespace

TEST_CASE("redis client: a server that answers garbage is a protocol_error, not a reply") {
  auto [ec, reply] = ask_fake_server("HTTP/1.1 400 Bad Request\r\n\r\n");
  CHECK(ec == wandura::errc::protocol_error);
  CHECK(reply.is_nil());
}

TEST_CASE("redis client: a server that closes mid-reply is a connection_reset") {
  auto [ec, reply] = ask_fake_server("$10\r\nabc");
  CHECK(ec == wandura::errc::connection_reset);
  CHECK(ec == wandura::condition::retryable);
}

TEST_CASE("redis client: a server that closes mid-array is a connection_reset") {
  auto [ec, reply] = ask_fake_server("*2\r\n:1\r\n");
  CHECK(ec == wandura::errc::connection_reset);
}

TEST_CASE("redis client: a reply no command waits for ends the connection, and the process lives") {
  // hiredis 0.14 asserts (aborts the process) on such a reply: one line too many from whatever listens on the port.
  fake_server server("$3\r\nabc\r\n+EXTRA\r\n");
  auto const [ec, reply] = send_command(server.io, server.client, {"GET", "k"});
  REQUIRE_FALSE(ec);
  CHECK(reply.text == "abc"); // the reply the command waited for
  // The stray reply ended the connection: the next command connects again (refused now: nothing listens).
  server.acceptor.close();
  CHECK(std::get<0>(send_command(server.io, server.client, {"PING"})) == wandura::errc::connect_failed);
  CHECK(server.client.stats().connects == 1);
}

TEST_CASE("redis client: a well-formed fake reply is read as a value") {
  auto [ec, reply] = ask_fake_server("$3\r\nabc\r\n");
  REQUIRE_FALSE(ec);
  CHECK(reply.text == "abc");
}

TEST_CASE("redis client: an error reply with a line break and 100 kB is quoted in what() on one bounded line") {
  // RESP2 ends a line only at CR LF: a lone LF, or any other byte, may sit inside an error reply.
  std::string const text = "ERR a\nWARN forged " + std::string(100'000, 'x');
  fake_server server("-" + text + "\r\n");
  std::string what;
  std::string reply_text;
  test_support::run(server.io, [&]() -> asio::awaitable<void> {
    try {
      auto op = server.client.command({"GET", "k"});
      (void)co_await std::move(op);
    } catch (wandura::error const& e) {
      what = e.what();
    }
  }());
  CHECK(what.starts_with("redis 127.0.0.1:"));
  CHECK(what.find("ERR a\\x0aWARN forged xxx") != std::string::npos);
  CHECK(what.find('\n') == std::string::npos);
  CHECK(what.size() < 1'000);
  // The reply itself keeps the server's text.
  auto [ec, reply] = ask_fake_server("-" + text + "\r\n");
  CHECK(ec == wandura::fleet_errc::server_error);
  CHECK(reply.text == text);
}

TEST_CASE("shared ticket cache: a server that answers garbage makes the lookup local, counted, never an error") {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::co_spawn(io, answer_once(acceptor, "HTTP/1.1 400 Bad Request\r\n\r\n"), asio::detached);
  std::string const url = "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  wandura::redis_client client(io.get_executor(), {.url = url, .command_timeout = 2s});
  std::vector<std::string> lines;
  wandura::ticket_cache_options options;
  options.fallback.log = [&](std::string_view line) { lines.emplace_back(line); };
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const found = test_support::run(io, cache.get(test_support::viewer_on("device-7")));
  CHECK_FALSE(found);
  CHECK(cache.stats().fallbacks == 1);
  CHECK(lines.size() == 1);
}

namespace {

// Accepts every connection and answers each read on it with `answer`, keeping it open.
asio::awaitable<void> answer_every_read(asio::ip::tcp::socket socket, std::string answer) {
  std::array<char, 512> buf{};
  for (;;) {
    auto [ec, n] =
        co_await socket.async_read_some(asio::buffer(buf), asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
    co_await asio::async_write(socket, asio::buffer(answer), asio::experimental::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> answer_everyone(asio::ip::tcp::acceptor& acceptor, std::string answer, int& connections) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return;
    }
    ++connections;
    asio::co_spawn(acceptor.get_executor(), answer_every_read(std::move(socket), answer), asio::detached);
  }
}

} // namespace

TEST_CASE("shared ticket cache: a server whose pushes are well-formed but wrong never makes the near cache live, "
          "nor crashes") {
  // In subscribe mode hiredis 0.14 asserts on such an array; the erase subscription reads it with its own parser.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  int connections = 0;
  asio::co_spawn(io, answer_everyone(acceptor, "*1\r\n:1\r\n", connections), asio::detached);
  std::string const url = "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  wandura::redis_client client(io.get_executor(), {.url = url, .command_timeout = 200ms});
  wandura::ticket_cache_options options;
  options.fallback.log = [](std::string_view) {};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = std::chrono::system_clock::now();
  test_support::run(io, cache.put(test_support::viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  for (int i = 0; i < 100 && connections < 2; ++i) { // the command connection and the subscription's
    test_support::wait(io, 50ms);
  }
  REQUIRE(connections >= 2);
  test_support::wait(io, 300ms); // the subscription subscribes and reads the wrong answers
  CHECK_FALSE(cache.stats().near_cache_live);
  auto const found = test_support::run(io, cache.get(test_support::viewer_on("device-7"), now));
  REQUIRE(found); // from the fallback copy: the store's reply was not the integer it must be
  CHECK(found->payload == "tkt_7");
  CHECK(cache.stats().near_hits == 0);
}

namespace {

// A peer on its own thread (it writes while the client's event loop runs, as a process would): answers the first
// read of every connection with `header`, then streams filler bytes until the client drops the connection or
// `most` bytes went. Records how many bytes each connection took before it was dropped.
class streaming_peer {
public:
  streaming_peer(std::string header, std::size_t most) : header_(std::move(header)), most_(most) {
    asio::co_spawn(io_, accept_all(), asio::detached);
    thread_ = std::thread([this] { io_.run_for(30s); });
  }
  ~streaming_peer() {
    io_.stop();
    thread_.join();
  }
  streaming_peer(streaming_peer const&) = delete;
  streaming_peer& operator=(streaming_peer const&) = delete;

  [[nodiscard]] std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  /// Bytes each connection took, in accept order; a connection still streaming is not listed.
  [[nodiscard]] std::vector<std::size_t> taken() const {
    std::lock_guard lock(mutex_);
    return taken_;
  }

private:
  asio::awaitable<void> accept_all() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;
      }
      asio::co_spawn(io_, stream(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> stream(asio::ip::tcp::socket socket) {
    constexpr auto token = asio::experimental::as_tuple(asio::use_awaitable);
    std::array<char, 512> command{};
    auto [read_ec, n] = co_await socket.async_read_some(asio::buffer(command), token);
    (void)n;
    std::size_t sent = 0;
    if (!read_ec) {
      auto [ec, written] = co_await asio::async_write(socket, asio::buffer(header_), token);
      sent += written;
      std::string const filler(64 * 1024, 'a');
      while (!ec && sent < most_) {
        std::tie(ec, written) = co_await asio::async_write(socket, asio::buffer(filler), token);
        sent += written;
      }
    }
    std::lock_guard lock(mutex_);
    taken_.push_back(sent);
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_, {asio::ip::make_address("127.0.0.1"), 0}};
  std::uint16_t const port_ = acceptor_.local_endpoint().port();
  std::string const header_;
  std::size_t const most_;
  mutable std::mutex mutex_;
  std::vector<std::size_t> taken_;
  std::thread thread_;
};

/// 32 MiB: four times the default `max_reply_bytes`, and past it by more than the loopback socket buffers can hold
/// (a few MiB each side).
constexpr std::size_t streamed = std::size_t{32} << 20U;
/// What a client that stops at the default bound may still have taken: the bound, plus the socket buffers.
constexpr std::size_t bounded = wandura::redis_options{}.max_reply_bytes + (std::size_t{12} << 20U);

// The longest gap between the ticks of a 10 ms timer on `io`, while `io` runs for `how_long`.
long long longest_gap(asio::io_context& io, std::chrono::milliseconds how_long) {
  long long longest = 0;
  test_support::run(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer tick(co_await asio::this_coro::executor);
    auto const start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < how_long) {
      auto const before = std::chrono::steady_clock::now();
      tick.expires_after(10ms);
      co_await tick.async_wait(asio::use_awaitable);
      longest = std::max(longest, test_support::elapsed_ms(before));
    }
  }());
  return longest;
}

} // namespace

TEST_CASE("redis client: a reply longer than max_reply_bytes is a protocol_error, and the loop keeps ticking") {
  // A peer announcing a 512 MB bulk string, or a status line that never ends: a client that buffered it whole took
  // 1 GB and stalled its event loop for seconds (the unfinished line searched again at every read).
  for (std::string const header : {"$536870000\r\n", "+"}) {
    CAPTURE(header);
    streaming_peer peer(header, streamed);
    asio::io_context io;
    wandura::redis_client client(io.get_executor(), {.url = peer.url(), .command_timeout = 5s});
    std::error_code ec;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          std::array<std::string_view, 2> const args{"GET", "k"};
          std::tie(ec, std::ignore) =
              co_await client.async_command(args, asio::experimental::as_tuple(asio::use_awaitable));
        },
        asio::detached);
    CHECK(longest_gap(io, 1500ms) < 200);
    CHECK(ec == wandura::errc::protocol_error);
    REQUIRE(test_support::wait_until([&] { return !peer.taken().empty(); }));
    CHECK(peer.taken().front() < bounded);
    CHECK(client.stats().disconnects == 1);
  }
}

TEST_CASE("redis client: a late reply that grows past max_reply_bytes drops the connection the timeout kept") {
  streaming_peer peer("$536870000\r\n", streamed);
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = peer.url(), .command_timeout = 5ms});
  auto const [ec, reply] = send_command(io, client, {"GET", "k"});
  CHECK(ec == wandura::condition::timeout); // response_timeout once the stream's first bytes came within 5 ms
  CHECK(longest_gap(io, 1500ms) < 200);
  REQUIRE(test_support::wait_until([&] { return !peer.taken().empty(); }));
  CHECK(peer.taken().front() < bounded);
  CHECK(client.stats().disconnects == 1);
  CHECK(client.stats().pending == 0);
}

TEST_CASE("shared ticket cache: a never-ending push on the erase subscription drops it, and the loop keeps ticking") {
  // The subscription reads with its own hiredis reader, bounded the same way.
  streaming_peer peer("+", streamed);
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = peer.url()});
  wandura::ticket_cache_options options;
  options.fallback.log = [](std::string_view) {};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = std::chrono::system_clock::now();
  // The store's command times out (5 ms) and opens the subscription; the peer streams to both connections.
  test_support::run(io, cache.put(test_support::viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  CHECK(longest_gap(io, 1500ms) < 200);
  auto const taken = peer.taken();
  REQUIRE(taken.size() >= 2); // the command connection's and at least one of the subscription's
  for (auto const bytes : taken) {
    CHECK(bytes < bounded);
  }
  CHECK_FALSE(cache.stats().near_cache_live);
}

namespace {

/// The most elements the arrays of one reply may declare at the defaults: `max_reply_elements`, below what
/// `max_reply_bytes` could carry (3 bytes each, the shortest element, `+\r\n`).
constexpr std::size_t most_elements = wandura::redis_options{}.max_reply_elements;
static_assert(most_elements <= wandura::redis_options{}.max_reply_bytes / 3);

// A fake server on the client's own io_context: answers the first command of every connection with `answer`, then
// keeps the connection open until the client drops it. Counts the connections the client dropped, and those of
// them whose first command was a SUBSCRIBE.
class holding_server {
public:
  holding_server(asio::io_context& io, std::string answer) : acceptor_(io, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(io, accept_all(std::move(answer)), asio::detached);
  }
  [[nodiscard]] std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  [[nodiscard]] int dropped() const noexcept { return dropped_; }
  [[nodiscard]] int subscriptions_dropped() const noexcept { return subscriptions_dropped_; }

private:
  asio::awaitable<void> accept_all(std::string answer) {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;
      }
      asio::co_spawn(acceptor_.get_executor(), hold(std::move(socket), answer), asio::detached);
    }
  }

  asio::awaitable<void> hold(asio::ip::tcp::socket socket, std::string answer) {
    constexpr auto token = asio::experimental::as_tuple(asio::use_awaitable);
    std::array<char, 512> buf{};
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), token);
    bool const subscription = std::string_view(buf.data(), n).find("SUBSCRIBE") != std::string_view::npos;
    if (!ec) {
      std::tie(ec, std::ignore) = co_await asio::async_write(socket, asio::buffer(answer), token);
    }
    while (!ec) { // whatever else comes goes unanswered
      std::tie(ec, n) = co_await socket.async_read_some(asio::buffer(buf), token);
    }
    ++dropped_;
    subscriptions_dropped_ += subscription ? 1 : 0;
  }

  asio::ip::tcp::acceptor acceptor_;
  int dropped_ = 0;
  int subscriptions_dropped_ = 0;
};

using test_support::repeated;

} // namespace

TEST_CASE("redis client: an array declaring more than max_reply_elements elements is a protocol_error at once, and "
          "so are nested ones") {
  // hiredis 0.14 allocates a pointer per declared element as the header is read (`*2000000000`: 16 GB), then an
  // object per element as each arrives; the byte bound sees none of it, an element read being no longer unread.
  // Kept open, a connection would wait for the elements until the command timed out, and keep the allocation.
  std::string const one_past = "*" + std::to_string(most_elements + 1) + "\r\n";
  // An array whose first element is an array: each within the bound, together one past it.
  std::size_t const outer = most_elements / 2 + 1;
  std::size_t const inner = most_elements + 1 - outer;
  std::string const together_past = "*" + std::to_string(outer) + "\r\n*" + std::to_string(inner) + "\r\n";
  for (std::string const& header :
       {std::string("*2000000000\r\n"), one_past, std::string("*1\r\n*1\r\n*2000000000\r\n"), together_past}) {
    CAPTURE(header);
    asio::io_context io;
    holding_server server(io, header);
    wandura::redis_client client(io.get_executor(), {.url = server.url(), .command_timeout = 5s});
    auto const start = std::chrono::steady_clock::now();
    auto const [ec, reply] = send_command(io, client, {"GET", "k"});
    CHECK(ec == wandura::errc::protocol_error);
    CHECK(test_support::elapsed_ms(start) < 1000); // dropped as the header came, not at the command's timeout
    CHECK(client.stats().disconnects == 1);
    CHECK(test_support::wait_until(io, [&] { return server.dropped() == 1; }));
  }
}

TEST_CASE("redis client: arrays declaring as many elements as max_reply_bytes could carry, or max_reply_elements, "
          "are read") {
  // 30 bytes carry 10 elements: an array of two, one of them an array of eight, declares ten.
  {
    fake_server server("*2\r\n*8\r\n" + repeated("+\r\n", 8) + ":7\r\n", 30);
    auto const [ec, reply] = send_command(server.io, server.client, {"GET", "k"});
    REQUIRE_FALSE(ec);
    REQUIRE(reply.elements.size() == 2);
    CHECK(reply.elements[0].elements.size() == 8);
    CHECK(reply.elements[1].integer == 7);
  }
  {
    fake_server server("*2\r\n*9\r\n" + repeated("+\r\n", 9) + ":7\r\n", 30); // eleven
    CHECK(std::get<0>(send_command(server.io, server.client, {"GET", "k"})) == wandura::errc::protocol_error);
  }
  // At the default bound (max_reply_elements): as many are waited for.
  asio::io_context io;
  holding_server server(io, "*" + std::to_string(most_elements) + "\r\n");
  wandura::redis_client client(io.get_executor(), {.url = server.url(), .command_timeout = 200ms});
  CHECK(std::get<0>(send_command(io, client, {"GET", "k"})) == wandura::errc::response_timeout); // its header came
  CHECK(client.stats().disconnects == 0);
  CHECK(server.dropped() == 0);
}

TEST_CASE("redis client: a timeout after part of the reply is response_timeout, before any byte attempt_timeout") {
  // redis_client.hpp, async_command: the code says whether the server had begun to answer.
  for (std::string const answer : {"+PON", "$5\r\nhel", "*2\r\n:1\r\n", "*1\r\n"}) {
    CAPTURE(answer);
    asio::io_context io;
    holding_server server(io, answer);
    wandura::redis_client client(io.get_executor(), {.url = server.url(), .command_timeout = 300ms});
    auto const [ec, reply] = send_command(io, client, {"GET", "k"});
    CHECK(ec == wandura::errc::response_timeout);
    CHECK(client.stats().timeouts == 1);
  }
  asio::io_context io;
  holding_server silent(io, "");
  wandura::redis_client client(io.get_executor(), {.url = silent.url(), .command_timeout = 300ms});
  CHECK(std::get<0>(send_command(io, client, {"GET", "k"})) == wandura::errc::attempt_timeout);
}

TEST_CASE("shared ticket cache: a push declaring more than max_reply_elements elements drops the erase "
          "subscription at once") {
  // The subscription reads with its own hiredis reader, bounded the same way. Unbounded, it waited for SUBSCRIBE's
  // confirmation until its setup deadline (the longest reconnect backoff, 2 s), holding the allocation.
  asio::io_context io;
  holding_server server(io, "*" + std::to_string(most_elements + 1) + "\r\n");
  wandura::redis_client client(io.get_executor(), {.url = server.url()});
  wandura::ticket_cache_options options;
  options.fallback.log = [](std::string_view) {};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = std::chrono::system_clock::now();
  test_support::run(io, cache.put(test_support::viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  auto const subscription_dropped = [&] { return server.subscriptions_dropped() >= 1; };
  CHECK(test_support::wait_until(io, subscription_dropped, 1000ms));
  CHECK_FALSE(cache.stats().near_cache_live);
}
