#include "wandura/fleet/redis_client.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "fleet_test_support.hpp"
#include "wandura/error.hpp"

using namespace std::chrono_literals;
using test_support::elapsed_ms;

namespace {

using outcome = std::tuple<std::error_code, wandura::redis_reply>;

asio::awaitable<outcome> send(wandura::redis_client& client, std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  co_return co_await client.async_command(views, asio::experimental::as_tuple(asio::use_awaitable));
}

outcome run_command(asio::io_context& io, wandura::redis_client& client, std::vector<std::string> args) {
  return test_support::run(io, send(client, std::move(args)));
}

// Sends PING until it succeeds or `limit` passes; the number of tries when it succeeded, 0 otherwise.
int ping_until_up(asio::io_context& io, wandura::redis_client& client, std::chrono::milliseconds limit) {
  auto const start = std::chrono::steady_clock::now();
  for (int tries = 1; std::chrono::steady_clock::now() - start < limit; ++tries) {
    if (!std::get<0>(run_command(io, client, {"PING"}))) {
      return tries;
    }
    test_support::wait(io, 10ms);
  }
  return 0;
}

// Sends `args` until it succeeds or `limit` passes; the last outcome. With the default command timeout of a few ms,
// a command can time out on a loaded machine (sanitizers, parallel tests) where the test is not about that.
outcome run_until_ok(asio::io_context& io, wandura::redis_client& client, std::vector<std::string> const& args,
                     std::chrono::milliseconds limit = 5s) {
  auto const start = std::chrono::steady_clock::now();
  auto result = run_command(io, client, args);
  while (std::get<0>(result) && std::chrono::steady_clock::now() - start < limit) {
    test_support::wait(io, 10ms);
    result = run_command(io, client, args);
  }
  return result;
}

} // namespace

TEST_CASE("redis client: a command round trip returns every reply kind as a value") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});

  auto [set_ec, set] = run_command(io, client, {"SET", "k", std::string("a\0b", 3)});
  REQUIRE_FALSE(set_ec);
  CHECK(set.type == wandura::redis_reply::kind::status);
  CHECK(set.text == "OK");
  auto [get_ec, get] = run_command(io, client, {"GET", "k"});
  CHECK(get.type == wandura::redis_reply::kind::string);
  CHECK(get.text == std::string("a\0b", 3));
  CHECK(std::get<1>(run_command(io, client, {"GET", "missing"})).is_nil());
  CHECK(std::get<1>(run_command(io, client, {"INCRBY", "n", "41"})).integer == 41);
  run_command(io, client, {"RPUSH", "l", "x", "y"});
  auto [range_ec, range] = run_command(io, client, {"LRANGE", "l", "0", "-1"});
  REQUIRE(range.elements.size() == 2);
  CHECK(range.elements[1].text == "y");

  auto [err_ec, err] = run_command(io, client, {"INCR", "k"});
  CHECK(err_ec == wandura::fleet_errc::server_error);
  CHECK(err.is_error());
  CHECK(err.text.starts_with("ERR"));
  CHECK_THROWS_WITH(test_support::run(io, client.command({"INCR", "k"})),
                    Catch::StartsWith("redis 127.0.0.1:" + std::to_string(redis->port()) + ": "));
  CHECK(client.stats().connects == 1);
  CHECK(client.stats().pending == 0);
}

