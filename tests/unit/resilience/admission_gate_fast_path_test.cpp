// The admission gate's promise for an uncongested counter (admission_gate.hpp): `admit` and `observe` of a success
// take no lock, allocate nothing, read no clock and arm no timer. Its own executable: it counts every heap
// allocation of the process by interposing `malloc` and `aligned_alloc`, and it holds a counter's lock from another
// thread to show that the fast path never waits for it (and that the congested path does, so the probe works).
#include "wandura/resilience/admission_gate.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "resilience/gate_counter.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WANDURA_COUNT_ALLOCATIONS 0 // the sanitizers own malloc
#else
#define WANDURA_COUNT_ALLOCATIONS 1
namespace {
std::atomic<std::uint64_t> allocations{0};
}
extern "C" {
void* __libc_malloc(std::size_t size);                      // NOLINT: glibc's own entry points, behind the interposers
void* __libc_memalign(std::size_t align, std::size_t size); // NOLINT
void* malloc(std::size_t size) { // NOLINT(readability-inconsistent-declaration-parameter-name)
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
void* aligned_alloc(std::size_t align, std::size_t size) { // NOLINT
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, size);
}
}
#endif

namespace wandura::detail {
/// Test access to a counter's lock (declared a friend by the gate and the counter).
struct admission_gate_probe {
  static std::mutex& lock_of(admission_gate& gate, std::string_view counter) { return gate.find(counter)->mutex_; }
};
} // namespace wandura::detail

namespace {

/// A manual clock that counts how often it is read.
class counting_clock final : public wandura::clock {
public:
  [[nodiscard]] time_point now() const noexcept override {
    reads.fetch_add(1, std::memory_order_relaxed);
    return inner.now();
  }
  [[nodiscard]] std::chrono::system_clock::time_point system_now() const noexcept override {
    return inner.system_now();
  }
  [[nodiscard]] asio::awaitable<std::error_code> sleep_until(time_point when) override {
    return inner.sleep_until(when);
  }
  mutable std::atomic<int> reads{0};
  wandura::testing::manual_clock inner;
};

/// `n` admissions and successes on `counter`, one after the other in one coroutine; the allocations and clock
/// reads made by the loop itself (after a first round that warms Asio's frame cache) go to the out-parameters.
asio::awaitable<int> admit_loop(wandura::admission_gate& gate, counting_clock& clk, std::string_view counter, int n,
                                std::uint64_t& allocated, int& clock_reads) {
  wandura::counter_feedback ok;
  ok.status = 200;
  ok.granted = 1;
  int admitted = 0;
  auto const deadline = wandura::clock::time_point::max();
  (void)co_await gate.admit(counter, wandura::request_class::play, 1, deadline); // warm-up
#if WANDURA_COUNT_ALLOCATIONS
  auto const before = allocations.load();
#endif
  int const reads_before = clk.reads.load();
  for (int i = 0; i < n; ++i) {
    auto const a = co_await gate.admit(counter, wandura::request_class::play, 3, deadline);
    admitted += a.admitted() ? 1 : 0;
    gate.observe(counter, ok);
  }
#if WANDURA_COUNT_ALLOCATIONS
  allocated = allocations.load() - before;
#else
  allocated = 0;
#endif
  clock_reads = clk.reads.load() - reads_before;
  co_return admitted;
}

/// A fleet where nothing happens: every grant given, no hold, no refusal. Counts what the gate asks of it.
class calm_fleet final : public wandura::shared_pace {
public:
  asio::awaitable<wandura::shared_pace_grant> acquire(std::string_view, std::uint32_t,
                                                      std::chrono::system_clock::time_point now) override {
    ++calls;
    co_return wandura::shared_pace_grant{true, now};
  }
  void hold_until(std::string_view, std::chrono::system_clock::time_point,
                  std::chrono::system_clock::time_point) noexcept override {
    ++calls;
  }
  void set_limit(std::string_view, wandura::rate_limit const&) noexcept override { ++calls; }
  asio::awaitable<wandura::shared_pace_view> read(std::string_view, std::chrono::system_clock::time_point) override {
    ++calls;
    ++reads;
    co_return wandura::shared_pace_view{};
  }
  std::atomic<int> calls{0};
  std::atomic<int> reads{0};
};

} // namespace

