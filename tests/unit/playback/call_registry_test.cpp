#include "playback/call_registry.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "held_executor.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using wandura::detail::call_registry;
using wandura::detail::held_executor;

namespace {

struct fixture {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  call_registry calls;
  int started = 0;
  int finished = 0;  // operations that ran to their end
  int cancelled = 0; // operations that saw their cancellation
  /// What the callers' cancellation does when they are an operation's last waiter.
  call_registry::on_cancel on_cancel = call_registry::on_cancel::leave;

  /// An operation that sleeps `d` on the clock, then yields `value`; counts how it ended.
  asio::awaitable<int> work(std::chrono::milliseconds d, int value) {
    ++started;
    std::error_code ec;
    try {
      ec = co_await clock->sleep_until(clock->now() + d);
    } catch (std::system_error const& e) {
      ec = e.code();
    }
    if (ec) {
      ++cancelled;
      throw wandura::error(ec, "work: cancelled");
    }
    ++finished;
    co_return value;
  }

  /// One caller: joins or starts `key`, waits under `deadline` (from now), records its outcome.
  asio::awaitable<void> caller(std::optional<std::string> key, std::chrono::milliseconds op_time,
                               std::chrono::milliseconds deadline, std::vector<std::string>& out) {
    auto executor = co_await asio::this_coro::executor;
    auto const until = clock->now() + deadline;
    auto make = [&] { return work(op_time, 42); };
    auto finish = [](int v) { return v; };
    auto [op, joined] = calls.join_or_start<int>(std::move(key), executor, until, make, finish);
    std::error_code waited;
    auto target = op;
    co_await calls.async_wait(std::move(target), clock, until, on_cancel, false,
                              asio::redirect_error(asio::use_awaitable, waited));
    if (waited) {
      out.push_back(waited == asio::error::operation_aborted ? "aborted" : "deadline");
      co_return;
    }
    try {
      out.push_back(std::string(joined ? "joined " : "led ") + std::to_string(op->take()));
    } catch (wandura::error const& e) {
      out.push_back(std::string("error ") + e.code().message());
    }
  }

  /// `caller`, with `late` on the clock between being given the operation and waiting for it: the window in which,
  /// on a context run by several threads, another thread's caller may join and leave (or the first caller leave).
  asio::awaitable<void> late_caller(std::optional<std::string> key, std::chrono::milliseconds late,
                                    std::vector<std::string>& out) {
    auto executor = co_await asio::this_coro::executor;
    auto const until = clock->now() + 10s;
    auto make = [&] { return work(100ms, 42); };
    auto finish = [](int v) { return v; };
    auto [op, joined] = calls.join_or_start<int>(std::move(key), executor, until, make, finish);
    (void)co_await clock->sleep_until(clock->now() + late);
    std::error_code waited;
    auto target = op;
    co_await calls.async_wait(std::move(target), clock, until, on_cancel, false,
                              asio::redirect_error(asio::use_awaitable, waited));
    try {
      out.push_back(waited ? "late: " + waited.message()
                           : std::string(joined ? "late joined " : "late led ") + std::to_string(op->take()));
    } catch (wandura::error const& e) {
      out.push_back(std::string("late: error ") + e.code().message());
    }
  }

  void drive(std::size_t want, std::vector<std::string> const& out) {
    for (int i = 0; i < 100 && out.size() < want; ++i) {
      io.restart();
      io.poll();
      if (out.size() < want) {
        clock->advance_to_next_wakeup();
      }
    }
  }
};

} // namespace

TEST_CASE("call registry: concurrent callers with one key share one operation and its result") {
  fixture f;
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
  }
  f.drive(3, out);
  CHECK(out == std::vector<std::string>{"led 42", "joined 42", "joined 42"});
  CHECK(f.started == 1);
  CHECK(f.calls.in_flight() == 0);
}