TEST_CASE("redis client: arguments with CR LF, empty and long ones go as they are, and an empty command is refused") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 2s});

  std::string const framing = "x\r\n$3\r\nDEL\r\n*1\r\n"; // RESP framing inside a value stays a value
  std::string const large(200'000, 'v');
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"MSET", "crlf", framing, "empty", "", "large", large})));
  auto [get_ec, got] = run_command(io, client, {"MGET", "crlf", "empty", "large", "missing"});
  REQUIRE_FALSE(get_ec);
  REQUIRE(got.elements.size() == 4);
  CHECK(got.elements[0].text == framing);
  CHECK(got.elements[1].type == wandura::redis_reply::kind::string);
  CHECK(got.elements[1].text.empty());
  CHECK(got.elements[2].text == large);
  CHECK(got.elements[3].is_nil());
  CHECK(std::get<1>(run_command(io, client, {"DBSIZE"})).integer == 3); // nothing was read as a command of its own

  auto const commands = client.stats().commands;
  auto [empty_ec, empty_reply] = run_command(io, client, {});
  CHECK(empty_ec == wandura::errc::invalid_argument);
  CHECK(client.stats().commands == commands);
  CHECK(std::get<1>(run_command(io, client, {"PING"})).text == "PONG"); // the connection is untouched
}

TEST_CASE("redis client: subscribe and monitor commands are refused as invalid_argument, in any case, and the "
          "connection serves on") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 2s});
  REQUIRE(ping_until_up(io, client, 5s) > 0);

  // Each would enter a mode hiredis answers by calling the command's callback once per message, or never: sent,
  // the process crashed at the next message (or at close).
  std::vector<std::vector<std::string>> const refused{{"SUBSCRIBE", "ch"},
                                                      {"subscribe", "a", "b"},
                                                      {"SubScribe", "ch"},
                                                      {"PSUBSCRIBE", "ch*"},
                                                      {"pSubscribe", "ch*"},
                                                      {"UNSUBSCRIBE"},
                                                      {"unsubscribe", "ch"},
                                                      {"PUNSUBSCRIBE"},
                                                      {"PunSubscribe", "ch*"},
                                                      {"MONITOR"},
                                                      {"monitor"},
                                                      {"MoNiToR", "x"},
                                                      {"PMONITOR"},
                                                      {"MONITOR\r\nx"},
                                                      {"subscribe\r\nx", "ch"}};
  auto const commands = client.stats().commands;
  for (auto const& args : refused) {
    CAPTURE(args[0], args.size());
    auto [ec, reply] = run_command(io, client, args);
    CHECK(ec == wandura::errc::invalid_argument);
    CHECK(reply.is_nil());
  }
  CHECK(client.stats().commands == commands); // not sent, not counted
  CHECK(client.stats().pending == 0);

  // Names that only look alike go to Redis, which answers them; a SUBSCRIBE without a channel is not a
  // subscription either (Redis refuses it).
  auto [bare_ec, bare] = run_until_ok(io, client, {"ECHO", "SUBSCRIBE"});
  CHECK_FALSE(bare_ec);
  CHECK(bare.text == "SUBSCRIBE");
  CHECK(std::get<0>(run_command(io, client, {"SUBSCRIBE"})) == wandura::fleet_errc::server_error);
  CHECK(std::get<0>(run_command(io, client, {"SUBSCRIBEX", "ch"})) == wandura::fleet_errc::server_error);
  CHECK(std::get<0>(run_command(io, client, {"PPSUBSCRIBE", "ch"})) == wandura::fleet_errc::server_error);

  // The connection is the one it was, and a message published on the channels above reaches nothing of it.
  auto [published_ec, receivers] = run_until_ok(io, client, {"PUBLISH", "ch", "hello"});
  CHECK_FALSE(published_ec);
  CHECK(receivers.integer == 0);
  test_support::wait(io, 20ms);
  CHECK(std::get<1>(run_until_ok(io, client, {"PING"})).text == "PONG");
  CHECK(client.stats().connects == 1);
  CHECK(client.stats().disconnects == 0);
  client.close();
}

