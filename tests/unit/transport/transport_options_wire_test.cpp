// What transport_options.hpp promises on the wire, against tests/support/test_http_server.hpp on loopback: the
// connection pool's limits (total, idle and its default, idle age), TCP keep-alive as the kernel shows it, an empty
// `user_agent` and a body cap of 0. Real sockets and real time: libcurl's pool runs on the steady clock, which no
// fake clock replaces.
#include "wandura/transport/transport_options.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/transport/transport.hpp"

#include "run_awaitable.hpp"
#include "test_http_server.hpp"

namespace {

using namespace std::chrono_literals;
using test_support::run;
using wandura::testing::server_behaviour;
using wandura::testing::test_http_server;

wandura::http_request get(std::string url) {
  wandura::http_request r;
  r.method = wandura::http_method::get;
  r.url = std::move(url);
  return r;
}

/// Sends `n` copies of `request` at once and waits (bounded) for all; how many got an answer without error.
int send_together(asio::io_context& io, wandura::transport& tr, wandura::http_request const& request, int n) {
  return run(io, [&]() -> asio::awaitable<int> {
    auto ex = co_await asio::this_coro::executor;
    int good = 0;
    int done = 0;
    for (int i = 0; i < n; ++i) {
      asio::co_spawn(ex, tr.send_attempt(request, {}), [&](std::exception_ptr, wandura::attempt_result r) {
        good += r.error ? 0 : 1;
        ++done;
      });
    }
    asio::steady_timer t(ex);
    for (int i = 0; i < 1000 && done < n; ++i) {
      t.expires_after(10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return good;
  }());
}

/// A server whose answers take about 115 ms (the body dripped 10 bytes every 5 ms), so that requests sent together
/// overlap and each needs a connection of its own.
void make_slow(test_http_server& server) {
  server.set_behaviour(server_behaviour::slow_body);
  server.set_chunk_delay(5ms);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

} // namespace

TEST_CASE("transport options: max_total_connections caps the connections of concurrent requests") {
  // transport_options.hpp, max_total_connections: "Most connections open at a time over all hosts
  // (CURLMOPT_MAX_TOTAL_CONNECTIONS). 0 means no limit." Eight requests at once to one host whose per-host limit is
  // off: 2 connections with a total of 2, 8 without a total limit.
  long const total = GENERATE(2L, 0L);
  CAPTURE(total);
  test_http_server server;
  make_slow(server);
  asio::io_context io;
  wandura::transport_options options;
  options.max_connections_per_host = 0;
  options.max_total_connections = total;
  wandura::transport tr(io.get_executor(), options);
  CHECK(send_together(io, tr, get(server.url()), 8) == 8);
  CHECK(server.connections_accepted() == (total == 2 ? 2U : 8U));
}

TEST_CASE("transport options: max_idle_connections keeps that many idle connections for reuse, closing the rest") {
  // transport_options.hpp, max_idle_connections: "Idle keep-alive connections kept for reuse (CURLMOPT_MAXCONNECTS);
  // the oldest beyond it are closed." Three requests at once open three connections; with 1 kept, the next three
  // at once reuse one and open two; with 3 kept, they reuse all three.
  long const kept = GENERATE(1L, 3L);
  CAPTURE(kept);
  test_http_server server;
  make_slow(server);
  asio::io_context io;
  wandura::transport_options options;
  options.max_idle_connections = kept;
  wandura::transport tr(io.get_executor(), options);
  auto const request = get(server.url());
  REQUIRE(send_together(io, tr, request, 3) == 3);
  REQUIRE(server.connections_accepted() == 3);
  CHECK(tr.stats().sockets_open == static_cast<std::uint64_t>(kept));
  REQUIRE(send_together(io, tr, request, 3) == 3);
  CHECK(server.connections_accepted() == (kept == 1 ? 5U : 3U));
}

TEST_CASE("transport options: max_idle_connections 0 keeps the larger of the connection limits and 64") {
  // transport_options.hpp, max_idle_connections: "0: the larger of `max_total_connections`,
  // `max_connections_per_host` and 64." 70 requests at once, each on its own connection, then 70 more: with a limit
  // of 80 (per host or in total) every connection is kept and reused; with neither limit set, 64 are kept and 6
  // more are opened.
  int const limit_kind = GENERATE(0, 1, 2); // 0: 80 per host; 1: 80 in total; 2: no limit at all
  CAPTURE(limit_kind);
  test_http_server server;
  make_slow(server);
  asio::io_context io;
  wandura::transport_options options;
  options.max_idle_connections = 0;
  if (limit_kind == 0) {
    options.max_connections_per_host = 80;
    options.max_total_connections = 0;
  } else if (limit_kind == 1) {
    options.max_connections_per_host = 0;
    options.max_total_connections = 80;
  } else {
    options.max_connections_per_host = 0; // no limit: 70 connections at once, of which 64 are kept
    options.max_total_connections = 0;
  }
  wandura::transport tr(io.get_executor(), options);
  auto const request = get(server.url());
  REQUIRE(send_together(io, tr, request, 70) == 70);
  REQUIRE(server.connections_accepted() == 70);
  bool const all_kept = limit_kind != 2;
  CHECK(tr.stats().sockets_open == (all_kept ? 70U : 64U));
  REQUIRE(send_together(io, tr, request, 70) == 70);
  CHECK(server.connections_accepted() == (all_kept ? 70U : 76U));
}

TEST_CASE("transport options: a connection idle longer than max_idle_age is not reused") {
  // transport_options.hpp, max_idle_age: "Close a pooled connection once it has been idle this long
  // (CURLOPT_MAXAGE_CONN). Seconds." libcurl counts whole seconds and closes a connection idle for more than the
  // age: after 2.2 s idle, a connection is reused under the default age (55 s) and not under an age of 1 s.
  std::chrono::seconds const age = GENERATE(std::chrono::seconds(1), std::chrono::seconds(55));
  CAPTURE(age.count());
  test_http_server server;
  asio::io_context io;
  wandura::transport_options options;
  if (age != std::chrono::seconds(55)) {
    options.max_idle_age = age;
  }
  wandura::transport tr(io.get_executor(), options);
  auto const request = get(server.url());
  REQUIRE_FALSE(run(io, tr.send_attempt(request, {})).error);
  REQUIRE(server.connections_accepted() == 1);
  std::this_thread::sleep_for(2200ms); // real time: libcurl reads the steady clock
  REQUIRE_FALSE(run(io, tr.send_attempt(request, {})).error);
  CHECK(server.connections_accepted() == (age == std::chrono::seconds(1) ? 2U : 1U));
}

TEST_CASE("transport options: an empty user_agent sends no User-Agent header") {
  // transport_options.hpp, user_agent: "`User-Agent` header sent with every request unless the request sets its
  // own. Empty: none." The default sends one, as a control.
  bool const empty = GENERATE(true, false);
  CAPTURE(empty);
  test_http_server server;
  asio::io_context io;
  wandura::transport_options options;
  if (empty) {
    options.user_agent.clear();
  }
  wandura::transport tr(io.get_executor(), options);
  for (auto method : {wandura::http_method::get, wandura::http_method::post}) {
    auto request = get(server.url("/ua"));
    request.method = method;
    request.body = method == wandura::http_method::post ? "{}" : "";
    REQUIRE_FALSE(run(io, tr.send_attempt(request, {})).error);
    auto const head = lower(server.last_request_head());
    CAPTURE(head);
    CHECK((head.find("user-agent") == std::string::npos) == empty);
  }
}

TEST_CASE("transport options: max_response_bytes 0 accepts an empty body announced by Content-Length: 0") {
  // transport_options.hpp, max_response_bytes: "0 ... accepts empty bodies only". transport_test.cpp checks a
  // chunked empty body and a full one; this is the plain `Content-Length: 0` answer, and a one-byte body.
  test_http_server server;
  asio::io_context io;
  wandura::transport_options options;
  options.max_response_bytes = 0;
  wandura::transport tr(io.get_executor(), options);
  auto const request = get(server.url());
  server.set_body("");
  auto const empty = run(io, tr.send_attempt(request, {}));
  REQUIRE_FALSE(empty.error);
  CHECK(empty.response.status == 200);
  CHECK(empty.response.body.empty());
  server.set_body("x");
  CHECK(run(io, tr.send_attempt(request, {})).error == wandura::errc::response_too_large);
}

namespace {

/// The kernel's timer on the client end of an established loopback connection to `server_port`, as
/// /proc/net/tcp shows it: which timer runs (0 none, 1 retransmit, 2 keep-alive, ...) and when it fires, in
/// clock ticks (USER_HZ, 100 a second). Fails the test unless there is exactly one such connection.
struct tcp_timer {
  int kind = -1;
  long ticks_left = -1;
};

tcp_timer client_timer_to(unsigned short server_port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line); // the header
  std::vector<tcp_timer> found;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer;
    fields >> slot >> local >> remote >> state >> queues >> timer;
    auto const colon = remote.find(':');
    if (state != "01" || colon == std::string::npos ||
        std::stoul(remote.substr(colon + 1), nullptr, 16) != server_port) {
      continue;
    }
    auto const sep = timer.find(':');
    REQUIRE(sep != std::string::npos);
    found.push_back({std::stoi(timer.substr(0, sep), nullptr, 16), std::stol(timer.substr(sep + 1), nullptr, 16)});
  }
  REQUIRE(found.size() == 1);
  return found.front();
}

} // namespace

TEST_CASE("transport options: tcp_keepalive arms the kernel's keep-alive timer on a pooled connection, after "
          "tcp_keepalive_idle") {
  // transport_options.hpp, tcp_keepalive: "Send TCP keep-alive probes on idle connections"; tcp_keepalive_idle:
  // "Idle time before the first keep-alive probe ... Seconds." The client end of the idle pooled connection is read
  // in /proc/net/tcp: with keep-alive on, its keep-alive timer runs and fires within the idle time (60 s by
  // default, 30 s set); off, no timer runs. (tcp_keepalive_interval only matters after an unanswered probe, which
  // loopback never leaves: not observable here.)
  int const setting = GENERATE(0, 1, 2); // 0: defaults; 1: idle 30 s; 2: keep-alive off
  CAPTURE(setting);
  test_http_server server;
  asio::io_context io;
  wandura::transport_options options;
  if (setting == 1) {
    options.tcp_keepalive_idle = std::chrono::seconds(30);
  } else if (setting == 2) {
    options.tcp_keepalive = false;
  }
  wandura::transport tr(io.get_executor(), options);
  REQUIRE_FALSE(run(io, tr.send_attempt(get(server.url()), {})).error);
  REQUIRE(tr.stats().sockets_open == 1);
  auto const timer = client_timer_to(server.port());
  CAPTURE(timer.kind, timer.ticks_left);
  if (setting == 2) {
    CHECK(timer.kind == 0);
  } else {
    long const idle_ticks = setting == 1 ? 3000 : 6000;
    CHECK(timer.kind == 2);
    CHECK(timer.ticks_left <= idle_ticks);
    CHECK(timer.ticks_left > idle_ticks - 1000); // read within 10 s of the request
  }
}