TEST_CASE("call registry: an operation whose making throws is not left listed so its key starts afresh and idle "
          "comes") {
  // `make` may throw before anything started (out of memory for the work's frame, say): the caller gets the
  // exception, and the operation it listed must not stay, where later callers with its key would join an operation
  // that never ends and `async_wait_idle` would never complete.
  fixture f;
  auto const until = f.clock->now() + 10s;
  auto finish = [](int v) { return v; };
  auto failing = []() -> asio::awaitable<int> { throw std::bad_alloc(); };
  CHECK_THROWS_AS(f.calls.join_or_start<int>("k", f.io.get_executor(), until, failing, finish), std::bad_alloc);
  CHECK(f.calls.in_flight() == 0);
  bool idle = false;
  f.calls.async_wait_idle(asio::bind_executor(f.io, [&](std::error_code) { idle = true; }));
  f.io.poll();
  CHECK(idle);

  std::vector<std::string> out;
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
  f.drive(1, out);
  CHECK(out == std::vector<std::string>{"led 42"}); // started afresh, not joined
  CHECK(f.started == 1);
  CHECK(f.calls.in_flight() == 0);
}

TEST_CASE("call registry: operations without a key are never shared") {
  fixture f;
  std::vector<std::string> out;
  asio::co_spawn(f.io, f.caller(std::nullopt, 100ms, 10s, out), asio::detached);
  asio::co_spawn(f.io, f.caller(std::nullopt, 100ms, 10s, out), asio::detached);
  f.drive(2, out);
  CHECK(out == std::vector<std::string>{"led 42", "led 42"});
  CHECK(f.started == 2);
}

TEST_CASE("call registry: a cancelled waiter leaves at once, the operation goes on for the others") {
  fixture f;
  std::vector<std::string> out;
  asio::cancellation_signal signal;
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
  f.io.poll();
  REQUIRE(f.calls.waiting() == 2);
  signal.emit(asio::cancellation_type::terminal);
  f.drive(2, out);
  CHECK(out == std::vector<std::string>{"aborted", "joined 42"});
  CHECK(f.finished == 1);
  CHECK(f.cancelled == 0);
}

TEST_CASE("call registry: when the last waiter leaves, the operation is cancelled and nobody joins it") {
  fixture f;
  std::vector<std::string> out;
  asio::cancellation_signal signal;
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  f.io.poll();
  signal.emit(asio::cancellation_type::terminal);
  f.io.restart();
  f.io.poll();
  CHECK(out == std::vector<std::string>{"aborted"});
  CHECK(f.cancelled == 1);
  CHECK(f.finished == 0);
  CHECK(f.calls.in_flight() == 0);
  CHECK(f.clock->pending_sleeps() == 0);
  // The key is free again: the next caller starts afresh.
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
  f.drive(2, out);
  CHECK(out.back() == "led 42");
  CHECK(f.started == 2);
}

TEST_CASE("call registry: a last waiter that ends with its operation gets what the operation read before the "
          "cancellation came") {
  fixture f;
  f.on_cancel = call_registry::on_cancel::end_with_operation;
  std::vector<std::string> out;
  asio::cancellation_signal signal;
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  f.io.poll();
  REQUIRE(f.clock->pending_sleeps() == 1);

  SECTION("the answer is in: the cancellation comes behind it and does not undo it") {
    f.clock->advance(100ms); // the operation's wake is queued
    signal.emit(asio::cancellation_type::terminal);
    f.io.restart();
    f.io.poll();
    CHECK(out == std::vector<std::string>{"led 42"});
    CHECK(f.finished == 1);
    CHECK(f.cancelled == 0);
  }
  SECTION("no answer yet: the operation is cancelled and the waiter gets its end") {
    signal.emit(asio::cancellation_type::terminal);
    CHECK(out.empty()); // not at once: with the operation's end
    f.io.restart();
    f.io.poll();
    CHECK(out == std::vector<std::string>{"error Operation aborted."});
    CHECK(f.cancelled == 1);
    CHECK(f.clock->pending_sleeps() == 0);
    signal.emit(asio::cancellation_type::terminal); // a second emission finds nothing to do
    f.io.restart();
    f.io.poll();
    CHECK(out.size() == 1);
  }
  CHECK(f.calls.in_flight() == 0);
  // Forgotten by its key as it was cancelled: the next caller starts afresh.
  asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
  f.drive(2, out);
  CHECK(out.back() == "led 42");
  CHECK(f.started == 2);
}