TEST_CASE("redis client: a paused redis times the command out in its timeout, and serves again after SIGCONT") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url()}); // default timeout: a few ms
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"SET", "k", "v"})));
  auto const timeouts_before = client.stats().timeouts; // the machine's, if it was slow just now

  redis->pause();
  auto const start = std::chrono::steady_clock::now();
  auto [ec, reply] = run_command(io, client, {"GET", "k"});
  auto const took = elapsed_ms(start);
  redis->resume();
  CHECK(ec == wandura::errc::attempt_timeout);
  CHECK(ec == wandura::condition::timeout);
  CHECK(took < 100); // default 5 ms, generous for a loaded machine
  CHECK(client.stats().timeouts == timeouts_before + 1);

  auto [again_ec, again] = run_until_ok(io, client, {"GET", "k"});
  REQUIRE_FALSE(again_ec);
  CHECK(again.text == "v"); // the late reply to the timed-out GET was dropped, not taken for this one
  CHECK(client.stats().connects == 1);
}

TEST_CASE("redis client: durations of milliseconds::max() mean no limit, not an overflow") {
  // A new-user trial: each of these was a signed overflow (UBSan aborted) when converted to the clock's nanoseconds.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto const most = std::chrono::milliseconds::max();
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(),
                                                   .command_timeout = most,
                                                   .connect_timeout = most,
                                                   .reconnect_backoff = most,
                                                   .max_reconnect_backoff = most});
  auto [ec, reply] = run_command(io, client, {"PING"});
  REQUIRE_FALSE(ec);
  CHECK(reply.text == "PONG");
  CHECK(client.stats().timeouts == 0);

  redis->kill(); // a failed connect now waits "forever" before the next: commands fail at once, nothing overflows
  auto [down_ec, ignored] = run_command(io, client, {"PING"});
  CHECK(down_ec);
  auto [backoff_ec, ignored_too] = run_command(io, client, {"PING"});
  CHECK(backoff_ec == wandura::errc::connect_failed);
}

TEST_CASE("redis client: redis down at start fails fast, then the client connects once it is up") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  redis->kill();
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  auto const start = std::chrono::steady_clock::now();
  auto [ec, reply] = run_command(io, client, {"PING"});
  CHECK(ec == wandura::errc::connect_failed);
  CHECK(elapsed_ms(start) < 400); // refused, not timed out
  auto [backoff_ec, ignored] = run_command(io, client, {"PING"});
  CHECK(backoff_ec == wandura::errc::connect_failed); // within the backoff: not even tried
  CHECK(client.stats().connect_failures == 1);

  redis->start();
  CHECK(ping_until_up(io, client, 3s) > 0);
  CHECK(client.stats().connects == 1);
}

TEST_CASE("redis client: reconnects after redis is killed and restarted") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"PING"})));
  redis->kill();
  auto [ec, reply] = run_command(io, client, {"PING"});
  CHECK((ec == wandura::errc::connection_reset || ec == wandura::errc::connect_failed));
  CHECK(ec == wandura::condition::retryable);
  redis->start();
  CHECK(ping_until_up(io, client, 5s) > 0);
  CHECK(client.stats().connects == 2);
  CHECK(client.stats().disconnects == 1);
}

TEST_CASE("redis client: cancelling a pending command completes it at once with operation_aborted") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"PING"})));
  redis->pause(); // the reply would never come before the 5 s timeout

  asio::cancellation_signal signal;
  auto const start = std::chrono::steady_clock::now();
  auto [ec, reply] = test_support::run(io, [&]() -> asio::awaitable<outcome> {
    asio::steady_timer later(io, 20ms);
    later.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
    std::array<std::string_view, 1> ping{"PING"};
    co_return co_await client.async_command(
        ping, asio::bind_cancellation_slot(signal.slot(), asio::experimental::as_tuple(asio::use_awaitable)));
  }());
  auto const took = elapsed_ms(start);
  redis->resume();
  CHECK(ec == asio::error::operation_aborted);
  CHECK(took < 1000);
  CHECK(client.stats().timeouts == 0);
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"PING"}))); // the connection still serves
}

