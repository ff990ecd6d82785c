// The client's calls as operations with lifetimes: cancellation, deadlines of joiners, destruction and shutdown
// with calls in flight, and settling a call (allowance, failure count, latency) on every exit.
#include "wandura/playback/client.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/attempt_observer.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

#include "client_harness.hpp"
#include "counting_viewer_limit.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace std::chrono_literals;
using wandura::item_outcome;
using wandura::testing::fake_step;
using namespace client_harness;

namespace {

constexpr char const* film = "the-heiress-returns";

wandura::ticket_batch play_batch(int episode, std::string device = "dev-1") {
  wandura::ticket_batch batch;
  batch.episodes.push_back({film, episode, wandura::intent::play});
  batch.union_info = std::move(device);
  batch.drm_kek = "kek";
  batch.viewer_ref = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";
  return batch;
}

/// How one spawned call ended.
struct call_end {
  bool done = false;
  std::optional<wandura::ticket_batch_result> result;
  std::optional<std::error_code> error; ///< Set when it threw a wandura::error.
  int attempts = -1;                    ///< Of that wandura::error.
  int http_status = -1;                 ///< Of that wandura::error.
  std::string what;                     ///< Of that wandura::error.
  bool other_exception = false;         ///< It threw something that is not a wandura::error.

  void ended_with(std::exception_ptr e) {
    done = true;
    try {
      std::rethrow_exception(e);
    } catch (wandura::error const& err) {
      error = err.code();
      attempts = err.attempts();
      http_status = err.http_status();
      what = err.what();
    } catch (std::exception const& other) {
      other_exception = true;
      what = other.what();
    } catch (...) {
      other_exception = true;
    }
  }
};

/// Spawns `issue_tickets` on the harness's io_context (or on `on`), with `slot` as its cancellation slot when given.
void spawn_call(harness& h, wandura::ticket_batch batch, wandura::call_options options, call_end& end,
                asio::cancellation_slot slot = {}, asio::io_context* on = nullptr) {
  auto op = h.api->issue_tickets(std::move(batch), std::move(options));
  asio::co_spawn(on != nullptr ? *on : h.io, std::move(op),
                 asio::bind_cancellation_slot(slot, [&end](std::exception_ptr e, wandura::ticket_batch_result r) {
                   if (!e) {
                     end.done = true;
                     end.result = std::move(r);
                     return;
                   }
                   end.ended_with(e);
                 }));
}

/// Spawns any call of the client whose result the test does not need.
template <class T> void spawn_any(harness& h, asio::awaitable<T> op, call_end& end, asio::cancellation_slot slot = {}) {
  asio::co_spawn(h.io, std::move(op), asio::bind_cancellation_slot(slot, [&end](std::exception_ptr e, T) {
                   if (!e) {
                     end.done = true;
                     return;
                   }
                   end.ended_with(e);
                 }));
}

void poll(harness& h) {
  h.io.restart();
  h.io.poll();
}

/// Ends the calls in flight `how`: "destroyed" (the client), "shut down" (`shut_down` is set once `shutdown()`
/// completed without an exception) or "cancelled" (through `signal`).
void end_calls(harness& h, std::string const& how, asio::cancellation_signal& signal, bool& shut_down) {
  if (how == "destroyed") {
    h.api.reset();
  } else if (how == "shut down") {
    asio::co_spawn(h.io, h.api->shutdown(), [&shut_down](std::exception_ptr e) { shut_down = !e; });
  } else {
    signal.emit(asio::cancellation_type::terminal);
  }
}

/// Runs the io_context and the clock until nothing is left to do; bounded.
void drain(harness& h) {
  for (int i = 0; i < 1000; ++i) {
    poll(h);
    if (!h.clock->advance_to_next_wakeup()) {
      poll(h);
      return;
    }
  }
  FAIL("the client kept working");
}

} // namespace

TEST_CASE("lifetime: cancelling a call mid-request throws operation_aborted, keeps the allowance its request may "
          "have spent and sends nothing more") {
  bool const coalesce = GENERATE(true, false);
  // Cancelled while the attempt is in flight (the server may have issued the ticket: the allowance stays taken), or
  // while the call waits to retry after a whole 503 (the server issued nothing: it is given back).
  bool const in_flight = GENERATE(true, false);
  INFO("coalesce = " << coalesce << ", in flight = " << in_flight);
  wandura::client_options options;
  options.coalesce = coalesce;
  options.viewer_tickets_per_minute = 1;
  harness h(options);
  auto first = fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "1"}});
  first.latency = in_flight ? 2s : 0s;
  h.fake->push(first);
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));

  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, play_batch(4), {}, end, signal.slot());
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1); // in flight, or answered 503 and asleep until its retry
  REQUIRE_FALSE(end.done);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(end.done);
  CHECK_FALSE(end.other_exception);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);

  // Nobody waits for the request any more: it is cancelled, retries nothing and leaves no timer behind.
  drain(h);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.clock->pending_sleeps() == 0);
  CHECK(h.api->stats().metrics.call_failures == 1);

  // The viewer's one ticket a minute: still spent after a cancel in flight (else cancelling calls once they are out
  // would spend the organisation's limit without bound), given back after the 503, which issued nothing.
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 5, "play", "t5")})));
  auto next = h.run(h.api->issue_tickets(play_batch(5)));
  CHECK(next.items[0].outcome == (in_flight ? item_outcome::viewer_limited : item_outcome::granted));
  CHECK(h.fake->attempt_count() == (in_flight ? 1U : 2U)); // a viewer_limited item is not sent
}

TEST_CASE("lifetime: the allowance of a request in flight stays taken when the client is destroyed, shut down or "
          "the call cancelled, and a request never sent gives it all back") {
  auto const how = GENERATE(as<std::string>{}, "destroyed", "shut down", "cancelled");
  bool const sent = GENERATE(true, false); // in flight, or held at the admission gate after a 429 (nothing sent)
  CAPTURE(how, sent);
  auto limit = std::make_shared<test_support::counting_viewer_limit>();
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  if (!sent) { // a 429 holds the playback counter for 5 s at the admission gate: the next request waits there
    h.fake->push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "5"}}));
    wandura::call_options once;
    once.disable_retries = true;
    call_end first;
    spawn_call(h, play_batch(3), once, first);
    poll(h);
    REQUIRE(first.done);
    REQUIRE(first.error);
    REQUIRE(limit->released == limit->taken); // refused as a whole: its ticket was given back
  }
  h.fake->set_default(fake_step::stall());
  wandura::ticket_batch batch = play_batch(4);
  batch.episodes.push_back({film, 5, wandura::intent::prefetch});
  asio::cancellation_signal signal;
  call_end end;
  auto const taken_before = limit->taken.load();
  auto const released_before = limit->released.load();
  spawn_call(h, batch, {}, end, signal.slot());
  poll(h);
  REQUIRE_FALSE(end.done);
  REQUIRE(limit->taken - taken_before == (sent ? 2U : 1U)); // held: the prefetch is shed before the allowance
  REQUIRE(h.fake->attempt_count() == 1);                    // sent and stalled, or only the first call's 429
  bool shut_down = false;
  end_calls(h, how, signal, shut_down);
  drain(h);
  REQUIRE(end.done);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  if (how == "shut down") {
    CHECK(shut_down);
  }
  // Sent: the server may have issued both tickets; nothing goes back. Never sent: all of it does.
  CHECK(limit->released - released_before == (sent ? 0U : limit->taken - taken_before));
}

