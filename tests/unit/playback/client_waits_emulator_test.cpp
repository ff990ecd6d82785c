// The client destroyed or shut down while a call waits, against the embedded emulator over real loopback sockets and
// in real time: the wait is a retry's backoff after a 503 or a 429's hold-off, 5 s each (the emulator's scripted
// `Retry-After`). client.hpp promises the call ends at once with operation_aborted; here "at once" is well under a
// second, nothing more reaches the server, the client's state is freed and `io_context::run()` returns.
#include "wandura/playback/client.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>

#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/ticket_store.hpp"
#include "wandura/playback/viewer_ref.hpp"

#include "counting_viewer_limit.hpp"

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

/// The emulator (seed 7), every ticket request held `ms` milliseconds before it is executed.
std::unique_ptr<wandura::emulator::server> delayed_emulator(int ms) {
  wandura::emulator::config cfg;
  cfg.seed = 7;
  auto emu = wandura::emulator::server::start(cfg);
  emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"delay","ms":)" + std::to_string(ms) + "}]}");
  return emu;
}

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

namespace {

/// The emulator answering every request to `path` with `status` and `Retry-After: retry_after_s`, and a client of
/// it with default retry options (INTERACTIVE: a 15 s deadline) whose io_context runs on its own thread.
struct refusing_server {
  std::unique_ptr<wandura::emulator::server> emu;
  asio::io_context io;
  std::atomic<int> retries{0};
  std::unique_ptr<wandura::client> api;
  std::thread runner;
  std::promise<void> ran_out;
  std::optional<wandura::ticket_batch_result> tickets; ///< What a ticket call returned, when it did not throw.

  refusing_server(std::string const& path, int status, int retry_after_s) {
    wandura::emulator::config cfg;
    cfg.seed = 7;
    emu = wandura::emulator::server::start(cfg);
    emu->install_faults(R"({"rules":[{"path":")" + path + R"(","kind":"status","status":)" + std::to_string(status) +
                        R"(,"retry_after":)" + std::to_string(retry_after_s) + "}]}");
    wandura::client_options options;
    options.base_url = emu->base_url();
    options.api_key = "test-key";
    options.retry.on_retry = [this](wandura::retry_event const&) { ++retries; };
    api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));
  }
  refusing_server(refusing_server const&) = delete;
  refusing_server& operator=(refusing_server const&) = delete;
  ~refusing_server() {
    api.reset(); // cancels what is still running; run() then returns
    if (runner.joinable()) {
      if (ran_out.get_future().wait_for(3s) != std::future_status::ready) {
        io.stop(); // only so that the test ends
      }
      runner.join();
    }
  }

  /// Starts `call` ("issue_tickets" or "get_config"), its handler bound to `slot`, and runs the io_context.
  void spawn(std::string const& call, call_end& end, asio::cancellation_slot slot = {}) {
    if (call == "issue_tickets") {
      wandura::ticket_batch batch;
      batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
      batch.union_info = "device-1";
      batch.drm_kek = "kek-1";
      asio::co_spawn(
          io, api->issue_tickets(std::move(batch)),
          asio::bind_cancellation_slot(slot, [this, &end](std::exception_ptr e, wandura::ticket_batch_result r) {
            if (!e) {
              tickets = std::move(r); // written before `end.done`
            }
            end.ended_with(e);
          }));
    } else {
      asio::co_spawn(
          io, api->get_config(),
          asio::bind_cancellation_slot(slot, [&end](std::exception_ptr e, wandura::org_config) { end.ended_with(e); }));
    }
    runner = std::thread([this] {
      io.run(); // no work guard: returns once nothing of the client runs any more
      ran_out.set_value();
    });
  }

  /// Requests the emulator answered.
  std::uint64_t answered() const {
    std::uint64_t n = 0;
    for (auto const& [status, count] : emu->stats().responses) {
      n += count;
    }
    return n;
  }
};

} // namespace