namespace {

// INCR of `key` whose late reply is undone by DECR, under `signal`'s slot; the compensations' calls are counted.
asio::awaitable<outcome> increment_undone(wandura::redis_client& client, std::string const& key,
                                          asio::cancellation_signal& signal, int& calls) {
  std::array<std::string_view, 2> const incr{"INCR", key};
  auto undo = [key, &calls](wandura::redis_reply const& late) -> std::vector<std::string> {
    ++calls;
    if (late.type != wandura::redis_reply::kind::integer) {
      return {};
    }
    return {"DECR", key};
  };
  co_return co_await client.async_command(
      incr, undo, asio::bind_cancellation_slot(signal.slot(), asio::experimental::as_tuple(asio::use_awaitable)));
}

} // namespace

TEST_CASE("redis client: a reply that comes after its command timed out is given to the compensation, once") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url()}); // default timeout: a few ms
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"SET", "n", "0"})));
  asio::cancellation_signal unused;
  int calls = 0;

  redis->pause();
  auto [ec, reply] = test_support::run(io, increment_undone(client, "n", unused, calls));
  CHECK(ec == wandura::errc::attempt_timeout);
  CHECK(calls == 0); // not before the reply comes
  redis->resume();
  REQUIRE(
      test_support::run_until(io, [&] { return client.stats().compensations == 1 && client.stats().pending == 0; }));
  CHECK(calls == 1);
  CHECK(std::get<1>(run_until_ok(io, client, {"GET", "n"})).text == "0"); // INCR ran late, then DECR

  // Answered in time: the compensation is not called, and the increment stays.
  {
    auto [in_time_ec, in_time] = test_support::run(io, increment_undone(client, "n", unused, calls));
    if (in_time_ec == wandura::errc::attempt_timeout) { // a loaded machine: then the late reply is undone too
      REQUIRE(test_support::run_until(io, [&] { return client.stats().pending == 0; }));
      CHECK(std::get<1>(run_until_ok(io, client, {"GET", "n"})).text == "0");
    } else {
      REQUIRE_FALSE(in_time_ec);
      CHECK(in_time.integer == 1);
      CHECK(calls == 1);
      CHECK(client.stats().compensations == 1);
      CHECK(std::get<1>(run_until_ok(io, client, {"GET", "n"})).text == "1");
    }
  }
}

TEST_CASE("redis client: a cancelled command's late reply is given to the compensation, and none is sent for an "
          "empty one") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"SET", "n", "0"})));
  int calls = 0;

  redis->pause();
  asio::cancellation_signal signal;
  auto [ec, reply] = test_support::run(io, [&]() -> asio::awaitable<outcome> {
    asio::steady_timer later(io, 20ms);
    later.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
    co_return co_await increment_undone(client, "n", signal, calls);
  }());
  CHECK(ec == asio::error::operation_aborted);
  redis->resume();
  REQUIRE(
      test_support::run_until(io, [&] { return client.stats().compensations == 1 && client.stats().pending == 0; }));
  CHECK(calls == 1);
  CHECK(std::get<1>(run_command(io, client, {"GET", "n"})).text == "0");

  // A compensation that answers nothing to send (here: the late reply is an error reply) sends nothing.
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"SET", "not-a-number", "text"})));
  redis->pause();
  asio::cancellation_signal again;
  auto [set_ec, set_reply] = test_support::run(io, [&]() -> asio::awaitable<outcome> {
    asio::steady_timer later(io, 20ms);
    later.async_wait([&](std::error_code) { again.emit(asio::cancellation_type::terminal); });
    std::array<std::string_view, 2> const wrong{"INCR", "not-a-number"};
    co_return co_await client.async_command(
        wrong,
        [&calls](wandura::redis_reply const& late) -> std::vector<std::string> {
          ++calls;
          CHECK(late.is_error());
          return {};
        },
        asio::bind_cancellation_slot(again.slot(), asio::experimental::as_tuple(asio::use_awaitable)));
  }());
  CHECK(set_ec == asio::error::operation_aborted);
  redis->resume();
  REQUIRE(test_support::run_until(io, [&] { return calls == 2 && client.stats().pending == 0; }));
  CHECK(client.stats().compensations == 1);
}