TEST_CASE("lifetime: a call cancelled while it waits to retry says how far it got and names itself") {
  bool const coalesce = GENERATE(true, false);
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "start_episode", "get_config");
  INFO("coalesce = " << coalesce << ", " << call);
  wandura::client_options options;
  options.coalesce = coalesce;
  harness h(options);
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "1"}}));
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  asio::cancellation_signal signal;
  call_end end;
  if (call == "issue_tickets") {
    spawn_call(h, play_batch(4), {}, end, signal.slot());
  } else if (call == "start_episode") {
    wandura::viewer const who{"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "dev-1", "kek"};
    spawn_any(h, h.api->start_episode(who, film, 4, 4), end, signal.slot());
  } else {
    spawn_any(h, h.api->get_config(), end, signal.slot());
  }
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1); // answered 503: the call sleeps 1 s before its retry
  REQUIRE_FALSE(end.done);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(end.done);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  CHECK(end.attempts == 1);
  CHECK(end.http_status == 503);
  // The request's own end, as the retry engine says it (the waiter ended with the request, which it cancelled).
  auto const target = call == "get_config" ? std::string(" (GET /v1/config on 127.0.0.1:1)")
                                           : std::string(" (POST /v1/playback/tickets on 127.0.0.1:1)");
  CHECK(end.what == call + ": cancelled after 1 attempt" + target);
  drain(h);
  CHECK(h.fake->attempt_count() == 1);
}

namespace {
/// Emits `signal` (once) from inside the retry engine, as an attempt ends with a 2xx read whole: a cancellation that
/// comes after the answer.
struct cancel_at_answer final : wandura::attempt_observer {
  asio::cancellation_signal* signal = nullptr;
  void* on_attempt_begin(wandura::attempt_begin const&) noexcept override { return nullptr; }
  void on_attempt_end(void*, wandura::attempt_begin const&, wandura::attempt_end const& e) noexcept override {
    if (signal != nullptr && e.status_code / 100 == 2) {
      std::exchange(signal, nullptr)->emit(asio::cancellation_type::terminal);
    }
  }
};
} // namespace

TEST_CASE("lifetime: a cancellation that comes after the answer does not undo the call: its result and tickets are "
          "the caller's") {
  bool const coalesce = GENERATE(true, false);
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "start_episode", "get_config");
  // The answer at once: the call's operation, started on the caller's executor, reads it before the caller waits
  // (the cancellation then reaches a caller not yet waiting, whose next co_await Asio would make throw); or later:
  // the caller waits, and its cancellation reaches the wait.
  auto const latency = GENERATE(0ms, 10ms);
  INFO("coalesce = " << coalesce << ", " << call << ", latency " << latency.count() << " ms");
  auto observer = std::make_shared<cancel_at_answer>();
  wandura::client_options options;
  options.coalesce = coalesce;
  options.retry.observer = observer;
  harness h(options);
  auto answer = fake_step::respond(200, call == "get_config" ? R"({"org_id":"org_demo","limits":{"playback":6000}})"
                                                             : batch_body({granted_item(film, 4, "play", "t4")}));
  answer.latency = latency;
  h.fake->set_default(answer);
  asio::cancellation_signal signal;
  observer->signal = &signal;
  call_end end;
  wandura::viewer const who{"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "dev-1", "kek"};
  if (call == "issue_tickets") {
    spawn_call(h, play_batch(4), {}, end, signal.slot());
  } else if (call == "start_episode") {
    spawn_any(h, h.api->start_episode(who, film, 4, 4), end, signal.slot());
  } else {
    spawn_any(h, h.api->get_config(), end, signal.slot());
  }
  drain(h);
  REQUIRE(observer->signal == nullptr); // emitted
  REQUIRE(end.done);
  INFO(end.what);
  CHECK_FALSE(end.other_exception);
  CHECK_FALSE(end.error); // it was: "cancelled after 1 attempt", HTTP 200, the tickets issued for nobody
  if (end.result) {
    REQUIRE(end.result->items.size() == 1);
    CHECK(end.result->items[0].outcome == wandura::item_outcome::granted);
  }
  CHECK(h.fake->attempt_count() == 1);
  if (call == "start_episode") { // stored as the call's fresh ticket: the next start reuses it, nothing sent
    auto again = h.run(h.api->start_episode(who, film, 4, 4));
    CHECK(again.play.outcome == wandura::item_outcome::granted);
    CHECK(again.play.reused);
    CHECK(h.fake->attempt_count() == 1);
  }
}

TEST_CASE("lifetime: a call cancelled while it waits to retry some items keeps what an earlier 2xx granted the "
          "others") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({refused_item(film, 4, "play", 503, "service_unavailable", {}, 1),
                                                   granted_item(film, 5, "prefetch", "t5")})));
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  auto batch = play_batch(4);
  batch.episodes.push_back({film, 5, wandura::intent::prefetch});
  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, batch, {}, end, signal.slot());
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  REQUIRE(h.clock->pending_sleeps() >= 1); // the retry of play 4
  signal.emit(asio::cancellation_type::terminal);
  drain(h);
  REQUIRE(end.done);
  INFO(end.what);
  REQUIRE(end.result); // it was: "cancelled after 1 attempt", t5 issued for nobody
  CHECK(end.result->items[1].outcome == item_outcome::granted);
  CHECK(end.result->items[1].ticket);
  CHECK(end.result->items[0].outcome == item_outcome::failed);
  CHECK(end.result->items[0].error == asio::error::operation_aborted);
  CHECK(h.fake->attempt_count() == 1); // the retry was not sent
}

TEST_CASE("lifetime: a call cancelled with its first attempt in flight counts that attempt, with no status") {
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 2s;
  h.fake->push(slow);
  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, play_batch(4), {}, end, signal.slot());
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  CHECK(end.attempts == 1);
  CHECK(end.http_status == 0);
  CHECK(end.what == "issue_tickets: cancelled after 1 attempt (POST /v1/playback/tickets on 127.0.0.1:1)");
  drain(h);
}

TEST_CASE("lifetime: a joiner leaves at its own 300 ms deadline while the first caller waits longer") {
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 3s;
  h.fake->push(slow);
  call_end leader;
  call_end joiner;
  spawn_call(h, play_batch(4), {}, leader);
  poll(h);
  wandura::call_options short_deadline;
  short_deadline.total_timeout = 300ms;
  spawn_call(h, play_batch(4), short_deadline, joiner);
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  REQUIRE(h.clock->advance_to_next_wakeup());
  poll(h);
  REQUIRE(joiner.done);
  CHECK(h.clock->elapsed() == 300ms);
  REQUIRE(joiner.error);
  CHECK(*joiner.error == wandura::errc::deadline_exceeded);
  CHECK(joiner.attempts == 0); // it sent nothing of its own
  CHECK(joiner.what == "issue_tickets: deadline of 300 ms reached while waiting for an identical request in flight");
  CHECK_FALSE(leader.done);
  drain(h);
  REQUIRE(leader.result);
  CHECK(leader.result->items[0].outcome == item_outcome::granted);
  CHECK(h.clock->elapsed() == 3s);
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("lifetime: a caller that joined keeps the request alive for itself when the first caller leaves") {
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 1s;
  h.fake->push(slow);
  asio::cancellation_signal signal;
  call_end leader;
  call_end joiner;
  spawn_call(h, play_batch(4), {}, leader, signal.slot());
  poll(h);
  spawn_call(h, play_batch(4), {}, joiner);
  poll(h);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(leader.error);
  CHECK(*leader.error == asio::error::operation_aborted);
  drain(h);
  REQUIRE(joiner.result);
  CHECK(joiner.result->items[0].outcome == item_outcome::granted);
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("lifetime: a cancelled call, then the client destroyed, touches no freed memory") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({refused_item(film, 4, "play", 503, "service_unavailable", {}, 5)})));
  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, play_batch(4), {}, end, signal.slot());
  poll(h);
  REQUIRE(h.clock->pending_sleeps() == 1); // waiting before the retry of the refused play
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(end.error);
  h.api.reset();
  drain(h);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.clock->pending_sleeps() == 0);
}