TEST_CASE("call registry: a waiter that would end with its operation still leaves at once when others wait for it "
          "or at its own deadline") {
  fixture f;
  f.on_cancel = call_registry::on_cancel::end_with_operation;
  std::vector<std::string> out;

  SECTION("one of two: the other takes the result") {
    asio::cancellation_signal signal;
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(signal.slot(), asio::detached));
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::detached);
    f.io.poll();
    signal.emit(asio::cancellation_type::terminal);
    f.io.restart();
    f.io.poll();
    CHECK(out == std::vector<std::string>{"aborted"});
    f.drive(2, out);
    CHECK(out == std::vector<std::string>{"aborted", "joined 42"});
    CHECK(f.cancelled == 0);
  }
  SECTION("cancelled, then its own deadline passes before the operation ends") {
    // The operation ignores its cancellation for 5 s; the waiter's deadline (1 s) is earlier than the operation's.
    f.on_cancel = call_registry::on_cancel::end_with_operation;
    asio::cancellation_signal signal;
    auto stubborn = [&f, &out]() -> asio::awaitable<void> {
      auto executor = co_await asio::this_coro::executor;
      auto const until = f.clock->now() + 1s;
      auto make = [&f]() -> asio::awaitable<int> {
        ++f.started;
        co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
        (void)co_await f.clock->sleep_until(f.clock->now() + 5s);
        co_return 7;
      };
      auto [op, joined] =
          f.calls.join_or_start<int>("s", executor, f.clock->now() + 10s, make, [](int v) { return v; });
      (void)joined;
      std::error_code waited;
      co_await f.calls.async_wait(op, f.clock, until, f.on_cancel, false,
                                  asio::redirect_error(asio::use_awaitable, waited));
      out.push_back(waited == wandura::errc::deadline_exceeded ? "deadline" : waited ? "other" : "value");
    };
    auto const t0 = f.clock->now();
    asio::co_spawn(f.io, stubborn(), asio::bind_cancellation_slot(signal.slot(), asio::detached));
    f.io.poll();
    signal.emit(asio::cancellation_type::terminal);
    f.io.restart();
    f.io.poll();
    CHECK(out.empty());
    f.drive(1, out);
    CHECK(out == std::vector<std::string>{"deadline"});
    CHECK(f.clock->now() - t0 < 5s); // at the waiter's deadline, not the operation's end
    f.clock->advance(10s);
    f.io.restart();
    f.io.poll();
    CHECK(f.calls.in_flight() == 0);
  }
}

TEST_CASE("call registry: a joiner with a shorter deadline leaves at its own deadline") {
  fixture f;
  std::vector<std::string> out;
  asio::co_spawn(f.io, f.caller("k", 3s, 10s, out), asio::detached);
  asio::co_spawn(f.io, f.caller("k", 3s, 300ms, out), asio::detached);
  f.drive(1, out);
  CHECK(out == std::vector<std::string>{"deadline"});
  CHECK(f.clock->elapsed() == 300ms);
  f.drive(2, out);
  CHECK(out.back() == "led 42");
  CHECK(f.clock->elapsed() == 3s);
}

TEST_CASE("call registry: a joiner's deadline timer runs on its own context, not the operation's") {
  // The timer ran on the operation's executor: with the first caller on another io_context, which its caller left
  // and which then stopped running, the joiner waited past its deadline until that context ran again (a trial:
  // still waiting at 10 s with a deadline of 1.5 s). A joiner from another context whose deadline is the
  // operation's or later had no timer at all: the operation's deadline, kept on the stopped context, was its only one.
  auto const joiner_deadline = GENERATE(300ms, 10000ms, 10100ms);
  CAPTURE(joiner_deadline.count());
  asio::io_context other; // outlives the fixture: the clock's sleeps on it end when the fixture's clock goes
  fixture f;
  std::vector<std::string> out;
  asio::cancellation_signal leader_leaves;
  asio::co_spawn(other, f.caller("k", 30s, 10s, out),
                 asio::bind_cancellation_slot(leader_leaves.slot(), asio::detached));
  other.poll();
  asio::co_spawn(f.io, f.caller("k", 30s, joiner_deadline, out), asio::detached);
  f.io.poll();
  REQUIRE(f.calls.waiting() == 2);
  leader_leaves.emit(asio::cancellation_type::terminal);
  other.restart();
  other.poll(); // completes the leader; then `other` stops running
  REQUIRE(out == std::vector<std::string>{"aborted"});
  f.drive(2, out); // runs only the fixture's context
  CHECK(out == std::vector<std::string>{"aborted", "deadline"});
  CHECK(f.clock->elapsed() == joiner_deadline);
  // Nobody waits any more: the operation is cancelled once its own context runs.
  other.restart();
  other.poll();
  CHECK(f.cancelled == 1);
  CHECK(f.calls.in_flight() == 0);
}

