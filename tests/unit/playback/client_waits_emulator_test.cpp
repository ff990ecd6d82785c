// The client destroyed or shut down while a call waits, against the embedded emulator over real loopback sockets and
// in real time: the wait is a retry's backoff after a 503 or a 429's hold-off, 5 s each (the emulator's scripted
// `Retry-After`). client.hpp promises the call ends at once with operation_aborted; here "at once" is well under a
// second, nothing more reaches the server, the client's state is freed and `io_context::run()` returns.
#include "wandura/playback/client.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/// Waits, in steps of 5 ms, until `done()` or `limit`; bounded.
template <class Done> bool wait_until(Done done, std::chrono::milliseconds limit) {
  for (auto const until = steady::now() + limit; !done() && steady::now() < until;) {
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

/// How the waiting call ended, written by its handler on the io_context's thread.
struct call_end {
  std::atomic<bool> done{false};
  std::error_code error; ///< Written before `done`.
  int attempts = -1;
  bool other_exception = false;
  steady::time_point at{};

  void ended_with(std::exception_ptr e) {
    at = steady::now();
    try {
      if (e) {
        std::rethrow_exception(e);
      }
    } catch (wandura::error const& err) {
      error = err.code();
      attempts = err.attempts();
    } catch (...) {
      other_exception = true;
    }
    done = true;
  }
};

} // namespace

TEST_CASE("client and emulator: destroying or shutting down the client ends a call waiting out a 5 s backoff or "
          "429 hold-off at once, frees the client and lets run() return") {
  auto const wait = GENERATE(as<std::string>{}, "backoff", "hold-off");
  auto const how = GENERATE(as<std::string>{}, "destroyed", "shut down");
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(wait, how, call);
  std::string const path = call == "issue_tickets" ? "/v1/playback/tickets" : "/v1/config";
  std::string const counter = call == "issue_tickets" ? "playback" : "config";

  wandura::emulator::config cfg;
  cfg.seed = 7;
  auto emu = wandura::emulator::server::start(cfg);
  // Every request to the path is answered so: the call's retry would be refused again.
  emu->install_faults(R"({"rules":[{"path":")" + path + R"(","kind":"status","status":)" +
                      (wait == "backoff" ? "503" : "429") + R"(,"retry_after":5}]})");

  asio::io_context io;
  std::atomic<int> retries{0};
  std::weak_ptr<wandura::ticket_store> watch_state; // owned by the client's state, and by nothing else
  wandura::client_options options;
  options.base_url = emu->base_url();
  options.api_key = "test-key";
  options.retry.on_retry = [&retries](wandura::retry_event const&) { ++retries; }; // before the wait starts
  {
    auto store = std::make_shared<wandura::memory_ticket_store>();
    watch_state = store;
    options.tickets = std::move(store);
  }
  auto api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));

  call_end end;
  if (call == "issue_tickets") {
    wandura::ticket_batch batch;
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    batch.union_info = "device-1";
    batch.drm_kek = "kek-1";
    asio::co_spawn(io, api->issue_tickets(std::move(batch)),
                   [&end](std::exception_ptr e, wandura::ticket_batch_result) { end.ended_with(e); });
  } else {
    asio::co_spawn(io, api->get_config(), [&end](std::exception_ptr e, wandura::org_config) { end.ended_with(e); });
  }
  std::promise<void> ran_out;
  auto run_returned = ran_out.get_future();
  std::thread runner([&io, &ran_out] {
    io.run(); // no work guard: returns once nothing of the client runs any more
    ran_out.set_value();
  });
  auto const queued = [&] {
    std::size_t n = 0;
    if (api) {
      for (auto const& c : api->engine().gate().stats()) {
        n += c.counter == counter ? c.queued_play : 0;
      }
    }
    return n;
  };
  bool const waiting = wait_until([&] { return retries.load() == 1 && (wait == "backoff" || queued() == 1); }, 5000ms);
  if (wait == "backoff") {
    std::this_thread::sleep_for(50ms); // well into the sleep that follows the hook
  }
  bool const still_waiting = !end.done.load();

  auto const stopped_at = steady::now();
  std::atomic<bool> shut_down{false};
  if (how == "destroyed") {
    api.reset();
  } else {
    asio::co_spawn(io, api->shutdown(), [&shut_down](std::exception_ptr e) { shut_down = !e; });
  }
  bool const ended = wait_until([&] { return end.done.load(); }, 3000ms);
  if (how == "shut down") {
    CHECK(wait_until([&] { return shut_down.load(); }, 3000ms));
    api.reset(); // the client must outlive the wait for shutdown()
  }
  bool const returned = run_returned.wait_for(3s) == std::future_status::ready;
  auto const run_took = steady::now() - stopped_at;
  if (!returned) {
    io.stop(); // only so that the test ends; the check below fails
  }
  runner.join();

  REQUIRE(waiting);
  REQUIRE(still_waiting);
  REQUIRE(ended);
  CHECK(end.at - stopped_at < 1s); // against a 5 s wait
  CHECK_FALSE(end.other_exception);
  CHECK(end.error == asio::error::operation_aborted);
  CHECK(end.attempts == 1);
  CHECK(returned);
  CHECK(run_took < 1s);
  CHECK(watch_state.expired()); // the client's state went with its last call
  auto const st = emu->stats();
  std::uint64_t answered = 0;
  for (auto const& [status, n] : st.responses) {
    answered += n;
  }
  CHECK(answered == 1); // nothing was sent after the first answer
  CHECK(st.faults_injected == 1);
}