TEST_CASE("lifetime: destroying a client with 50 calls in flight completes each with operation_aborted") {
  harness h;
  h.fake->set_default(fake_step::stall());
  std::vector<call_end> ends(50);
  for (int i = 0; i < 50; ++i) {
    // Two calls per episode: half of them join the other half's request.
    spawn_call(h, play_batch(1 + i / 2), {}, ends[static_cast<std::size_t>(i)]);
  }
  poll(h);
  REQUIRE(h.fake->attempt_count() == 25);
  h.api.reset();
  drain(h);
  for (auto const& end : ends) {
    REQUIRE(end.done);
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
  }
  CHECK(h.fake->attempt_count() == 25);
  CHECK(h.clock->pending_sleeps() == 0);
  CHECK(h.clock->elapsed() == 0ms); // nothing waited for a timeout: every attempt was cancelled
}

TEST_CASE("lifetime: shutdown cancels every call, completes when nothing runs, and refuses later calls") {
  harness h;
  h.fake->set_default(fake_step::stall());
  std::vector<call_end> ends(3);
  for (int i = 0; i < 3; ++i) {
    spawn_call(h, play_batch(1 + i), {}, ends[static_cast<std::size_t>(i)]);
  }
  bool reads_aborted = false;
  asio::co_spawn(h.io, h.api->get_config(), [&](std::exception_ptr e, wandura::org_config) {
    try {
      std::rethrow_exception(e);
    } catch (wandura::error const& err) {
      reads_aborted = err.code() == asio::error::operation_aborted;
    } catch (...) {
    }
  });
  poll(h);
  REQUIRE(h.fake->attempt_count() == 4);
  bool shut_down = false;
  asio::co_spawn(h.io, h.api->shutdown(), [&](std::exception_ptr e) { shut_down = !e; });
  poll(h);
  CHECK(shut_down);
  CHECK(reads_aborted);
  for (auto const& end : ends) {
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
  }
  CHECK(h.clock->pending_sleeps() == 0);
  call_end late;
  spawn_call(h, play_batch(9), {}, late);
  poll(h);
  REQUIRE(late.error);
  CHECK(*late.error == asio::error::operation_aborted);
  CHECK(h.fake->attempt_count() == 4);
}

namespace {
/// The calls of `operation` in the per-call duration histogram of `metrics_text`, every outcome summed.
std::uint64_t calls_observed(std::string const& text, std::string const& operation) {
  std::string const prefix = "wandura_call_duration_seconds_count{operation=\"" + operation + "\",";
  std::uint64_t sum = 0;
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    auto const value = text.find("} ", at);
    sum += std::stoull(text.substr(value + 2, text.find('\n', value) - value - 2));
  }
  return sum;
}
} // namespace

TEST_CASE("metrics: failed calls are observed in the call duration histogram too") {
  harness h;
  h.fake->push(fake_step::respond(401, R"({"error_code":"unauthorized"})"));
  CHECK_THROWS_AS(h.start(4, 4), wandura::error);
  h.fake->push(fake_step::respond(404, R"({"error_code":"not_found"})"));
  CHECK_THROWS_AS(h.run(h.api->get_film("nope")), wandura::error);
  auto const m = h.api->stats().metrics;
  CHECK(m.calls == 2);
  CHECK(m.call_failures == 2);
  auto const text = h.api->metrics_text();
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"start_episode\",outcome=\"unauthorized\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"get_film\",outcome=\"http_error\"} 1\n") !=
        std::string::npos);
}

TEST_CASE("lifetime: an io_context destroyed with calls queued at the admission gate frees them and the client their "
          "coroutines own") {
  // Each caller waits in the call registry for its operation, which waits in the admission gate (the counter is held
  // off by a 429): both handlers are parked outside Asio's services, and the coroutines own the client that owns
  // the registry and the gate. Destroying the io_context must free them, as it frees its own pending operations.
  std::weak_ptr<wandura::client> watch_client;
  std::weak_ptr<wandura::ticket_store> watch_store; // owned by the client's state, whoever owns the client
  {
    asio::io_context io;
    wandura::client_options options;
    options.base_url = "http://127.0.0.1:1/"; // nothing is sent: the gate holds every request
    options.api_key = "test-key";
    auto store = std::make_shared<wandura::memory_ticket_store>();
    watch_store = store;
    options.tickets = std::move(store);
    auto api = std::make_shared<wandura::client>(io.get_executor(), std::move(options));
    watch_client = api;
    wandura::counter_feedback refused;
    refused.status = 429;
    refused.refused = 1;
    refused.retry_after = 3s; // within the calls' deadline: they wait for it
    api->engine().gate().observe("playback", refused);
    REQUIRE(api->engine().gate().congested("playback"));
    for (int const episode : {4, 4, 5}) { // two operations, the first with two callers
      asio::co_spawn(
          io,
          [](std::shared_ptr<wandura::client> owner, wandura::ticket_batch batch) -> asio::awaitable<void> {
            auto call = owner->issue_tickets(std::move(batch));
            (void)co_await std::move(call);
          }(api, play_batch(episode)),
          asio::detached);
    }
    api.reset(); // the coroutines' frames own the client now
    auto const queued = [&] {
      std::size_t n = 0;
      if (auto owner = watch_client.lock()) {
        for (auto const& counter : owner->engine().gate().stats()) {
          n += counter.queued_play;
        }
      }
      return n;
    };
    for (int i = 0; i < 100 && queued() < 2; ++i) { // bounded: until both operations are queued
      io.restart();
      io.run_for(1ms);
    }
    REQUIRE(queued() == 2);
    REQUIRE(watch_client.lock()->stats().metrics.coalesced == 1);
  } // ~io_context with the calls parked
  CHECK(watch_client.expired());
  CHECK(watch_store.expired());
}

