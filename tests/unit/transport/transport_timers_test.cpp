#include "transport/curl_timer.hpp"
#include "transport/request_queue.hpp"

// The transport's two timers alone, on a real io_context: libcurl's deadline (curl_timer) and the queued requests'
// attempt timeouts (request_queue). What they promise when starting a wait throws (out of memory making the
// handler or starting the wait): the timer is left unarmed, so the next deadline arms it.
#include <chrono>
#include <cstdint>
#include <new>
#include <system_error>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>

#include "transport/socket_set.hpp"
#include "transport/test_hooks.hpp"
#include "transport/transfer.hpp"

namespace {

using namespace std::chrono_literals;
using wandura::detail::curl_timer;
using wandura::detail::request_queue;
using clock_type = std::chrono::steady_clock;

struct fired {
  std::uint64_t generation;
  std::error_code ec;
  clock_type::time_point at;
};

/// A handler factory for curl_timer that records each completion.
auto recording(std::vector<fired>& log) {
  return [&log] { return [&log](std::uint64_t g, std::error_code ec) { log.push_back({g, ec, clock_type::now()}); }; };
}

/// A handler factory that fails as an allocation would.
auto throwing() {
  return []() -> void (*)(std::uint64_t, std::error_code) { throw std::bad_alloc(); };
}

/// A queue handler whose copy (made when a wait starts) throws while `fail` is set.
struct flaky_handler {
  bool* fail;
  std::vector<fired>* log;
  flaky_handler(bool& f, std::vector<fired>& l) : fail(&f), log(&l) {}
  flaky_handler(flaky_handler const& other) : fail(other.fail), log(other.log) {
    if (*fail) {
      throw std::bad_alloc();
    }
  }
  void operator()(std::uint64_t g, std::error_code ec) const { log->push_back({g, ec, clock_type::now()}); }
};

} // namespace

TEST_CASE("curl_timer arms libcurl's deadline and reports it due", "[transport][timer]") {
  asio::io_context io(1);
  auto strand = asio::make_strand(io.get_executor());
  curl_timer timer{curl_timer::strand_type(strand)};
  std::vector<fired> log;
  auto const start = clock_type::now();
  CHECK_FALSE(timer.on_curl_request(30, recording(log)));
  io.run();
  REQUIRE(log.size() == 1);
  CHECK(log[0].at - start >= 30ms);
  CHECK(timer.on_fired(log[0].generation, log[0].ec, recording(log)) == curl_timer::wake::due);
}

TEST_CASE("curl_timer: a wait that failed to start does not hold back the next deadline", "[transport][timer]") {
  asio::io_context io(1);
  auto strand = asio::make_strand(io.get_executor());
  curl_timer timer{curl_timer::strand_type(strand)};
  std::vector<fired> log;

  SECTION("announced by libcurl") {
    // The first deadline's wait cannot start; the later one must still get a wait (it used to be taken as covered
    // by the earlier one, which was never pending, and libcurl then waited for ever).
    CHECK_THROWS_AS(timer.on_curl_request(20, throwing()), std::bad_alloc);
    CHECK_FALSE(timer.on_curl_request(40, recording(log)));
  }
  SECTION("the owner's deadline") {
    timer.set_owner_deadline(clock_type::now() + 20ms);
    CHECK_THROWS_AS(timer.serve_owner(throwing()), std::bad_alloc);
    timer.set_owner_deadline(clock_type::now() + 40ms);
    timer.serve_owner(recording(log));
  }
  auto const start = clock_type::now();
  io.run_for(2s);
  REQUIRE(log.size() == 1);
  CHECK_FALSE(log[0].ec);
  CHECK(log[0].at - start < 1s);
}

TEST_CASE("curl_timer: a wait that failed to re-arm after an early wake is started by the next deadline",
          "[transport][timer]") {
  asio::io_context io(1);
  auto strand = asio::make_strand(io.get_executor());
  curl_timer timer{curl_timer::strand_type(strand)};
  std::vector<fired> log;
  // The owner's deadline comes first; libcurl's later. The owner's wait wakes early for libcurl, whose re-arm fails.
  timer.set_owner_deadline(clock_type::now() + 10ms);
  CHECK_FALSE(timer.on_curl_request(200, recording(log)));
  timer.serve_owner(recording(log));
  // The first wait (libcurl's) was superseded by the owner's: its completion comes first, and is stale.
  io.run_one_for(2s);
  io.run_one_for(2s);
  REQUIRE(log.size() == 2);
  CHECK(timer.on_fired(log[0].generation, log[0].ec, recording(log)) == curl_timer::wake::stale);
  timer.clear_owner_deadline();
  CHECK_THROWS_AS(timer.on_fired(log[1].generation, log[1].ec, throwing()), std::bad_alloc);
  // libcurl announces a deadline later than the one whose wait failed: it must be waited for.
  CHECK_FALSE(timer.on_curl_request(300, recording(log)));
  io.restart();
  io.run_for(2s);
  REQUIRE(log.size() == 3);
  CHECK(timer.on_fired(log[2].generation, log[2].ec, recording(log)) == curl_timer::wake::due);
}

TEST_CASE("request_queue: a push that failed leaves its request unqueued and does not hold back the next request's",
          "[transport][timer]") {
  asio::io_context io(1);
  auto strand = asio::make_strand(io.get_executor());
  request_queue::strand_type const s(strand);
  wandura::detail::socket_set sockets(s);
  wandura::detail::transport_test_hooks const hooks{};
  request_queue queue(s, 1);
  wandura::detail::transfer first(sockets, hooks);
  wandura::detail::transfer second(sockets, hooks);
  wandura::detail::transfer third(sockets, hooks);
  first.options.timeout = 20ms;
  second.options.timeout = 40ms;
  third.options.timeout = 20ms;
  bool fail = true;
  std::vector<fired> log;
  flaky_handler const handler(fail, log);

  queue.activated(); // the one slot is taken: both wait
  CHECK_THROWS_AS(queue.push(&first, handler), std::bad_alloc);
  // Not queued: the transport fails that request alone, and it must not come out of the queue later as well.
  CHECK(queue.waiting() == 0);
  CHECK(first.phase != wandura::detail::transfer_phase::queued);
  fail = false;
  queue.push(&third, handler);
  queue.push(&second, handler);
  CHECK(queue.waiting() == 2);

  std::vector<wandura::detail::transfer*> expired;
  auto const start = clock_type::now();
  while (expired.size() < 2 && clock_type::now() - start < 2s) {
    io.restart();
    if (io.run_one_for(2s) == 0) {
      break; // no wait pending: the defect this test is for
    }
    for (auto const& f : log) {
      queue.on_fired(f.generation, f.ec, handler, [&](wandura::detail::transfer* t) { expired.push_back(t); });
    }
    log.clear();
  }
  REQUIRE(expired.size() == 2);
  CHECK(expired[0] == &third);
  CHECK(expired[1] == &second);
  CHECK(queue.waiting() == 0);
}
