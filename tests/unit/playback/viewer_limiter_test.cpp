#include "playback/viewer_limiter.hpp"

#include <stdexcept>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/manual_clock.hpp"

#include "wandura/error.hpp"

using namespace std::chrono;
using wandura::detail::viewer_limiter;

namespace {

/// The limiter's time source, hand-stepped.
struct fake_steady_clock {
  std::shared_ptr<wandura::testing::manual_clock> source = std::make_shared<wandura::testing::manual_clock>();
  void advance(steady_clock::duration d) { source->advance(d); }
};

/// Drives a limit through the public `viewer_limit` interface, each `acquire` run to its end on a private
/// io_context.
class through_interface {
public:
  explicit through_interface(wandura::viewer_limit& limit) : limit_(limit) {}

  wandura::viewer_limit::decision try_acquire(std::string viewer_ref, std::uint32_t tickets = 1) {
    std::optional<wandura::viewer_limit::decision> out;
    asio::co_spawn(io_, limit_.acquire(std::move(viewer_ref), tickets),
                   [&](std::exception_ptr e, wandura::viewer_limit::decision d) {
                     if (e) {
                       std::rethrow_exception(e);
                     }
                     out = d;
                   });
    io_.restart();
    io_.run();
    if (!out) { // not REQUIRE: this runs on worker threads too, and Catch2's assertions are not thread-safe
      throw std::logic_error("the limit's acquire did not complete");
    }
    return *out;
  }
  void release(std::string_view viewer_ref, std::uint32_t tickets) {
    limit_.release(viewer_ref, tickets, wandura::viewer_limit::account::primary);
  }

private:
  wandura::viewer_limit& limit_;
  asio::io_context io_;
};

} // namespace

TEST_CASE("viewer limit, local: an idle viewer may take a whole minute's allowance at once, then waits for refill") {
  fake_steady_clock clock;
  viewer_limiter local({.tickets_per_minute = 6, .time_source = clock.source});
  through_interface limiter(local);
  CHECK(limiter.try_acquire("viewer-a", 3).allowed);
  CHECK(limiter.try_acquire("viewer-a", 3).allowed);
  auto refused = limiter.try_acquire("viewer-a", 1);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after == seconds(10)); // 6 a minute: one every 10 s
  clock.advance(seconds(9));
  CHECK_FALSE(limiter.try_acquire("viewer-a", 1).allowed);
  clock.advance(seconds(1));
  CHECK(limiter.try_acquire("viewer-a", 1).allowed);
  CHECK_FALSE(limiter.try_acquire("viewer-a", 1).allowed);
}

TEST_CASE("viewer limit, local: all or nothing for a batch, and the wait covers the missing tickets") {
  fake_steady_clock clock;
  viewer_limiter local({.tickets_per_minute = 6, .time_source = clock.source});
  through_interface limiter(local);
  REQUIRE(limiter.try_acquire("v", 5).allowed);
  auto refused = limiter.try_acquire("v", 3);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after == seconds(20));
  CHECK(limiter.try_acquire("v", 1).allowed); // the refused batch took nothing
  CHECK(limiter.try_acquire("v", 0).allowed);
  CHECK_FALSE(limiter.try_acquire("v", 7).allowed); // larger than the allowance: never
}

TEST_CASE("viewer limit, local: viewers are independent and released tickets come back, up to the capacity") {
  fake_steady_clock clock;
  viewer_limiter local({.tickets_per_minute = 3, .time_source = clock.source});
  through_interface limiter(local);
  REQUIRE(limiter.try_acquire("a", 3).allowed);
  CHECK(limiter.try_acquire("b", 3).allowed);
  CHECK_FALSE(limiter.try_acquire("a", 1).allowed);
  limiter.release("a", 2); // two items were answered from the cache
  CHECK(limiter.try_acquire("a", 2).allowed);
  CHECK_FALSE(limiter.try_acquire("a", 1).allowed);
  limiter.release("a", 100);
  CHECK(limiter.try_acquire("a", 3).allowed);
  CHECK_FALSE(limiter.try_acquire("a", 1).allowed);
  limiter.release("unknown", 1);
  CHECK(local.tracked_viewers() == 2);
}

TEST_CASE("viewer limit, local: memory is bounded by forgetting the least recently seen viewer") {
  fake_steady_clock clock;
  viewer_limiter local({.tickets_per_minute = 1, .max_viewers = 2, .shards = 1, .time_source = clock.source});
  through_interface limiter(local);
  REQUIRE(limiter.try_acquire("a").allowed);
  REQUIRE(limiter.try_acquire("b").allowed);
  CHECK_FALSE(limiter.try_acquire("a").allowed); // a is now the most recently seen
  REQUIRE(limiter.try_acquire("c").allowed);     // evicts b
  CHECK(local.tracked_viewers() == 2);
  CHECK_FALSE(limiter.try_acquire("a").allowed); // a was kept, still empty
  CHECK(limiter.try_acquire("b").allowed);       // b was forgotten: a fresh allowance
  for (int i = 0; i < 1000; ++i) {
    (void)limiter.try_acquire("viewer-" + std::to_string(i));
  }
  CHECK(local.tracked_viewers() == 2);
}

TEST_CASE("viewer limit, local: a request larger than the allowance is told the time of a full refill") {
  fake_steady_clock clock;
  viewer_limiter local({.tickets_per_minute = 1e-300, .time_source = clock.source});
  through_interface limiter(local);
  auto refused = limiter.try_acquire("v", 1);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after >= seconds(60));
  CHECK(refused.retry_after <= milliseconds(60'001));
}

TEST_CASE("viewer limit, local: a non-positive limit is refused at construction") {
  CHECK_THROWS_AS(viewer_limiter({.tickets_per_minute = 0}), wandura::error);
  CHECK_THROWS_AS(viewer_limiter({.tickets_per_minute = -5}), wandura::error);
}

TEST_CASE("viewer limit, local: concurrent callers never get more than the allowance") {
  fake_steady_clock clock; // time does not move: exactly the allowance may be taken
  viewer_limiter local({.tickets_per_minute = 100, .max_viewers = 1000, .time_source = clock.source});
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      through_interface limiter(local); // one io_context per thread, one limit for all
      for (int i = 0; i < 200; ++i) {
        if (limiter.try_acquire("shared-viewer").allowed) {
          ++granted;
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  CHECK(granted == 100);
}