TEST_CASE("lifetime: another io_context destroyed with calls queued at the gate leaves the client's own calls to "
          "be released") {
  // Calls queued behind a held-off counter from the client's context and from another one, in either order (the
  // other's request queues on the client's context, where it runs). Destroying the other context frees its call;
  // the client's own is still released when the hold-off ends (and then fails to connect: nothing listens).
  bool const other_first = GENERATE(true, false);
  INFO("the other context's call queued " << (other_first ? "first" : "last"));
  asio::io_context own;
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:1/";
  options.api_key = "test-key";
  auto api = std::make_shared<wandura::client>(own.get_executor(), std::move(options));
  wandura::counter_feedback refused;
  refused.status = 429;
  refused.refused = 1;
  refused.retry_after = 1s;
  api->engine().gate().observe("playback", refused);
  bool own_done = false;
  auto const queue_own = [&] {
    asio::co_spawn(own, api->issue_tickets(play_batch(4)),
                   [&](std::exception_ptr, wandura::ticket_batch_result) { own_done = true; });
    own.poll();
  };
  {
    asio::io_context other;
    if (!other_first) {
      queue_own();
    }
    asio::co_spawn(other, api->issue_tickets(play_batch(5)), asio::detached);
    other.poll();
    own.poll(); // its request, started there, runs to the gate
    if (other_first) {
      queue_own();
    }
    std::size_t queued = 0;
    for (auto const& counter : api->engine().gate().stats()) {
      queued += counter.queued_play;
    }
    REQUIRE(queued == 2);
  }                                            // the other context goes, with its call queued
  for (int i = 0; i < 500 && !own_done; ++i) { // bounded: 5 s against a 1 s hold-off
    own.restart();
    own.run_for(10ms);
  }
  CHECK(own_done);
}

TEST_CASE("lifetime: a call from another io_context runs on the client's, so that context may stop or go with the "
          "call pending") {
  // The first caller runs on another io_context, which stops running once its call has started, against a server
  // that never answers: the request runs on the client's context, where a caller that joined it from there leaves
  // at its own deadline. The other context is then destroyed with its call pending (its wait is freed; the request,
  // with no caller left, is cancelled) and the client still serves and shuts down; destroying the client's context
  // afterwards touches nothing of the other's (the request's attempt was once parked there, with its coroutine).
  asio::io_context own;
  asio::ip::tcp::acceptor silent(own, {asio::ip::make_address("127.0.0.1"), 0}); // listens, never answers
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  options.api_key = "test-key";
  auto api = std::make_shared<wandura::client>(own.get_executor(), std::move(options));
  auto const run_own_until = [&](auto const& done) {
    for (int i = 0; i < 400 && !done(); ++i) { // bounded: 4 s
      own.restart();
      own.run_for(10ms);
    }
  };
  auto const spawn_on_own = [&](wandura::call_options call, std::optional<std::error_code>& error) {
    asio::co_spawn(own, api->issue_tickets(play_batch(4), std::move(call)),
                   [&error](std::exception_ptr failure, wandura::ticket_batch_result) {
                     try {
                       if (failure) {
                         std::rethrow_exception(failure);
                       }
                       error = std::error_code();
                     } catch (wandura::error const& e) {
                       error = e.code();
                     }
                   });
  };
  bool leader_done = false;
  {
    asio::io_context other;
    wandura::call_options leader_options;
    leader_options.total_timeout = 10s;
    asio::co_spawn(other, api->issue_tickets(play_batch(4), leader_options),
                   [&](std::exception_ptr, wandura::ticket_batch_result) { leader_done = true; });
    other.poll(); // the call is made; `other` runs no more
    wandura::call_options joiner_options;
    joiner_options.total_timeout = 300ms;
    std::optional<std::error_code> joiner_error;
    auto const started = std::chrono::steady_clock::now();
    spawn_on_own(joiner_options, joiner_error);
    run_own_until([&] { return joiner_error.has_value(); });
    auto const waited = std::chrono::steady_clock::now() - started;
    REQUIRE(joiner_error);
    CHECK(*joiner_error == wandura::errc::deadline_exceeded);
    CHECK(waited >= 300ms);
    CHECK(waited < 1300ms);
    CHECK(api->stats().metrics.coalesced == 1);
  } // `other` goes with its call pending
  CHECK_FALSE(leader_done);
  wandura::call_options short_call;
  short_call.total_timeout = 200ms;
  std::optional<std::error_code> later_error;
  spawn_on_own(short_call, later_error);
  run_own_until([&] { return later_error.has_value(); });
  REQUIRE(later_error);
  CHECK(*later_error == wandura::errc::deadline_exceeded);
  CHECK(api->stats().metrics.coalesced == 1); // a request of its own: the other's was cancelled with its caller
  bool shut = false;
  asio::co_spawn(own, api->shutdown(), [&](std::exception_ptr) { shut = true; });
  run_own_until([&] { return shut; });
  CHECK(shut);
}

TEST_CASE("lifetime: the client destroyed, then its io_context without running, with a request of another "
          "context's caller in flight, frees that request and tells its caller") {
  // The request of a caller on another context runs on the client's context (against a server that never
  // answers). The client is destroyed: its caller is told operation_aborted on its own context, which runs that
  // completion; then the client's context is destroyed without running again: the request's coroutine is freed
  // with it, and nothing of the client may stay behind (its ticket store, which only the client holds besides
  // this test, is freed with it).
  asio::io_context listener; // the server's, never run: the kernel accepts, nothing answers
  asio::ip::tcp::acceptor silent(listener, {asio::ip::make_address("127.0.0.1"), 0});
  asio::io_context other;
  auto own = std::make_unique<asio::io_context>();
  auto store = std::make_shared<wandura::memory_ticket_store>();
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  options.api_key = "test-key";
  options.tickets = store;
  auto api = std::make_unique<wandura::client>(own->get_executor(), std::move(options));
  std::optional<std::error_code> caller_error;
  asio::co_spawn(other, api->issue_tickets(play_batch(4)),
                 [&](std::exception_ptr failure, wandura::ticket_batch_result) {
                   try {
                     if (failure) {
                       std::rethrow_exception(failure);
                     }
                     caller_error = std::error_code();
                   } catch (wandura::error const& e) {
                     caller_error = e.code();
                   }
                 });
  other.poll();        // the call is made: its request is queued on the client's context
  own->run_for(100ms); // where it connects and sends, and waits for an answer that never comes
  api.reset();
  for (int i = 0; i < 100 && !caller_error; ++i) {
    other.restart();
    other.run_for(10ms);
  }
  REQUIRE(caller_error);
  CHECK(*caller_error == asio::error::operation_aborted);
  CHECK(store.use_count() > 1);  // the request, cancelled on a context that does not run, holds the client's state
  own.reset();                   // never run again
  CHECK(store.use_count() == 1); // nothing of the client is left
}

namespace {
/// The operation and error of each call's end, as "<op> <error or ok>".
struct call_end_recorder final : wandura::attempt_observer {
  void* on_attempt_begin(wandura::attempt_begin const&) noexcept override { return nullptr; }
  void on_attempt_end(void*, wandura::attempt_begin const&, wandura::attempt_end const&) noexcept override {}
  void on_call_end(wandura::call_end const& c) noexcept override {
    ends.push_back(std::string(c.operation) + " " + (c.error ? c.error.message() : "ok"));
  }
  std::vector<std::string> ends;
};
} // namespace

TEST_CASE("lifetime: a call whose coroutine goes with its io_context ends operation_aborted for the observer, not as "
          "a success") {
  // attempt_observer.hpp: a client call whose coroutine is destroyed before it completes ends with
  // operation_aborted (counted a failure, as in the client's stats).
  asio::io_context listener; // the server's, never run: the kernel accepts, nothing answers
  asio::ip::tcp::acceptor silent(listener, {asio::ip::make_address("127.0.0.1"), 0});
  auto own = std::make_unique<asio::io_context>();
  auto observer = std::make_shared<call_end_recorder>();
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  options.api_key = "test-key";
  options.retry.observer = observer;
  auto api = std::make_unique<wandura::client>(own->get_executor(), std::move(options));
  asio::co_spawn(*own, api->get_config(), asio::detached);
  asio::co_spawn(*own, api->issue_tickets(play_batch(4)), asio::detached);
  own->run_for(100ms); // both sent, waiting for answers that never come
  CHECK(observer->ends.empty());
  api.reset();
  own.reset(); // never run again: the calls' coroutines are destroyed with it
  std::sort(observer->ends.begin(), observer->ends.end());
  auto const aborted = make_error_code(asio::error::operation_aborted).message();
  CHECK(observer->ends == std::vector<std::string>{"get_config " + aborted, "issue_tickets " + aborted});
}

