#include "wandura/playback/detail/inflight_table.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <catch2/catch.hpp>

using wandura::detail::inflight_table;
using wandura::detail::joined_result;

namespace {

/// A gate that coroutines wait on until the test opens it: no real time involved.
struct gate {
  explicit gate(asio::any_io_executor ex) : timer(std::make_shared<asio::steady_timer>(ex)) {
    timer->expires_at(asio::steady_timer::time_point::max());
  }
  asio::awaitable<void> wait() const {
    std::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  void open() const { timer->cancel(); }
  std::shared_ptr<asio::steady_timer> timer;
};

/// Runs handlers until `done()` or nothing is left; bounded.
template <class Done> void run_until(asio::io_context& ctx, Done done) {
  for (int i = 0; i < 10000 && !done(); ++i) {
    if (ctx.poll_one() == 0) {
      break;
    }
  }
}

using table_t = inflight_table<std::string, int>;

} // namespace

TEST_CASE("coalescing: concurrent identical calls share one operation and its result") {
  asio::io_context ctx;
  table_t table;
  gate g(ctx.get_executor());
  auto starts = std::make_shared<int>(0);
  std::vector<std::optional<joined_result<int>>> results(3);
  for (auto& r : results) {
    asio::co_spawn(
        ctx,
        [&table, &r, g, starts]() -> asio::awaitable<void> {
          // Named before the co_await: see the GCC 12 note of run_or_join.
          std::string key = "viewer|device|film|4|play";
          auto op = [g, starts]() -> asio::awaitable<int> {
            ++*starts;
            co_await g.wait();
            co_return 42;
          };
          r = co_await table.run_or_join(key, op);
        },
        asio::detached);
  }
  run_until(ctx, [&] { return table.waiting() == 3; });
  CHECK(table.waiting() == 3);
  CHECK(table.in_flight() == 1);
  CHECK(*starts == 1);
  g.open();
  ctx.run();
  int coalesced = 0;
  for (auto const& r : results) {
    REQUIRE(r);
    CHECK(r->value == 42);
    coalesced += r->coalesced ? 1 : 0;
  }
  CHECK(coalesced == 2);
  CHECK(*starts == 1);
  CHECK(table.in_flight() == 0);
}

TEST_CASE("coalescing: different keys run separately, and a finished key starts afresh") {
  asio::io_context ctx;
  table_t table;
  auto starts = std::make_shared<int>(0);
  std::vector<int> values;
  auto call = [&](std::string key, int value) {
    asio::co_spawn(
        ctx,
        [&table, &values, starts, key, value]() -> asio::awaitable<void> {
          auto op = [starts, value]() -> asio::awaitable<int> {
            ++*starts;
            co_return value;
          };
          auto r = co_await table.run_or_join(key, op);
          values.push_back(r.value);
        },
        asio::detached);
  };
  call("a", 1);
  call("b", 2);
  ctx.run();
  CHECK(*starts == 2);
  ctx.restart();
  call("a", 3);
  ctx.run();
  CHECK(*starts == 3);
  REQUIRE(values.size() == 3);
  CHECK(values[2] == 3);
}

TEST_CASE("coalescing: the operation's exception reaches every waiter") {
  asio::io_context ctx;
  table_t table;
  gate g(ctx.get_executor());
  int failures = 0;
  for (int i = 0; i < 2; ++i) {
    asio::co_spawn(
        ctx,
        [&table, &failures, g]() -> asio::awaitable<void> {
          std::string key = "k";
          auto op = [g]() -> asio::awaitable<int> {
            co_await g.wait();
            throw std::runtime_error("HTTP 401");
          };
          try {
            (void)co_await table.run_or_join(key, op);
          } catch (std::runtime_error const& e) {
            if (std::string(e.what()) == "HTTP 401") {
              ++failures;
            }
          }
        },
        asio::detached);
  }
  run_until(ctx, [&] { return table.waiting() == 2; });
  g.open();
  ctx.run();
  CHECK(failures == 2);
  CHECK(table.in_flight() == 0);
}

TEST_CASE("coalescing: a cancelled waiter leaves at once, the operation completes for the others") {
  asio::io_context ctx;
  table_t table;
  gate g(ctx.get_executor());
  auto starts = std::make_shared<int>(0);
  auto finished = std::make_shared<bool>(false);
  asio::cancellation_signal cancel_first;
  std::optional<std::error_code> first_error;
  std::optional<int> second_value;
  auto op = [g, starts, finished]() -> asio::awaitable<int> {
    ++*starts;
    co_await g.wait();
    *finished = true;
    co_return 7;
  };
  // The first caller starts the operation, then is cancelled while waiting.
  asio::co_spawn(
      ctx,
      [&table, &first_error, op]() -> asio::awaitable<void> {
        std::string key = "k";
        try {
          (void)co_await table.run_or_join(key, op);
          first_error = std::error_code();
        } catch (asio::system_error const& e) {
          first_error = e.code();
        }
      },
      asio::bind_cancellation_slot(cancel_first.slot(), asio::detached));
  asio::co_spawn(
      ctx,
      [&table, &second_value, op]() -> asio::awaitable<void> {
        std::string key = "k";
        second_value = (co_await table.run_or_join(key, op)).value;
      },
      asio::detached);
  run_until(ctx, [&] { return table.waiting() == 2; });
  REQUIRE(table.waiting() == 2);
  cancel_first.emit(asio::cancellation_type::terminal);
  run_until(ctx, [&] { return first_error.has_value(); });
  REQUIRE(first_error);
  CHECK(*first_error == asio::error::operation_aborted);
  CHECK_FALSE(*finished);
  CHECK(table.waiting() == 1);
  g.open();
  ctx.run();
  CHECK(*finished);
  CHECK(second_value == 7);
  CHECK(*starts == 1);
}

TEST_CASE("coalescing: many callers on two threads share one operation") {
  asio::thread_pool pool(2);
  table_t table;
  gate g(pool.get_executor());
  auto starts = std::make_shared<std::atomic<int>>(0);
  std::atomic<int> got{0};
  std::atomic<int> joined{0};
  constexpr int callers = 50;
  for (int i = 0; i < callers; ++i) {
    asio::co_spawn(
        pool,
        [&table, &got, &joined, g, starts]() -> asio::awaitable<void> {
          std::string key = "k";
          auto op = [g, starts]() -> asio::awaitable<int> {
            ++*starts;
            co_await g.wait();
            co_return 9;
          };
          auto r = co_await table.run_or_join(key, op);
          if (r.value == 9) {
            ++got;
          }
          if (r.coalesced) {
            ++joined;
          }
        },
        asio::detached);
  }
  for (int i = 0; i < 5000 && table.waiting() < callers; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(table.waiting() == callers);
  asio::post(pool, [g] { g.open(); });
  pool.join();
  CHECK(got == callers);
  CHECK(joined == callers - 1);
  CHECK(*starts == 1);
}