TEST_CASE("client and emulator: a Retry-After longer than the default deadline ends the call at once with the last "
          "answer, nothing more sent") {
  // retry_engine.hpp: the call stops "at once if the next attempt could not start before the deadline". A server
  // asking for 30 s against the default 15 s deadline: the call ends well under a second after the answer, not 15 s
  // later. The emulator's refusal of a ticket batch carries its items: they are reported, each with the server's
  // wait (issue_tickets: "one item's failure never affects another's"); a read fails as deadline_exceeded.
  int const status = GENERATE(429, 503);
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(status, call);
  call_end end; // outlives the client: its handler writes it
  refusing_server s(call == "issue_tickets" ? "/v1/playback/tickets" : "/v1/config", status, 30);
  auto const started = steady::now();
  s.spawn(call, end);
  REQUIRE(wait_until([&] { return end.done.load(); }, 5000ms));
  CHECK(end.at - started < 1s);
  CHECK_FALSE(end.other_exception);
  if (call == "issue_tickets") {
    CHECK_FALSE(end.error);
    REQUIRE(s.tickets);
    CHECK(s.tickets->attempts == 1);
    REQUIRE(s.tickets->items.size() == 1);
    auto const& play = s.tickets->items[0];
    CHECK(play.outcome == (status == 429 ? wandura::item_outcome::rate_limited : wandura::item_outcome::unavailable));
    CHECK(play.status == status);
    CHECK(play.retry_after == std::chrono::seconds(30));
  } else {
    CHECK(end.error == wandura::errc::deadline_exceeded);
    CHECK(end.attempts == 1);
  }
  CHECK(s.retries.load() == 0);
  CHECK(s.answered() == 1);
}

TEST_CASE("client and emulator: a call cancelled through its slot while it waits out a 5 s backoff or 429 hold-off "
          "ends at once with operation_aborted, nothing more sent") {
  // client.hpp, Cancellation: terminal cancellation through the caller's slot ends the call at once "whether it is
  // sending, waiting to retry, waiting for a 429 hold-off". The signal is emitted on the client's io_context, from
  // where the call's handler was bound.
  auto const wait = GENERATE(as<std::string>{}, "backoff", "hold-off");
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(wait, call);
  asio::cancellation_signal signal; // both outlive the client: the call's handler is bound to them
  call_end end;
  refusing_server s(call == "issue_tickets" ? "/v1/playback/tickets" : "/v1/config", wait == "backoff" ? 503 : 429, 5);
  s.spawn(call, end, signal.slot());
  bool const waiting = wait_until([&] { return s.retries.load() == 1; }, 5000ms);
  std::this_thread::sleep_for(50ms); // well into the wait that follows the hook
  bool const still_waiting = !end.done.load();
  auto const cancelled_at = steady::now();
  asio::post(s.io, [&signal] { signal.emit(asio::cancellation_type::terminal); });
  bool const ended = wait_until([&] { return end.done.load(); }, 3000ms);
  REQUIRE(waiting);
  REQUIRE(still_waiting);
  REQUIRE(ended);
  CHECK(end.at - cancelled_at < 1s); // against a 5 s wait
  CHECK_FALSE(end.other_exception);
  CHECK(end.error == asio::error::operation_aborted);
  CHECK(end.attempts == 1);
  std::this_thread::sleep_for(100ms); // a request sent after the cancellation would have been answered by now
  CHECK(s.answered() == 1);
}