TEST_CASE("lifetime: when the caller that started a shared request leaves, a caller still waiting reports its fresh "
          "tickets and stores them") {
  // Each fresh ticket is reported fresh once, by the first caller to take the request's result: the one that
  // started it is gone, so the joiner does, and stores it, so that the next identical call is answered from the
  // store. The viewer's allowance (limit 1) stays spent: the viewer got the ticket.
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1;
  harness h(options);
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 2s;
  h.fake->push(slow);
  asio::cancellation_signal starter_signal;
  call_end starter;
  call_end joiner;
  spawn_call(h, play_batch(4), {}, starter, starter_signal.slot());
  spawn_call(h, play_batch(4), {}, joiner);
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  starter_signal.emit(asio::cancellation_type::terminal);
  drain(h);
  REQUIRE(starter.done);
  CHECK(starter.error == std::optional<std::error_code>(asio::error::operation_aborted));
  REQUIRE(joiner.result);
  auto const& item = joiner.result->items.at(0);
  CHECK(item.outcome == item_outcome::granted);
  CHECK_FALSE(item.reused);
  CHECK(h.api->stats().metrics.coalesced == 1);

  auto const again = h.run(h.api->issue_tickets(play_batch(4)));
  CHECK(h.fake->attempt_count() == 1); // from the store
  CHECK(again.items.at(0).reused);
  auto const other = h.run(h.api->issue_tickets(play_batch(6)));
  CHECK(other.items.at(0).outcome == item_outcome::viewer_limited); // the one ticket of the minute was spent
}

TEST_CASE("fail at step N: every step of a batch with per-item retries ends complete or in a clean typed error, with "
          "the allowance settled") {
  // The batch: play 4, prefetch 5 and 6. The script: a whole 503, then a 200 where the play is refused (503, retried
  // alone) while 5 is granted and 6 shed, then the play granted. Each attempt N in turn fails instead, with a
  // retryable and with a final transport error; N = 5 is past the last step (no failure).
  std::error_code const injected =
      GENERATE(std::error_code(wandura::errc::connection_reset), std::error_code(wandura::errc::tls_failed));
  for (std::size_t n = 1; n <= 5; ++n) {
    INFO("failure " << injected.message() << " at attempt " << n);
    wandura::client_options options;
    options.viewer_tickets_per_minute = 3;
    harness h(options);
    h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "1"}}));
    h.fake->push(fake_step::respond(
        200, batch_body({refused_item(film, 4, "play", 503, "service_unavailable", {}, 1),
                         granted_item(film, 5, "prefetch", "t5"),
                         refused_item(film, 6, "prefetch", 429, "rate_limited", "prefetch_shed", 2)})));
    h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
    h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
    h.fake->fail_at(n, injected);

    int fresh = 0;
    try {
      auto const s = h.start(4, 6);
      CHECK(s.play.outcome != item_outcome::deferred);
      CHECK(s.play.film_ref == film);
      for (auto const& item : s.prefetch) {
        CHECK(item.outcome != item_outcome::deferred);
      }
      for (auto const* item : {&s.play, &s.prefetch[0], &s.prefetch[1]}) {
        fresh += item->outcome == item_outcome::granted && !item->reused ? 1 : 0;
      }
      CHECK(h.api->stats().metrics.call_failures == 0);
    } catch (wandura::error const& e) {
      CHECK(e.code() == injected);
      CHECK(h.api->stats().metrics.call_failures == 1);
    }
    CHECK(calls_observed(h.api->metrics_text(), "start_episode") == 1);
    CHECK(h.fake->attempt_count() <= 4); // INTERACTIVE: at most 3 retries, follow-ups included

    // What stays taken of the viewer's 3 tickets: those granted fresh, and those of an attempt whose answer was
    // lost (the server may have issued them: the fake consumes the step, as a server would have answered) and that
    // no later answer covered. Attempts: 1 (4, 5, 6) whole 503; 2 (4, 5, 6) 4 refused, 5 granted, 6 shed; 3 (4)
    // granted; a failure at attempt N is instead of that answer.
    bool const final_failure = injected == wandura::errc::tls_failed;
    int const expected_kept = n == 1   ? (final_failure ? 3 : 2) // lost; retried, attempt 2 answers all three
                              : n == 2 ? 3                       // attempt 2's answer (5 granted) lost, no other
                                       : 2;                      // 4 and 5, or 5 fresh and 4 lost (then the call ends)
    CHECK(expected_kept >= fresh);
    // Probe it with three plays: the limit refuses the rest before sending. (Script steps and a failure left over
    // are consumed first by reads.)
    for (int i = 0; i < 5 && (h.fake->steps_left() > 0 || h.fake->attempt_count() < n); ++i) {
      wandura::call_options once;
      once.disable_retries = true;
      try {
        (void)h.run(h.api->get_config(once));
      } catch (wandura::error const&) {
      }
    }
    wandura::ticket_batch probe;
    probe.union_info = "dev-1";
    probe.drm_kek = "kek";
    probe.viewer_ref = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";
    for (int e = 7; e <= 9; ++e) {
      probe.episodes.push_back({film, e, wandura::intent::play});
    }
    auto const after = h.run(h.api->issue_tickets(probe));
    int limited = 0;
    for (auto const& item : after.items) {
      limited += item.outcome == item_outcome::viewer_limited ? 1 : 0;
    }
    CHECK(limited == expected_kept);
  }
}

namespace {
/// A ticket store whose lookups and stores wait `delay` of real time (a slow or stalled shared store), each wait
/// cancelled through its coroutine's cancellation slot; counts the waits that ended and how.
class slow_store final : public wandura::ticket_store {
public:
  explicit slow_store(std::chrono::milliseconds lookup, std::chrono::milliseconds store)
      : lookup_(lookup), store_(store) {}
  asio::awaitable<std::vector<std::optional<wandura::ticket>>> find(std::vector<wandura::ticket_key> keys) override {
    co_await wait(lookup_);
    co_return std::vector<std::optional<wandura::ticket>>(keys.size());
  }
  asio::awaitable<void> insert(wandura::ticket_key, wandura::ticket) override { co_await wait(store_); }
  asio::awaitable<void> erase(wandura::ticket_key) override { co_return; }

  int waits_ended = 0;
  int waits_cancelled = 0;

private:
  asio::awaitable<void> wait(std::chrono::milliseconds delay) {
    asio::steady_timer timer(co_await asio::this_coro::executor, delay);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    ++waits_ended;
    waits_cancelled += ec == asio::error::operation_aborted ? 1 : 0;
  }
  std::chrono::milliseconds lookup_;
  std::chrono::milliseconds store_;
};

/// Runs the harness's io_context in real time until `done()` or `limit`.
template <class Done> bool run_real_until(harness& h, Done done, std::chrono::milliseconds limit) {
  for (auto left = limit; !done() && left > 0ms; left -= 10ms) {
    h.io.restart();
    h.io.run_for(10ms);
  }
  return done();
}
} // namespace