TEST_CASE("call registry: cancel_all completes every waiter, cancels every operation, refuses new calls") {
  fixture f;
  std::vector<std::string> out;
  for (int i = 0; i < 5; ++i) {
    asio::co_spawn(f.io, f.caller(std::to_string(i % 2), 1s, 10s, out), asio::detached);
  }
  f.io.poll();
  REQUIRE(f.calls.in_flight() == 2);
  f.calls.cancel_all();
  bool idle = false;
  f.calls.async_wait_idle(asio::bind_executor(f.io, [&](std::error_code) { idle = true; }));
  f.io.restart();
  f.io.poll();
  CHECK(out == std::vector<std::string>(5, "aborted"));
  CHECK(f.cancelled == 2);
  CHECK(idle);
  CHECK(f.calls.in_flight() == 0);
  CHECK_THROWS_AS(f.calls.join_or_start<int>(
                      std::nullopt, f.io.get_executor(), f.clock->now() + 1s, [&] { return f.work(1s, 1); },
                      [](int v) { return v; }),
                  wandura::error);
  CHECK(f.started == 2);
}

TEST_CASE("call registry: a caller given an operation is not left behind by those who leave before it waits") {
  SECTION("the first caller: a joiner joins and leaves before it waits") {
    fixture f;
    std::vector<std::string> out;
    asio::co_spawn(f.io, f.late_caller("k", 5ms, out), asio::detached);
    asio::co_spawn(f.io, f.caller("k", 100ms, 1ms, out), asio::detached); // joins, leaves at its 1 ms deadline
    f.drive(2, out);
    CHECK(out == std::vector<std::string>{"deadline", "late led 42"});
    CHECK(f.cancelled == 0);
    CHECK(f.finished == 1);
  }
  SECTION("a joiner: the first caller leaves before the joiner waits") {
    fixture f;
    std::vector<std::string> out;
    asio::cancellation_signal signal;
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(signal.slot(), asio::detached));
    asio::co_spawn(f.io, f.late_caller("k", 5ms, out), asio::detached);
    f.io.poll();
    signal.emit(asio::cancellation_type::terminal); // the only waiter leaves while the joiner is on its way
    f.drive(2, out);
    CHECK(out == std::vector<std::string>{"aborted", "late joined 42"});
    CHECK(f.cancelled == 0);
    CHECK(f.started == 1);
  }
  SECTION("once everyone given it has waited and left, it is cancelled as before") {
    fixture f;
    std::vector<std::string> out;
    asio::cancellation_signal first;
    asio::cancellation_signal second;
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(first.slot(), asio::detached));
    asio::co_spawn(f.io, f.caller("k", 100ms, 10s, out), asio::bind_cancellation_slot(second.slot(), asio::detached));
    f.io.poll();
    first.emit(asio::cancellation_type::terminal);
    second.emit(asio::cancellation_type::terminal);
    f.drive(2, out);
    f.io.restart();
    f.io.poll();
    CHECK(out == std::vector<std::string>{"aborted", "aborted"});
    CHECK(f.cancelled == 1);
    CHECK(f.calls.in_flight() == 0);
  }
}