TEST_CASE("redis client: a compensating command takes its late command's place among the pending ones") {
  // A command the compensation itself starts sees the late command still pending: with max_pending 1 it is
  // refused as overloaded, and the compensating command never makes two pending at once.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 20ms, .max_pending = 1});
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"PING"})));
  redis->pause();
  std::optional<std::error_code> inner;
  std::size_t most_pending = 0;
  std::array<std::string_view, 1> const ping{"PING"};
  auto [ec, reply] = test_support::run(io, client.async_command(
                                               ping,
                                               [&](wandura::redis_reply const&) {
                                                 client.async_command(
                                                     ping, [&](std::error_code e, wandura::redis_reply) { inner = e; });
                                                 most_pending = std::max(most_pending, client.stats().pending);
                                                 asio::post(io, [&] { // once the compensating command is sent
                                                   most_pending = std::max(most_pending, client.stats().pending);
                                                 });
                                                 return std::vector<std::string>{"PING"};
                                               },
                                               asio::experimental::as_tuple(asio::use_awaitable)));
  CHECK(ec == wandura::errc::attempt_timeout);
  redis->resume();
  REQUIRE(test_support::run_until(io, [&] { return inner.has_value() && client.stats().pending == 0; }));
  CHECK(*inner == wandura::fleet_errc::overloaded);
  CHECK(most_pending == 1);
  CHECK(client.stats().compensations == 1);
}

TEST_CASE("redis client: a compensation that throws is swallowed: nothing is sent and the connection serves on") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url()}); // default timeout: a few ms
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"SET", "n", "0"})));
  int calls = 0;
  auto throwing = [&]() -> asio::awaitable<outcome> {
    std::array<std::string_view, 2> const incr{"INCR", "n"};
    auto undo = [&calls](wandura::redis_reply const&) -> std::vector<std::string> {
      ++calls;
      throw std::runtime_error("compensation failed");
    };
    co_return co_await client.async_command(incr, undo, asio::experimental::as_tuple(asio::use_awaitable));
  };
  redis->pause();
  auto [ec, reply] = test_support::run(io, throwing());
  CHECK(ec == wandura::errc::attempt_timeout);
  auto const commands = client.stats().commands;
  redis->resume();
  REQUIRE(test_support::run_until(io, [&] { return calls == 1 && client.stats().pending == 0; }));
  CHECK(client.stats().compensations == 0); // none sent
  CHECK(client.stats().commands == commands);
  CHECK(std::get<1>(run_until_ok(io, client, {"GET", "n"})).text == "1"); // the late INCR stands
}

TEST_CASE("redis client: destroyed while the io_context runs, its pending command completes with operation_aborted") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  auto client = std::make_unique<wandura::redis_client>(
      io.get_executor(), wandura::redis_options{.url = redis->url(), .command_timeout = 5s});
  REQUIRE(ping_until_up(io, *client, 5s) > 0);
  redis->pause();
  std::optional<std::error_code> done;
  asio::co_spawn(io, send(*client, {"PING"}), [&](std::exception_ptr e, outcome result) {
    done = e ? std::make_error_code(std::errc::io_error) : std::get<0>(result);
  });
  std::optional<std::string> thrown; // the throwing form too, which must not touch the client once it is gone
  asio::co_spawn(io, client->command({"PING"}), [&](std::exception_ptr e, wandura::redis_reply) {
    try {
      if (e) {
        std::rethrow_exception(e);
      }
      thrown = "";
    } catch (wandura::error const& err) {
      thrown = err.code() == asio::error::operation_aborted ? std::string(err.what()) : "another error";
    }
  });
  test_support::wait(io, 30ms);
  REQUIRE_FALSE(done);
  client.reset(); // the commands would time out in 5 s
  REQUIRE(test_support::run_until(
      io, [&] { return done.has_value() && thrown.has_value(); }, 1000ms));
  CHECK(*done == asio::error::operation_aborted);
  CHECK(thrown->starts_with("redis 127.0.0.1:"));
  redis->resume();
}