TEST_CASE("client and emulator: callers of one shared request cancelled from their own strands on two threads leave "
          "at once, and the others get the one ticket") {
  // client.hpp: any thread, many coroutines at once; identical concurrent requests share one (coalesce, on by
  // default); a caller cancelled through its slot leaves at once, the first caller included, and the request goes on
  // for those still waiting. Each call runs on its own strand, where its signal is emitted, as Asio requires.
  auto emu = delayed_emulator(1000);
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  wandura::client_options options;
  options.base_url = emu->base_url();
  options.api_key = "test-key";
  auto api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&io] { io.run(); });
  }

  constexpr std::size_t callers = 8;
  std::vector<asio::strand<asio::io_context::executor_type>> strands;
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  std::vector<std::unique_ptr<call_end>> ends;
  std::vector<std::optional<wandura::ticket_batch_result>> results(callers);
  wandura::ticket_batch batch;
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  batch.union_info = "device-1";
  batch.drm_kek = "kek-1";
  batch.viewer_ref = wandura::make_viewer_ref("secret", "user-1", "install-1");
  for (std::size_t i = 0; i < callers; ++i) {
    strands.push_back(asio::make_strand(io));
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    ends.push_back(std::make_unique<call_end>());
    asio::co_spawn(strands[i], api->issue_tickets(batch),
                   asio::bind_cancellation_slot(
                       signals[i]->slot(), [&results, &ends, i](std::exception_ptr e, wandura::ticket_batch_result r) {
                         if (!e) {
                           results[i] = std::move(r); // written before `done`
                         }
                         ends[i]->ended_with(e);
                       }));
  }
  // Every other call has joined the first one's request, which the server delays (counted as each joins).
  REQUIRE(wait_until([&] { return api->stats().metrics.coalesced == callers - 1; }, 5000ms));
  auto const cancelled_at = steady::now();
  for (std::size_t i = 0; i < callers; i += 2) { // the first caller and every other one
    asio::post(strands[i], [&signals, i] { signals[i]->emit(asio::cancellation_type::terminal); });
  }
  bool const all_ended = wait_until(
      [&] { return std::all_of(ends.begin(), ends.end(), [](auto const& e) { return e->done.load(); }); }, 5000ms);
  api.reset();
  guard.reset();
  for (auto& t : threads) {
    t.join();
  }

  REQUIRE(all_ended);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < callers; ++i) {
    CAPTURE(i);
    CHECK_FALSE(ends[i]->other_exception);
    if (i % 2 == 0) {
      CHECK(ends[i]->error == asio::error::operation_aborted);
      CHECK(ends[i]->at - cancelled_at < 500ms); // before the server's answer, 850 ms away
    } else {
      CHECK_FALSE(ends[i]->error);
      REQUIRE(results[i]);
      REQUIRE(results[i]->items.size() == 1);
      CHECK(results[i]->items[0].outcome == wandura::item_outcome::granted);
      if (results[i]->items[0].ticket) {
        ids.insert(results[i]->items[0].ticket->ticket_id);
      }
    }
  }
  CHECK(ids.size() == 1);
  CHECK(emu->stats().tickets_counted == 1);
  CHECK(emu->stats().requests.at("playback") == 1);
}

TEST_CASE("client and emulator: an io_context destroyed with a request in flight frees the call and keeps the "
          "allowance the server went on to spend") {
  // viewer_limit.hpp: a ticket whose request went out and was never answered stays taken. Here the coroutines are
  // destroyed with the io_context, never resumed: the attempt never ends, and the server issues the ticket anyway.
  auto emu = delayed_emulator(300);
  auto limit = std::make_shared<test_support::counting_viewer_limit>();
  std::weak_ptr<wandura::client> watch_client;
  {
    asio::io_context io;
    wandura::client_options options;
    options.base_url = emu->base_url();
    options.api_key = "test-key";
    options.viewer_limit = limit;
    auto api = std::make_shared<wandura::client>(io.get_executor(), std::move(options));
    watch_client = api;
    wandura::ticket_batch batch;
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    batch.union_info = "device-1";
    batch.drm_kek = "kek-1";
    batch.viewer_ref = wandura::make_viewer_ref("secret", "user-1", "install-1");
    asio::co_spawn(
        io,
        [](std::shared_ptr<wandura::client> owner, wandura::ticket_batch b) -> asio::awaitable<void> {
          auto call = owner->issue_tickets(std::move(b));
          (void)co_await std::move(call);
        }(api, std::move(batch)),
        asio::detached);
    api.reset(); // the coroutine's frame owns the client now
    auto const received = [&] {
      auto const s = emu->stats();
      auto const found = s.requests.find("playback");
      return found != s.requests.end() && found->second == 1;
    };
    for (auto const until = steady::now() + 5s; !received() && steady::now() < until;) {
      io.run_for(5ms);
    }
    REQUIRE(received()); // the server holds the request for 300 ms
    REQUIRE(limit->taken == 1);
  } // ~io_context with the attempt in flight
  CHECK(watch_client.expired());
  CHECK(wait_until([&] { return emu->stats().tickets_counted == 1; }, 2000ms)); // the server issued it
  CHECK(limit->released == 0);
}