TEST_CASE("admission gate fast path: with a shared pace, a calm counter costs the same and asks the fleet nothing") {
  asio::io_context io;
  auto clk = std::make_shared<counting_clock>();
  auto fleet = std::make_shared<calm_fleet>();
  wandura::admission_gate_options options;
  options.shared_pace = fleet;
  wandura::admission_gate gate(clk, options);
  std::uint64_t allocated = 99;
  int reads = 99;
  int admitted = 0;
  bool done = false;
  asio::co_spawn(io, admit_loop(gate, *clk, "playback", 10000, allocated, reads), [&](std::exception_ptr e, int n) {
    REQUIRE_FALSE(e);
    admitted = n;
    done = true;
  });
  for (int i = 0; i < 100 && !done; ++i) { // polled: the read's next wake-up keeps the io_context busy
    io.restart();
    io.poll();
  }
  REQUIRE(done);
  CHECK(admitted == 10000);
  CHECK(reads == 0);
  CHECK(fleet->reads == 1); // the first admit read the fleet's view; no other until the refresh interval passed
  CHECK(fleet->calls == 1); // and nothing else: no Redis command per request while calm
  CHECK(clk->inner.pending_sleeps() == 1); // the wake-up that makes the next read due
#if WANDURA_COUNT_ALLOCATIONS
  CHECK(allocated == 0);
#endif
  clk->inner.advance(100ms); // the next request after the interval reads again
  io.restart();
  io.poll();
  asio::co_spawn(io, gate.admit("playback", wandura::request_class::play, 1, wandura::clock::time_point::max()),
                 [](std::exception_ptr, wandura::admission) {});
  io.restart();
  io.poll();
  CHECK(fleet->reads == 2);
}

TEST_CASE("admission gate fast path: no allocation, no clock read, no timer while uncongested") {
  asio::io_context io;
  auto clk = std::make_shared<counting_clock>();
  wandura::admission_gate gate(clk);
  std::uint64_t allocated = 99;
  int reads = 99;
  int admitted = 0;
  asio::co_spawn(io, admit_loop(gate, *clk, "playback", 10000, allocated, reads), [&](std::exception_ptr e, int n) {
    REQUIRE_FALSE(e);
    admitted = n;
  });
  io.run();
  CHECK(admitted == 10000);
  CHECK(reads == 0);
  CHECK(clk->inner.pending_sleeps() == 0);
#if WANDURA_COUNT_ALLOCATIONS
  CHECK(allocated == 0);

  // The counter sees allocations where there are some: a congested counter queues (a waiter, a timer).
  wandura::counter_feedback refused;
  refused.status = 429;
  refused.refused = 1;
  refused.retry_after = 1s;
  refused.limit = 600;
  gate.observe("catalog", refused);
  auto const before = allocations.load();
  asio::co_spawn(io, gate.admit("catalog", wandura::request_class::play, 1, clk->now() + 10s),
                 [](std::exception_ptr, wandura::admission) {});
  io.restart();
  io.poll();
  CHECK(allocations.load() > before);
  CHECK(clk->inner.pending_sleeps() == 1);
  clk->inner.advance(2s);
  io.restart();
  io.poll();
#endif
}