TEST_CASE("redis client: a connection that was up and broke is reconnected at the next command, without the backoff") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(
      io.get_executor(),
      {.url = redis->url(), .command_timeout = 500ms, .reconnect_backoff = 10s, .max_reconnect_backoff = 10s});
  wandura::redis_client killer(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  REQUIRE(ping_until_up(io, client, 5s) > 0);
  auto [killed_ec, killed] = run_command(io, killer, {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  REQUIRE_FALSE(killed_ec);
  REQUIRE(killed.integer >= 1);
  test_support::wait(io, 50ms); // the close is noticed
  auto const start = std::chrono::steady_clock::now();
  auto [ec, reply] = run_command(io, client, {"PING"});
  CHECK_FALSE(ec);
  CHECK(reply.text == "PONG");
  CHECK(elapsed_ms(start) < 2000); // not the 10 s backoff
  CHECK(client.stats().connect_failures == 0);
}

TEST_CASE("redis client: a database Redis refuses is auth_failed and counts a connect failure") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url() + "/99",
                                                   .command_timeout = 500ms,
                                                   .reconnect_backoff = 5s, // the second command comes within it
                                                   .max_reconnect_backoff = 5s});
  auto [ec, reply] = run_command(io, client, {"PING"});
  CHECK(ec == wandura::fleet_errc::auth_failed);
  CHECK(reply.text.find("DB index is out of range") != std::string::npos);
  CHECK(client.stats().connect_failures >= 1);
  // Within the reconnect backoff: not sent, and failed for the same refusal, not as a connection that failed.
  auto const [again, again_reply] = run_command(io, client, {"PING"});
  CHECK(again == wandura::fleet_errc::auth_failed);
  CHECK(again_reply.text == reply.text);
  CHECK(client.stats().connect_failures == 1);
}

TEST_CASE("redis client: AUTH from the URL, and a wrong password is auth_failed without the password in a message") {
  auto redis = test_support::start_redis_or_skip({"--requirepass", "s3cret-pw"});
  if (!redis) {
    return;
  }
  asio::io_context io;
  std::string const base = "redis://:s3cret-pw@127.0.0.1:" + std::to_string(redis->port()) + "/2";
  wandura::redis_client good(io.get_executor(), {.url = base, .command_timeout = 500ms});
  REQUIRE_FALSE(std::get<0>(run_command(io, good, {"SET", "k", "in-db-2"})));
  CHECK(good.server_name() == "127.0.0.1:" + std::to_string(redis->port()) + "/2");

  std::string const wrong = "redis://:wrong-pw@127.0.0.1:" + std::to_string(redis->port());
  wandura::redis_client bad(io.get_executor(), {.url = wrong, .command_timeout = 500ms});
  auto [ec, reply] = run_command(io, bad, {"GET", "k"});
  CHECK(ec == wandura::fleet_errc::auth_failed);
  CHECK(reply.is_error()); // the refusal, for whoever reports the failure
  CHECK(reply.text.starts_with("WRONGPASS"));
  CHECK(reply.text.find("wrong-pw") == std::string::npos);
  try {
    test_support::run(io, bad.command({"GET", "k"}));
    FAIL("a command with a refused password succeeded");
  } catch (wandura::error const& e) {
    CHECK(std::string(e.what()).find("wrong-pw") == std::string::npos);
  }
}

