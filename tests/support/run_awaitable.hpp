// Runs one awaitable to completion on an io_context, from a test: the transport tests' driver.
#pragma once

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

} // namespace test_support