namespace {

/// Starts an operation from a coroutine on `caller` and returns the executor the operation's body ran on, and
/// whether that body ran inside it.
struct where_it_ran {
  asio::any_io_executor executor;
  bool inside = false;
};

/// The work of `run_one`'s operation: notes where it runs.
asio::awaitable<int> record_where(where_it_ran* out) {
  auto const ex = co_await asio::this_coro::executor;
  out->executor = ex;
  if (auto const* s = held_executor<asio::strand<asio::io_context::executor_type>>(ex)) {
    out->inside = s->running_in_this_thread();
  } else if (auto const* plain = held_executor<asio::io_context::executor_type>(ex)) {
    out->inside = plain->running_in_this_thread();
  }
  co_return 7;
}

/// Runs one operation started by a caller on `caller`, running `io` (and `home`, the client's context, when the
/// caller's is another) until the caller has its result.
where_it_ran run_one(asio::io_context& io, call_registry& calls, asio::any_io_executor const& caller,
                     asio::io_context* home = nullptr) {
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  where_it_ran out;
  bool done = false;
  auto body = [&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    auto make = [where = &out] { return record_where(where); }; // not a coroutine: it may start later
    auto [op, joined] =
        calls.join_or_start<int>(std::nullopt, executor, clock->now() + 1s, make, [](int v) { return v; });
    std::error_code waited;
    co_await calls.async_wait(op, clock, clock->now() + 1s, call_registry::on_cancel::leave, false,
                              asio::redirect_error(asio::use_awaitable, waited));
    CHECK_FALSE(waited);
    CHECK(op->take() == 7);
    done = true;
  };
  asio::co_spawn(caller, body(), asio::detached);
  for (int i = 0; i < 1000 && !done; ++i) { // bounded
    for (auto* context : {&io, home}) {
      if (context != nullptr) {
        context->restart();
        context->poll();
      }
    }
  }
  CHECK(done);
  return out;
}

} // namespace

TEST_CASE("call registry: an operation runs on a strand unless the caller's executor already serialises") {
  SECTION("an io_context that may be run by several threads: a strand of it, made for the operation") {
    asio::io_context io; // the default concurrency hint
    call_registry calls(io.get_executor());
    auto const first = run_one(io, calls, io.get_executor());
    auto const second = run_one(io, calls, io.get_executor());
    auto const* a = held_executor<asio::strand<asio::io_context::executor_type>>(first.executor);
    auto const* b = held_executor<asio::strand<asio::io_context::executor_type>>(second.executor);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(first.inside);
    CHECK(a->get_inner_executor() == io.get_executor());
    CHECK_FALSE(*a == *b); // one strand per operation: operations of one client do not wait for each other
  }
  SECTION("a caller on another io_context than the client's: the client's executor, serialised the same way") {
    // What the operation parks (a transport's sends, a place at the gate) then belongs to the client's context.
    asio::io_context other(1);
    SECTION("the client's context made for one thread: its executor itself") {
      asio::io_context home(1);
      call_registry calls(home.get_executor());
      auto const r = run_one(other, calls, other.get_executor(), &home);
      REQUIRE(held_executor<asio::io_context::executor_type>(r.executor) != nullptr);
      CHECK(*held_executor<asio::io_context::executor_type>(r.executor) == home.get_executor());
      CHECK(r.inside);
    }
    SECTION("the client's context run by several threads: a strand of it") {
      asio::io_context home;
      call_registry calls(home.get_executor());
      auto const r = run_one(other, calls, other.get_executor(), &home);
      auto const* strand = held_executor<asio::strand<asio::io_context::executor_type>>(r.executor);
      REQUIRE(strand != nullptr);
      CHECK(strand->get_inner_executor() == home.get_executor());
      CHECK(r.inside);
    }
    SECTION("a registry without a home: the caller's") {
      call_registry calls;
      auto const r = run_one(other, calls, other.get_executor());
      REQUIRE(held_executor<asio::io_context::executor_type>(r.executor) != nullptr);
      CHECK(*held_executor<asio::io_context::executor_type>(r.executor) == other.get_executor());
    }
  }
  SECTION("an io_context made for one thread (concurrency hint 1): the caller's executor itself") {
    asio::io_context io(1);
    call_registry with_home(io.get_executor());
    call_registry without_home; // asks the context, as for a caller on another context
    for (auto* calls : {&with_home, &without_home}) {
      auto const r = run_one(io, *calls, io.get_executor());
      REQUIRE(held_executor<asio::io_context::executor_type>(r.executor) != nullptr);
      CHECK(*held_executor<asio::io_context::executor_type>(r.executor) == io.get_executor());
      CHECK(r.inside);
    }
  }
  SECTION("a caller on a strand: that strand") {
    asio::io_context io;
    call_registry calls(io.get_executor());
    auto const strand = asio::make_strand(io);
    auto const r = run_one(io, calls, strand);
    REQUIRE(held_executor<asio::strand<asio::io_context::executor_type>>(r.executor) != nullptr);
    CHECK(*held_executor<asio::strand<asio::io_context::executor_type>>(r.executor) == strand);
    CHECK(r.inside);
  }
}

