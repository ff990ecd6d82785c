// What the fleet integration tests share: a private redis-server or a clear skip, and a bounded runner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "redis_server.hpp"
#include "run_awaitable.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace test_support {

/// Whether `operation()` throws `wandura::error` with `errc::invalid_argument` (false when it returns, or throws
/// anything else).
template <class Operation> bool refused_as_invalid(Operation&& operation) {
  try {
    std::forward<Operation>(operation)();
  } catch (wandura::error const& e) {
    return e.code() == wandura::errc::invalid_argument;
  }
  return false;
}

/// A running private redis-server, or null after a WARN saying why the test is skipped (binary absent only).
inline std::unique_ptr<redis_server> start_redis_or_skip(std::vector<std::string> extra_args = {}) {
  auto binary = redis_server::find_binary();
  if (!binary) {
    WARN("skipped: redis-server is not installed (not on PATH, WANDURA_REDIS_SERVER unset); "
         "scripts/install-deps.sh installs it");
    return nullptr;
  }
  return std::make_unique<redis_server>(*binary, std::move(extra_args));
}

/// `run` for an awaitable without a value.
inline void run(asio::io_context& io, asio::awaitable<void> aw) {
  run(io, [](asio::awaitable<void> inner) -> asio::awaitable<int> {
    co_await std::move(inner);
    co_return 0;
  }(std::move(aw)));
}

/// Milliseconds since `start` on the steady clock.
inline long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

/// Waits `d` of real time on `io` (the clients' timers and sockets keep running).
inline void wait(asio::io_context& io, std::chrono::milliseconds d) {
  run(io, [](std::chrono::milliseconds wait_for) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor, wait_for);
    co_await timer.async_wait(asio::use_awaitable);
  }(d));
}

/// Runs `io` in 5 ms steps until `done()` or `limit` passed; whether `done()` came true.
template <class Done>
bool wait_until(asio::io_context& io, Done done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto const start = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::steady_clock::now() - start > limit) {
      return false;
    }
    wait(io, std::chrono::milliseconds(5));
  }
  return true;
}

/// Waits on `io` until `cache`'s replica of which ticket keys exist is complete (its subscription live and the
/// keys read whole): from then on the commands its client sends are the test's own, and a lookup of a key no
/// process stored is answered absent without one.
inline bool keys_known(asio::io_context& io, wandura::shared_ticket_cache const& cache) {
  return wait_until(io, [&] { return cache.stats().known_keys_complete; });
}

/// One viewer on `device`, asking for episode 4 of the-heiress-returns as play.
inline wandura::ticket_identity viewer_on(std::string device) {
  return {"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", std::move(device), "the-heiress-returns", 4, "play"};
}

/// A fixed instant, `ms` after the epoch: scripts and local arithmetic on a hand-stepped clock.
inline std::chrono::system_clock::time_point at_ms(std::int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

/// Two connections to one server, as two processes of a fleet have (a generous timeout: not a fallback test).
struct two_processes {
  explicit two_processes(std::string const& url)
      : a(io.get_executor(), {.url = url, .command_timeout = std::chrono::milliseconds(500)}),
        b(io.get_executor(), {.url = url, .command_timeout = std::chrono::milliseconds(500)}) {}
  asio::io_context io;
  wandura::redis_client a;
  wandura::redis_client b;
};

/// What most ticket cache tests begin with: a private redis-server, two processes of a fleet (two clients on one
/// io_context) and each one's ticket cache of `org_demo`. Tests take its parts by name:
///
///     auto started = two_caches::start_or_skip();
///     if (!started) {
///       return;
///     }
///     auto& [redis, fleet, cache_a, cache_b] = *started;
struct two_caches {
  /// The server started, or null after the skip's WARN when redis-server is absent. @param a, b each cache's options.
  /// @param redis_args more of redis-server's options.
  static std::unique_ptr<two_caches> start_or_skip(wandura::ticket_cache_options const& a = {},
                                                   wandura::ticket_cache_options const& b = {},
                                                   std::vector<std::string> redis_args = {}) {
    auto server = start_redis_or_skip(std::move(redis_args));
    return server ? std::make_unique<two_caches>(std::move(server), a, b) : nullptr;
  }

  two_caches(std::unique_ptr<redis_server> server, wandura::ticket_cache_options const& a,
             wandura::ticket_cache_options const& b)
      : redis(std::move(server)), fleet(redis->url()), cache_a(fleet.a, "org_demo", a),
        cache_b(fleet.b, "org_demo", b) {}

  std::unique_ptr<redis_server> redis;
  two_processes fleet;
  wandura::shared_ticket_cache cache_a;
  wandura::shared_ticket_cache cache_b;
};

/// One command through `client`, throwing on failure: to look at or change what Redis holds.
inline wandura::redis_reply raw(asio::io_context& io, wandura::redis_client& client, std::vector<std::string> args) {
  return run(io, client.command(std::move(args)));
}

/// How many of `lines` start with `prefix`.
inline std::size_t count_starting(std::vector<std::string> const& lines, std::string_view prefix) {
  std::size_t n = 0;
  for (auto const& line : lines) {
    n += line.starts_with(prefix) ? 1U : 0U;
  }
  return n;
}

/// Runs `io.run()` (after `restart()`) on a thread of its own and waits at most `limit` for it to return by itself;
/// stops the io_context and reports false when it did not.
inline bool run_returns_within(asio::io_context& io, std::chrono::milliseconds limit) {
  std::atomic<bool> returned{false};
  io.restart();
  std::thread runner([&] {
    io.run();
    returned = true;
  });
  auto const until = std::chrono::steady_clock::now() + limit;
  while (!returned && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool const in_time = returned;
  if (!in_time) {
    io.stop();
  }
  runner.join();
  return in_time;
}

} // namespace test_support