TEST_CASE("redis client: a refused AUTH is a failed connect: it is not counted as established, and the reconnect "
          "waits double as after a refused connect instead of starting again at the first") {
  auto redis = test_support::start_redis_or_skip({"--requirepass", "s3cret-pw"});
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client bad(io.get_executor(), {.url = "redis://:wrong-pw@127.0.0.1:" + std::to_string(redis->port()),
                                                .command_timeout = 500ms,
                                                .reconnect_backoff = 50ms,
                                                .max_reconnect_backoff = 800ms});
  // A command every 5 ms for 1.6 s, as a fleet's parts probing: connects are tried at 0, 50, 150, 350, 750 and
  // 1550 ms when the waits double; about every 50 ms when each refused AUTH starts them again at the first.
  auto const start = std::chrono::steady_clock::now();
  while (elapsed_ms(start) < 1600) {
    auto [ec, reply] = run_command(io, bad, {"PING"});
    REQUIRE(ec == wandura::fleet_errc::auth_failed); // within the backoff too: what the last connect met
    REQUIRE(reply.text.starts_with("WRONGPASS"));
    test_support::wait(io, 5ms);
  }
  auto const stats = bad.stats();
  CHECK(stats.connect_failures >= 4);
  CHECK(stats.connect_failures <= 8);
  CHECK(stats.connects == 0); // no connection was ever ready for a command
  CHECK(stats.disconnects == 0);
}

TEST_CASE("redis client: behind a stalled redis, commands beyond max_pending fail at once as overloaded") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 20ms, .max_pending = 2});
  REQUIRE_FALSE(std::get<0>(run_command(io, client, {"PING"})));
  redis->pause();
  CHECK(std::get<0>(run_command(io, client, {"PING"})) == wandura::errc::attempt_timeout);
  CHECK(std::get<0>(run_command(io, client, {"PING"})) == wandura::errc::attempt_timeout);
  CHECK(client.stats().pending == 2); // timed out, still owed a reply by the stalled server
  auto const start = std::chrono::steady_clock::now();
  auto [ec, reply] = run_command(io, client, {"PING"});
  CHECK(ec == wandura::fleet_errc::overloaded);
  CHECK(elapsed_ms(start) < 15); // not sent: no wait for the timeout
  redis->resume();
  CHECK(ping_until_up(io, client, 2s) > 0); // the owed replies arrive and are dropped
  CHECK(client.stats().pending == 0);
}

TEST_CASE("redis client: partial and total cancellation complete a pending command at once with operation_aborted, "
          "its late reply dropped") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  for (auto const type : {asio::cancellation_type::partial, asio::cancellation_type::total}) {
    INFO("cancellation type " << static_cast<unsigned>(type));
    asio::io_context io;
    wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
    REQUIRE_FALSE(std::get<0>(run_until_ok(io, client, {"PING"})));
    redis->pause(); // the reply would never come before the 5 s timeout

    asio::cancellation_signal signal;
    auto const start = std::chrono::steady_clock::now();
    auto [ec, reply] = test_support::run(io, [&]() -> asio::awaitable<outcome> {
      asio::steady_timer later(io, 20ms);
      later.async_wait([&](std::error_code) { signal.emit(type); });
      std::array<std::string_view, 2> echo{"ECHO", "cancelled"};
      co_return co_await client.async_command(
          echo, asio::bind_cancellation_slot(signal.slot(), asio::experimental::as_tuple(asio::use_awaitable)));
    }());
    auto const took = elapsed_ms(start);
    redis->resume();
    CHECK(ec == asio::error::operation_aborted);
    CHECK(took < 1000);
    CHECK(client.stats().timeouts == 0);
    // The cancelled ECHO was written and Redis answers it after SIGCONT: that reply must not reach the next command.
    auto [next_ec, next] = run_until_ok(io, client, {"ECHO", "next"});
    REQUIRE_FALSE(next_ec);
    CHECK(next.text == "next");
  }
}