TEST_CASE("lifetime: a call waiting on its ticket store ends at once when the client is destroyed or shut down or "
          "the call is cancelled, and the store's wait is cancelled") {
  bool const at_lookup = GENERATE(true, false); // waiting on the lookup, or on the store of its fresh ticket
  auto const how = GENERATE(as<std::string>{}, "destroyed", "shut down", "cancelled");
  CAPTURE(at_lookup, how);
  auto store = std::make_shared<slow_store>(at_lookup ? 10s : 0ms, at_lookup ? 0ms : 10s);
  wandura::client_options options;
  options.tickets = store;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, play_batch(4), {}, end, signal.slot());
  REQUIRE(run_real_until(
      h, [&] { return store->waits_ended == (at_lookup ? 0 : 1); }, 1000ms));
  poll(h);
  REQUIRE_FALSE(end.done);
  bool shut_down = false;
  end_calls(h, how, signal, shut_down);
  int const waits = at_lookup ? 1 : 2;
  REQUIRE(run_real_until(
      h, [&] { return end.done && store->waits_ended == waits; }, 1000ms)); // not 10 s
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  CHECK(store->waits_cancelled == 1);
  CHECK(h.fake->attempt_count() == (at_lookup ? 0 : 1));
  if (how == "shut down") {
    CHECK(run_real_until(
        h, [&] { return shut_down; }, 1000ms));
  }
}

TEST_CASE("lifetime: the call's deadline counts the ticket store's time: a lookup past it ends the call, a store of "
          "its fresh tickets past it is given up and the call keeps them") {
  bool const at_lookup = GENERATE(true, false);
  CAPTURE(at_lookup);
  auto store = std::make_shared<slow_store>(at_lookup ? 10s : 0ms, at_lookup ? 0ms : 10s);
  wandura::client_options options;
  options.tickets = store;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  wandura::call_options short_call;
  short_call.total_timeout = 1000ms;
  call_end end;
  spawn_call(h, play_batch(4), short_call, end);
  REQUIRE(run_real_until(
      h, [&] { return store->waits_ended == (at_lookup ? 0 : 1); }, 1000ms));
  poll(h);
  REQUIRE_FALSE(end.done);
  h.clock->advance(1000ms); // the call's deadline, on the client's clock; the store's wait is 10 s of real time
  REQUIRE(run_real_until(
      h, [&] { return end.done && store->waits_ended == (at_lookup ? 1 : 2); }, 1000ms));
  CHECK(store->waits_cancelled == 1);
  if (at_lookup) {
    REQUIRE(end.error);
    CHECK(*end.error == wandura::errc::deadline_exceeded);
    CHECK(end.what ==
          "issue_tickets: deadline of 1000 ms reached while the ticket store looked up the batch's tickets");
    CHECK(h.fake->attempt_count() == 0);
  } else {
    REQUIRE(end.result);
    CHECK(end.result->items.at(0).outcome == item_outcome::granted);
    CHECK(h.fake->attempt_count() == 1);
  }
}

TEST_CASE("lifetime: a caller cancelled after its wait for a shared request ended keeps the request's tickets, and "
          "they are stored") {
  // The caller that started the request leaves; a caller that joined it from another io_context is then the one to
  // report and store its tickets. Its completion is posted to its own context, and it is cancelled before that runs:
  // its frame is cancelled when it resumes with the result in hand. It returns the result, as a wandura call ends,
  // and stores the tickets without waiting (nothing thrown from a co_await in a cancelled frame).
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 100ms;
  h.fake->push(slow);
  asio::cancellation_signal starter_signal;
  call_end starter;
  spawn_call(h, play_batch(4), {}, starter, starter_signal.slot());
  poll(h);
  asio::io_context other;
  asio::cancellation_signal joiner_signal;
  call_end joiner;
  spawn_call(h, play_batch(4), {}, joiner, joiner_signal.slot(), &other);
  other.poll(); // joins the request in flight
  REQUIRE(h.api->stats().metrics.coalesced == 1);
  starter_signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(starter.done);
  h.clock->advance(100ms); // the answer: the request ends, and the joiner's completion is posted to `other`
  poll(h);
  REQUIRE_FALSE(joiner.done);
  joiner_signal.emit(asio::cancellation_type::terminal); // its wait already ended: its frame is cancelled
  other.restart();
  other.poll();
  REQUIRE(joiner.done);
  CHECK_FALSE(joiner.other_exception);
  REQUIRE(joiner.result);
  CHECK(joiner.result->items.at(0).outcome == item_outcome::granted);
  CHECK_FALSE(joiner.result->items.at(0).reused); // reported fresh, by the caller that owns the result
  auto const again = h.run(h.api->issue_tickets(play_batch(4)));
  CHECK(again.items.at(0).reused); // stored: answered from the store
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("lifetime: destroying or shutting down the client while a call sleeps before its retry or waits out a "
          "429's hold-off ends the call at once with operation_aborted") {
  // client.hpp, Lifetime and Cancellation: `~client()` and `shutdown()` cancel every call in flight, "whether it is
  // sending, waiting to retry, waiting for a 429 hold-off". On the hand-stepped clock, "at once" is exact: the call
  // ends without the clock moving, nothing more is sent and no timer is left.
  auto const wait = GENERATE(as<std::string>{}, "backoff", "hold-off");
  auto const how = GENERATE(as<std::string>{}, "destroyed", "shut down");
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(wait, how, call);
  harness h;
  if (wait == "backoff") {
    h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "5"}}));
  } else { // a 429's wait is the admission gate's hold-off of the counter, not a sleep of the retry's own
    h.fake->push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "5"}}));
  }
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  call_end end;
  if (call == "issue_tickets") {
    spawn_call(h, play_batch(4), {}, end);
  } else {
    spawn_any(h, h.api->get_config(), end);
  }
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  REQUIRE_FALSE(end.done);
  REQUIRE(h.clock->pending_sleeps() == 1); // the retry's sleep, or the wait at the gate
  std::string const counter = call == "issue_tickets" ? "playback" : "config";
  std::size_t queued = 0;
  for (auto const& c : h.api->engine().gate().stats()) {
    queued += c.counter == counter ? c.queued_play : 0;
  }
  CHECK(queued == (wait == "hold-off" ? 1U : 0U));

  bool shut_down = false;
  if (how == "destroyed") {
    h.api.reset();
  } else {
    asio::co_spawn(h.io, h.api->shutdown(), [&](std::exception_ptr e) { shut_down = !e; });
  }
  poll(h);
  REQUIRE(end.done);
  CHECK_FALSE(end.other_exception);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  CHECK(end.attempts == 1);
  // How far it got, as the client's end found it, and which request it was, as the request's own end says.
  auto const target = call == "get_config" ? std::string(" (GET /v1/config on 127.0.0.1:1)")
                                           : std::string(" (POST /v1/playback/tickets on 127.0.0.1:1)");
  CHECK(end.what == call + ": cancelled after 1 attempt" + target);
  CHECK(shut_down == (how == "shut down"));
  CHECK(h.clock->elapsed() == 0ms); // neither the 5 s backoff nor the 5 s hold-off was waited
  CHECK(h.clock->pending_sleeps() == 0);
  drain(h);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.clock->elapsed() == 0ms);
}

