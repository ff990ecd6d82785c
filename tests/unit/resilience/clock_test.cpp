#include "wandura/resilience/clock.hpp"

#include <optional>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE("real clock: a short sleep ends no earlier than its wake-up time") {
  wandura::real_clock clock;
  asio::io_context io;
  auto const start = clock.now();
  std::optional<std::error_code> result;
  asio::co_spawn(io, clock.sleep_until(start + 20ms), [&](std::exception_ptr e, std::error_code ec) {
    REQUIRE_FALSE(e);
    result = ec;
  });
  io.run();
  REQUIRE(result);
  CHECK_FALSE(*result);
  CHECK(clock.now() - start >= 20ms);
}

TEST_CASE("real clock: cancelling a long sleep ends it at once with operation_aborted") {
  wandura::real_clock clock;
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<std::error_code> result;
  auto const start = clock.now();
  asio::co_spawn(io, clock.sleep_until(start + 1h),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, std::error_code ec) {
                   REQUIRE_FALSE(e);
                   result = ec;
                 }));
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  io.run(); // returns only once the sleep has completed
  REQUIRE(result);
  CHECK(*result == asio::error::operation_aborted);
  CHECK(clock.now() - start < 30s); // generous: the point is "not one hour"
}