TEST_CASE("call registry: cancel_all between an operation's listing and its start still cancels it, on a context "
          "run by two threads") {
  // `make` runs after the operation is listed (open to cancel_all) and before it starts: a cancellation asked for
  // there, on another thread, was posted to the operation's new strand, where the context's second thread could
  // run it before the start had installed anything to cancel. The work would then run its 5 s to the end.
  asio::io_context io;
  call_registry calls(io.get_executor());
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  std::atomic<bool> work_began{false};
  std::error_code waited;
  auto body = [&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    auto make = [&]() -> asio::awaitable<int> {
      std::thread([&] { calls.cancel_all(); }).join(); // as ~client() on another thread
      std::this_thread::sleep_for(100ms);              // time for the other io thread to run what was posted
      return [](std::atomic<bool>& began) -> asio::awaitable<int> {
        began = true;
        asio::steady_timer t(co_await asio::this_coro::executor, 5s);
        co_await t.async_wait(asio::use_awaitable);
        co_return 1;
      }(work_began);
    };
    auto [op, joined] =
        calls.join_or_start<int>(std::nullopt, executor, clock->now() + 10s, make, [](int v) { return v; });
    co_await calls.async_wait(op, clock, clock->now() + 10s, call_registry::on_cancel::leave, false,
                              asio::redirect_error(asio::use_awaitable, waited));
    if (!waited) { // the operation ended first: its error is the cancellation
      try {
        (void)op->take();
      } catch (wandura::error const& e) { // not Asio's own std::system_error, thrown in the cancelled frame
        waited = e.code();
      }
    }
  };
  auto const start = std::chrono::steady_clock::now();
  asio::co_spawn(io, body(), asio::detached);
  std::thread other([&] { io.run(); });
  io.run();
  other.join();
  CHECK(waited == asio::error::operation_aborted);
  CHECK(std::chrono::steady_clock::now() - start < 2s); // the work did not run to its end
  CHECK_FALSE(work_began);                              // it ended at its first co_await
  CHECK(calls.in_flight() == 0);
}

TEST_CASE("call registry: a caller's cancellation signal that outlives the io_context holds nothing of it") {
  // The waiter's handler in the caller's slot held the operation, and with it the operation's strand, whose end
  // locks its (destroyed) context's strand service: a use after free that AddressSanitizer shows.
  asio::cancellation_signal signal; // declared before the context, as a session's member would be
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  {
    asio::io_context io;
    auto calls = std::make_shared<call_registry>(io.get_executor()); // owned by the call, as a client's internals
    auto caller = [&clock](std::shared_ptr<call_registry> keep) -> asio::awaitable<void> {
      auto make = []() -> asio::awaitable<int> {
        asio::steady_timer t(co_await asio::this_coro::executor, 1h);
        co_await t.async_wait(asio::use_awaitable);
        co_return 1;
      };
      auto [op, joined] = keep->join_or_start<int>(std::nullopt, co_await asio::this_coro::executor, clock->now() + 1h,
                                                   make, [](int v) { return v; });
      std::error_code ec;
      co_await keep->async_wait(op, clock, clock->now() + 1h, call_registry::on_cancel::leave, false,
                                asio::redirect_error(asio::use_awaitable, ec));
    };
    asio::co_spawn(io, caller(calls), asio::bind_cancellation_slot(signal.slot(), asio::detached));
    io.poll();
    REQUIRE(calls->waiting() == 1);
    calls.reset(); // the client is gone; the context is destroyed with the call pending
  }
  signal.emit(asio::cancellation_type::terminal); // reaches nothing
  SUCCEED("the signal, emitted and destroyed after the context, touched nothing of it");
}