TEST_CASE("lifetime: a joiner cancelled through its slot leaves at once, and the first caller still gets its ticket") {
  // client.hpp, Cancellation: a call ends at once "whether it is ... waiting for an identical request in flight";
  // issue_tickets: the joiner "leaves alone". The shared request is the first caller's and goes on for it.
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 1s;
  h.fake->push(slow);
  asio::cancellation_signal signal;
  call_end leader;
  call_end joiner;
  spawn_call(h, play_batch(4), {}, leader);
  poll(h);
  spawn_call(h, play_batch(4), {}, joiner, signal.slot());
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  REQUIRE_FALSE(joiner.done);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(joiner.done);
  CHECK_FALSE(joiner.other_exception);
  REQUIRE(joiner.error);
  CHECK(*joiner.error == asio::error::operation_aborted);
  CHECK(joiner.attempts == 0); // it sent nothing of its own
  CHECK(h.clock->elapsed() == 0ms);
  CHECK_FALSE(leader.done);
  drain(h);
  REQUIRE(leader.result);
  CHECK(leader.result->items[0].outcome == item_outcome::granted);
  CHECK_FALSE(leader.result->items[0].reused);
  CHECK(h.clock->elapsed() == 1s);
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("lifetime: a call cancelled through its slot while it sleeps before its retry, waits out its 429's "
          "hold-off or is queued behind another call's ends at once with operation_aborted") {
  // client.hpp, Cancellation: terminal cancellation through the awaiting coroutine's slot ends a call at once
  // "whether it is sending, waiting to retry, waiting for a 429 hold-off". On the hand-stepped clock "at once" is
  // exact: the clock does not move, and the cancelled call sends nothing more.
  auto const wait = GENERATE(as<std::string>{}, "backoff", "hold-off", "queued");
  auto const call = GENERATE(as<std::string>{}, "issue_tickets", "get_config");
  CAPTURE(wait, call);
  harness h;
  if (wait == "backoff") {
    h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})", {{"Retry-After", "5"}}));
  } else {
    h.fake->push(fake_step::respond(429, R"({"error_code":"rate_limited"})", {{"Retry-After", "5"}}));
  }
  h.fake->set_default(call == "issue_tickets"
                          ? fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t")}))
                          : fake_step::respond(200, R"({"org_id":"org_1"})"));
  auto const spawn = [&](call_end& end, asio::cancellation_slot slot, int episode) {
    if (call == "issue_tickets") {
      spawn_call(h, play_batch(episode), {}, end, slot);
    } else {
      spawn_any(h, h.api->get_config(), end, slot);
    }
  };
  asio::cancellation_signal signal;
  call_end first;  // the call that gets the 503 or the 429
  call_end queued; // with wait == "queued": a second call, arriving while the counter is held
  spawn(first, wait == "queued" ? asio::cancellation_slot{} : signal.slot(), 4);
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  if (wait == "queued") {
    spawn(queued, signal.slot(), 5);
    poll(h);
    REQUIRE(h.fake->attempt_count() == 1);
    REQUIRE_FALSE(queued.done);
  }
  call_end& cancelled = wait == "queued" ? queued : first;
  REQUIRE_FALSE(cancelled.done);
  signal.emit(asio::cancellation_type::terminal);
  poll(h);
  REQUIRE(cancelled.done);
  CHECK_FALSE(cancelled.other_exception);
  REQUIRE(cancelled.error);
  CHECK(*cancelled.error == asio::error::operation_aborted);
  CHECK(cancelled.attempts == (wait == "queued" ? 0 : 1));
  CHECK(h.clock->elapsed() == 0ms); // neither the 5 s backoff nor the 5 s hold-off was waited
  drain(h);
  if (wait == "queued") {
    // The call it was queued with goes on as if nothing happened: its retry when the hold-off ends.
    CHECK(first.done);
    CHECK_FALSE(first.error);
    CHECK(h.fake->attempt_count() == 2);
  } else {
    CHECK(h.fake->attempt_count() == 1);
  }
}

namespace {
/// A viewer limit whose `acquire` waits `delay` of real time before allowing (a slow or stalled shared limit), the
/// wait cancelled through its coroutine's cancellation slot; counts what it was asked and given back.
class slow_limit final : public wandura::viewer_limit {
public:
  explicit slow_limit(std::chrono::milliseconds delay) : delay_(delay) {}
  asio::awaitable<decision> acquire(std::string, std::uint32_t tickets) override {
    asio::steady_timer timer(co_await asio::this_coro::executor, delay_);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    ++waits_ended;
    if (ec == asio::error::operation_aborted) {
      ++waits_cancelled;
      throw wandura::error(asio::error::operation_aborted, "slow_limit: cancelled");
    }
    taken += tickets;
    co_return decision{true, 0ms, account::primary};
  }
  void release(std::string_view, std::uint32_t tickets, account) noexcept override { given_back += tickets; }

  int waits_ended = 0;
  int waits_cancelled = 0;
  std::uint32_t taken = 0;
  std::uint32_t given_back = 0;

private:
  std::chrono::milliseconds delay_;
};
} // namespace

TEST_CASE("lifetime: a call waiting on its viewer limit ends at once when cancelled or when the client is destroyed "
          "or shut down, having sent nothing, and the limit's wait is cancelled") {
  // viewer_limit.hpp: `acquire` throws operation_aborted when the awaiting coroutine is cancelled, and "the client's
  // call then fails the same way, having sent nothing"; client.hpp: every call ends at once on cancellation,
  // destruction or shutdown.
  auto const how = GENERATE(as<std::string>{}, "cancelled", "destroyed", "shut down");
  CAPTURE(how);
  auto limit = std::make_shared<slow_limit>(10s);
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  asio::cancellation_signal signal;
  call_end end;
  spawn_call(h, play_batch(4), {}, end, signal.slot());
  REQUIRE_FALSE(run_real_until(
      h, [&] { return end.done; }, 50ms)); // waiting on the limit
  bool shut_down = false;
  end_calls(h, how, signal, shut_down);
  REQUIRE(run_real_until(
      h, [&] { return end.done && limit->waits_ended == 1; }, 1000ms)); // not 10 s
  CHECK_FALSE(end.other_exception);
  REQUIRE(end.error);
  CHECK(*end.error == asio::error::operation_aborted);
  CHECK(limit->waits_cancelled == 1);
  CHECK(limit->taken == limit->given_back);
  CHECK(h.fake->attempt_count() == 0);
  if (how == "shut down") {
    CHECK(run_real_until(
        h, [&] { return shut_down; }, 1000ms));
  }
}