TEST_CASE("admission gate fast path: an uncongested admit never waits for the counter's lock") {
  asio::io_context io;
  auto clk = std::make_shared<counting_clock>();
  wandura::admission_gate gate(clk);

  // Another thread holds the playback counter's lock for the whole test.
  std::promise<void> release;
  std::promise<void> held;
  std::thread holder([&] {
    std::lock_guard lock(wandura::detail::admission_gate_probe::lock_of(gate, "playback"));
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();

  std::promise<int> done;
  std::uint64_t allocated = 0;
  int reads = 0;
  asio::co_spawn(io, admit_loop(gate, *clk, "playback", 1000, allocated, reads),
                 [&](std::exception_ptr, int n) { done.set_value(n); });
  std::thread runner([&] { io.run(); });
  auto result = done.get_future();
  bool const finished = result.wait_for(10s) == std::future_status::ready;
  CHECK(finished); // a lock on the path would block here until the holder lets go
  release.set_value();
  holder.join();
  runner.join();
  CHECK(result.get() == 1000);
}

TEST_CASE("admission gate fast path: the probe notices the lock a congested counter takes") {
  asio::io_context io;
  auto clk = std::make_shared<counting_clock>();
  wandura::admission_gate gate(clk);
  wandura::counter_feedback shed;
  shed.status = 200;
  shed.shed = 2;
  shed.retry_after = 5s;
  gate.observe("playback", shed); // congested: the next admit decides under the lock

  std::promise<void> release;
  std::promise<void> held;
  std::thread holder([&] {
    std::lock_guard lock(wandura::detail::admission_gate_probe::lock_of(gate, "playback"));
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  std::promise<wandura::admission_verdict> done;
  asio::co_spawn(io, gate.admit("playback", wandura::request_class::prefetch, 1, clk->now() + 10s),
                 [&](std::exception_ptr, wandura::admission a) { done.set_value(a.verdict); });
  std::thread runner([&] { io.run(); });
  auto result = done.get_future();
  CHECK(result.wait_for(200ms) == std::future_status::timeout); // waits for the lock
  release.set_value();
  holder.join();
  CHECK(result.get() == wandura::admission_verdict::shed);
  runner.join();
}

TEST_CASE("admission gate fast path: a congested counter judged at the caller's time reads no clock") {
  asio::io_context io;
  auto clk = std::make_shared<counting_clock>();
  wandura::admission_gate gate(clk);
  auto const start = clk->now();
  wandura::counter_feedback refused;
  refused.status = 429;
  refused.refused = 1;
  refused.retry_after = 1s; // held for 1 s
  refused.limit = 600;
  gate.observe("playback", refused, start);
  wandura::counter_feedback shed;
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 2;
  shed.retry_after = 3s; // under the reserve for 3 s
  gate.observe("playback", shed, start);
  REQUIRE(gate.congested("playback"));

  int const reads_before = clk->reads.load();
  auto const deadline = start + 10s;
  // Judged at the time given, not at the clock's: the clock still reads `start`.
  CHECK(gate.under_reserve("playback", start + 2s));
  CHECK_FALSE(gate.under_reserve("playback", start + 4s));
  auto const shed_now =
      gate.try_admit("playback", wandura::request_class::prefetch, 1, deadline, io.get_executor(), start + 2s);
  REQUIRE(shed_now);
  CHECK(shed_now->verdict == wandura::admission_verdict::shed);
  auto const held = gate.try_admit("playback", wandura::request_class::play, 1, deadline, io.get_executor(),
                                   start + 500ms); // inside the 429's hold-off: it would queue
  CHECK_FALSE(held);
  auto const past = gate.try_admit("playback", wandura::request_class::play, 1, start + 1500ms, io.get_executor(),
                                   start + 2s); // its deadline passed at the time given
  REQUIRE(past);
  CHECK(past->verdict == wandura::admission_verdict::deadline_exceeded);
  wandura::counter_feedback ok;
  ok.status = 200;
  ok.granted = 1;
  gate.observe("playback", ok, start + 2s);
  CHECK(clk->reads.load() == reads_before);

  // The forms without a time read the clock, and agree at the same time.
  CHECK(gate.under_reserve("playback") == gate.under_reserve("playback", clk->now()));
  CHECK(clk->reads.load() > reads_before);
}
