// The redis client against a fake server on loopback that answers garbage or closes mid-reply.
#include "wandura/fleet/redis_client.hpp"

#include <array>
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "fleet_test_support.hpp"
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
  explicit fake_server(std::string answer) {
    asio::co_spawn(io, answer_once(acceptor, std::move(answer)), asio::detached);
  }
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  wandura::redis_client client{
      io.get_executor(),
      {.url = "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), .command_timeout = 2s}};
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