TEST_CASE("call registry: a waiter's deadline timer is not started once the waiter has left, and stopped after") {
  // The timer of a waiter whose deadline is earlier than the operation's is started on the operation's executor,
  // behind anything queued there; the waiter may leave on another thread before it starts. Asked from a thread that
  // does not run the context, both the operation's start and the timer's are queued on its strand, and the waiter
  // leaves before either runs: the timer must then not sleep at all (the clock would hold a sleeper until the
  // deadline, and the operation with it).
  asio::io_context io; // Asio's default hint: each operation gets a strand of its own
  call_registry calls(io.get_executor());
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  // The clock is a parameter, copied into the coroutine's frame: a capture would live in the lambda, which
  // join_or_start copies and destroys before the coroutine runs.
  auto sleep_then_7 = [](std::shared_ptr<wandura::testing::manual_clock> c) -> asio::awaitable<int> {
    (void)co_await c->sleep_until(c->now() + 5s);
    co_return 7;
  };
  auto [op, joined] = calls.join_or_start<int>(
      std::nullopt, io.get_executor(), clock->now() + 10s, [&] { return sleep_then_7(clock); },
      [](int v) { return v; });
  REQUIRE_FALSE(joined);
  std::vector<std::string> out;
  auto record = [&out](char const* who) {
    return [&out, who](std::error_code ec) { out.push_back(std::string(who) + ": " + (ec ? ec.message() : "done")); };
  };
  // One waiter with no deadline of its own keeps the operation running; the other's deadline (1 s) starts a timer.
  calls.async_wait(op, clock, clock->now() + 10s, call_registry::on_cancel::leave, false,
                   asio::bind_executor(io, record("stays")));
  asio::cancellation_signal leave;
  calls.async_wait(op, clock, clock->now() + 1s, call_registry::on_cancel::leave, false,
                   asio::bind_cancellation_slot(leave.slot(), asio::bind_executor(io, record("early"))));
  asio::cancellation_signal leave_later;
  calls.async_wait(op, clock, clock->now() + 2s, call_registry::on_cancel::leave, false,
                   asio::bind_cancellation_slot(leave_later.slot(), asio::bind_executor(io, record("later"))));

  SECTION("left before its timer started: no timer sleeps") {
    leave.emit(asio::cancellation_type::terminal);
    io.poll();
    CHECK(out == std::vector<std::string>{"early: " + std::error_code(asio::error::operation_aborted).message()});
    // The operation's own sleep and the third waiter's timer; none for the waiter that left.
    CHECK(clock->pending_sleeps() == 2);
    CHECK(clock->next_wakeup() == clock->now() + 2s);
  }
  SECTION("left after its timer started: the timer's sleep is cancelled") {
    io.poll();
    REQUIRE(clock->pending_sleeps() == 3); // the operation's and two timers
    leave.emit(asio::cancellation_type::terminal);
    io.restart();
    io.poll();
    CHECK(out == std::vector<std::string>{"early: " + std::error_code(asio::error::operation_aborted).message()});
    CHECK(clock->pending_sleeps() == 2);
    CHECK(clock->next_wakeup() == clock->now() + 2s);
  }
  // Either way, the waiter with the 2 s deadline leaves at it, and the one without leaves with the result.
  for (int i = 0; i < 10 && out.size() < 3; ++i) {
    clock->advance_to_next_wakeup();
    io.restart();
    io.poll();
  }
  REQUIRE(out.size() == 3);
  CHECK(out[1] == "later: " + std::error_code(wandura::errc::deadline_exceeded).message());
  CHECK(out[2] == "stays: done");
  CHECK(op->take() == 7);
  CHECK(clock->elapsed() == 5s);
  CHECK(clock->pending_sleeps() == 0);
  CHECK(calls.in_flight() == 0);
}