TEST_CASE("lifetime: shutdown awaited twice at once and once more later completes each time, and every kind of call "
          "made after it is refused") {
  // client.hpp, shutdown(): "Never fails. May be awaited from any coroutine"; it "refuses new ones (they fail with
  // operation_aborted)": each call of the client, not only issue_tickets.
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 5s;
  h.fake->push(slow);
  call_end in_flight;
  spawn_call(h, play_batch(4), {}, in_flight);
  poll(h);
  REQUIRE(h.fake->attempt_count() == 1);
  int shut_down = 0;
  int shutdown_failed = 0;
  auto const shut = [&] {
    asio::co_spawn(h.io, h.api->shutdown(), [&](std::exception_ptr e) { ++(e ? shutdown_failed : shut_down); });
  };
  shut();
  shut();
  poll(h);
  CHECK(shut_down == 2);
  REQUIRE(in_flight.error);
  CHECK(*in_flight.error == asio::error::operation_aborted);
  shut();
  poll(h);
  CHECK(shut_down == 3);
  CHECK(shutdown_failed == 0);

  std::vector<call_end> late(7);
  spawn_call(h, play_batch(5), {}, late[0]);
  spawn_any(h, h.api->start_episode(harness::viewer_on(), film, 6, 8), late[1]);
  spawn_any(h, h.api->get_config(), late[2]);
  spawn_any(h, h.api->get_film(film), late[3]);
  spawn_any(h, h.api->list_videos(), late[4]);
  spawn_any(h, h.api->get_video("v1"), late[5]);
  spawn_any(h, h.api->list_creatives(), late[6]);
  poll(h);
  for (std::size_t i = 0; i < late.size(); ++i) {
    CAPTURE(i);
    REQUIRE(late[i].done);
    CHECK_FALSE(late[i].other_exception);
    REQUIRE(late[i].error);
    CHECK(*late[i].error == asio::error::operation_aborted);
  }
  drain(h);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.clock->elapsed() == 0ms);
}

TEST_CASE("lifetime: after shutdown or the client's destruction, a ticket call the store alone would answer is "
          "refused too") {
  // client.hpp: shutdown() "refuses new ones (they fail with operation_aborted)"; ~client() ends each call with
  // operation_aborted. A call whose every item the ticket store holds sends nothing, and still must not succeed.
  auto const how = GENERATE(as<std::string>{}, "shut down", "destroyed");
  CAPTURE(how);
  harness h; // the default options: reuse on, a store in memory
  h.fake->push(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
  CHECK_FALSE(h.start(4, 4).play.reused);
  auto const stored = h.start(4, 4);
  REQUIRE(stored.play.reused); // from the store: no request
  REQUIRE(h.fake->attempt_count() == 1);

  wandura::ticket_batch batch;
  batch.episodes.push_back({film, 4, wandura::intent::play});
  auto const who = harness::viewer_on();
  batch.viewer_ref = who.viewer_ref;
  batch.union_info = who.union_info;
  batch.drm_kek = who.drm_kek;
  std::vector<call_end> ends(2);
  if (how == "shut down") {
    bool shut_down = false;
    asio::co_spawn(h.io, h.api->shutdown(), [&](std::exception_ptr e) { shut_down = !e; });
    poll(h);
    REQUIRE(shut_down);
    spawn_any(h, h.api->start_episode(who, film, 4, 4), ends[0]);
    spawn_any(h, h.api->issue_tickets(batch), ends[1]);
  } else {
    auto episode = h.api->start_episode(who, film, 4, 4);
    auto tickets = h.api->issue_tickets(batch);
    h.api.reset();
    spawn_any(h, std::move(episode), ends[0]);
    spawn_any(h, std::move(tickets), ends[1]);
  }
  drain(h);
  for (auto const& end : ends) {
    REQUIRE(end.done);
    CHECK_FALSE(end.other_exception);
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
  }
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("lifetime: a call made, then its client destroyed before the call starts, ends operation_aborted") {
  // Every call takes its share of the client when it is made: an awaitable started only after `~client()` (a
  // deferred co_spawn, a coroutine that awaits it later) must not read the destroyed client.
  harness h;
  h.fake->set_default(fake_step::respond(200, "{}"));
  auto config = h.api->get_config();
  auto one_film = h.api->get_film("the-heiress-returns");
  auto videos = h.api->list_videos();
  auto one_video = h.api->get_video("v1");
  auto creatives = h.api->list_creatives();
  auto tickets = h.api->issue_tickets(play_batch(4));
  auto episode = h.api->start_episode(harness::viewer_on(), film, 4, 6);
  h.api.reset();

  std::vector<std::pair<std::string, call_end>> ends(7);
  std::size_t next = 0;
  auto spawn = [&](std::string name, auto op) {
    auto& [label, end] = ends[next++];
    label = std::move(name);
    asio::co_spawn(h.io, std::move(op), [&end](std::exception_ptr e, auto) {
      end.done = true;
      if (e) {
        end.ended_with(e);
      }
    });
  };
  spawn("get_config", std::move(config));
  spawn("get_film", std::move(one_film));
  spawn("list_videos", std::move(videos));
  spawn("get_video", std::move(one_video));
  spawn("list_creatives", std::move(creatives));
  spawn("issue_tickets", std::move(tickets));
  spawn("start_episode", std::move(episode));
  drain(h);
  for (auto const& [name, end] : ends) {
    INFO(name);
    REQUIRE(end.done);
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
  }
  CHECK(h.fake->attempt_count() == 0);
}

TEST_CASE("lifetime: partial and total cancellation let through by the caller end the call as terminal does") {
  // A coroutine passes only terminal cancellation on by default. One that lets partial or total through gets the
  // call ended at once as for terminal (client.hpp, "Cancellation"): the call cannot promise that nothing happened,
  // and the awaiting coroutine would throw at its next suspension anyway, its cancellation state being set.
  harness h;
  auto slow = fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")}));
  slow.latency = 2s;
  std::string device = "dev-a";
  for (auto const type :
       {asio::cancellation_type::partial, asio::cancellation_type::total, asio::cancellation_type::terminal}) {
    INFO(static_cast<int>(type));
    h.fake->push(slow);
    device.back() = static_cast<char>(device.back() + 1); // each on its own device: nothing reused from the store
    asio::cancellation_signal signal;
    call_end end;
    auto call = [](wandura::client& api, wandura::ticket_batch batch) -> asio::awaitable<wandura::ticket_batch_result> {
      co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
      co_return co_await api.issue_tickets(std::move(batch));
    };
    auto const before = h.clock->now();
    asio::co_spawn(
        h.io, call(*h.api, play_batch(4, device)),
        asio::bind_cancellation_slot(
            signal.slot(), [&end](std::exception_ptr e, wandura::ticket_batch_result) { end.ended_with(e); }));
    poll(h);
    REQUIRE_FALSE(end.done);
    signal.emit(type);
    poll(h);
    REQUIRE(end.done); // at once, not after the 2 s answer
    CHECK(h.clock->now() == before);
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
    drain(h);
  }
}

TEST_CASE("lifetime: a call cancelled in the instant its retry falls due sends nothing more") {
  // The sleep before the retry completes (posted), then the last caller leaves before the call runs again: the
  // request's cancellation is posted behind the sleep's completion, and must still stop the retry.
  for (bool const destroy : {false, true}) {
    INFO((destroy ? "the client destroyed" : "cancelled through the slot"));
    harness h;
    h.fake->push(fake_step::respond(503, "{}"));
    h.fake->set_default(fake_step::respond(200, batch_body({granted_item(film, 4, "play", "t4")})));
    asio::cancellation_signal signal;
    call_end end;
    spawn_call(h, play_batch(4), {}, end, signal.slot());
    poll(h);
    REQUIRE(h.fake->attempt_count() == 1);
    REQUIRE(h.clock->pending_sleeps() == 1);
    REQUIRE(h.clock->advance_to_next_wakeup()); // the sleep's completion is now queued, not yet run
    if (destroy) {
      h.api.reset();
    } else {
      signal.emit(asio::cancellation_type::terminal);
    }
    drain(h);
    REQUIRE(end.done);
    REQUIRE(end.error);
    CHECK(*end.error == asio::error::operation_aborted);
    CHECK(h.fake->attempt_count() == 1); // no retry went out
  }
}
