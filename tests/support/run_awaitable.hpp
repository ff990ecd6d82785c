// Runs one awaitable to completion on an io_context, from a test: the transport tests' driver.
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

namespace test_support {

/// Runs `aw` on `io` with `threads` threads until it completes; rethrows what it threw.
template <class T>
T run(asio::io_context& io, asio::awaitable<T> aw, int threads = 1) {
  std::optional<T> result;
  std::exception_ptr error;
  asio::co_spawn(io, std::move(aw), [&](std::exception_ptr e, T value) {
    error = e;
    result = std::move(value);
    io.stop();
  });
  io.restart();
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) {
    pool.emplace_back([&] { io.run(); });
  }
  io.run();
  for (auto& t : pool) {
    t.join();
  }
  if (error) {
    std::rethrow_exception(error);
  }
  return std::move(*result);
}

/// Runs `io` in 10 ms slices until `done()` holds or `limit` has passed (a bound, so that a test that fails ends);
/// returns `done()`. The io_context may run out of work between slices: each slice restarts it.
template <class Predicate>
bool run_until(asio::io_context& io, Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  for (auto left = limit; !done() && left.count() > 0; left -= std::chrono::milliseconds(10)) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return done();
}

/// Waits, in 10 ms sleeps, until `done()` holds or `limit` has passed, for a condition another thread makes true;
/// returns `done()`.
template <class Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  for (auto left = limit; !done() && left.count() > 0; left -= std::chrono::milliseconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

} // namespace test_support