TEST_CASE("redis client: a URL naming a user with an empty password logs in as that user, never as the default one") {
  // `redis://user:@host` (`redis://word@host` is a password alone, as redis-cli reads it): AUTH user "" (a nopass
  // user accepts it; one with a password refuses it as auth_failed), not the default user's session without AUTH.
  auto redis = test_support::start_redis_or_skip({"--user", "fleet-nopass", "on", "nopass", "~*", "&*", "+@all",
                                                  "--user", "fleet-worker", "on", ">acl-s3cret", "~*", "&*", "+@all"});
  if (!redis) {
    return;
  }
  asio::io_context io;
  auto const at = "@127.0.0.1:" + std::to_string(redis->port());
  wandura::redis_client client(io.get_executor(), {.url = "redis://fleet-nopass:" + at, .command_timeout = 500ms});
  auto [ok_ec, who] = run_until_ok(io, client, {"ACL", "WHOAMI"});
  REQUIRE_FALSE(ok_ec);
  CHECK(who.text == "fleet-nopass");
  wandura::redis_client refused(io.get_executor(), {.url = "redis://fleet-worker:" + at, .command_timeout = 500ms});
  auto [ec, reply] = run_command(io, refused, {"ACL", "WHOAMI"});
  CHECK(ec == wandura::fleet_errc::auth_failed);
}

TEST_CASE("redis client: an ACL user:password URL authenticates as that user, and a wrong password or user is "
          "auth_failed") {
  // The default user is off: only the ACL user can run anything.
  auto redis = test_support::start_redis_or_skip({"--user", "fleet-worker", "on", ">acl-s3cret", "~*", "&*", "+@all",
                                                  "--user", "fleet-odd", "on", ">p:w@rd/%", "~*", "&*", "+@all",
                                                  "--user", "default", "off"});
  if (!redis) {
    return;
  }
  asio::io_context io;
  auto const at = "@127.0.0.1:" + std::to_string(redis->port());
  wandura::redis_client good(io.get_executor(),
                             {.url = "redis://fleet-worker:acl-s3cret" + at + "/3", .command_timeout = 500ms});
  auto [who_ec, who] = run_until_ok(io, good, {"ACL", "WHOAMI"});
  REQUIRE_FALSE(who_ec);
  CHECK(who.text == "fleet-worker");
  REQUIRE_FALSE(std::get<0>(run_until_ok(io, good, {"SET", "k", "by-acl-user"})));
  CHECK(std::get<1>(run_until_ok(io, good, {"GET", "k"})).text == "by-acl-user");
  CHECK(good.server_name() == "127.0.0.1:" + std::to_string(redis->port()) + "/3"); // no credentials in it

  // A user and password with URL delimiters in them, percent-encoded in the URL, reach AUTH decoded.
  wandura::redis_client odd(io.get_executor(),
                            {.url = "redis://fleet%2Dodd:p%3Aw%40rd%2F%25" + at, .command_timeout = 500ms});
  auto [odd_ec, odd_who] = run_until_ok(io, odd, {"ACL", "WHOAMI"});
  REQUIRE_FALSE(odd_ec);
  CHECK(odd_who.text == "fleet-odd");

  for (std::string const credentials : {"fleet-worker:wrong-pw", "nobody:acl-s3cret"}) {
    INFO(credentials);
    wandura::redis_client bad(io.get_executor(), {.url = "redis://" + credentials + at, .command_timeout = 500ms});
    auto [ec, reply] = run_command(io, bad, {"GET", "k"});
    CHECK(ec == wandura::fleet_errc::auth_failed);
    CHECK(bad.stats().connect_failures >= 1);
    try {
      test_support::run(io, bad.command({"GET", "k"}));
      FAIL("a command with refused credentials succeeded");
    } catch (wandura::error const& e) {
      CHECK(std::string(e.what()).find("wrong-pw") == std::string::npos);
      CHECK(std::string(e.what()).find("acl-s3cret") == std::string::npos);
    }
  }
}
