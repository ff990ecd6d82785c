// The `client::async_` forms complete as Asio's operations do, `void(std::error_code, T)`: with plain callbacks,
// `asio::redirect_error`, `asio::experimental::as_tuple`, `asio::use_future` and `asio::use_awaitable`, and a
// failure's details are read through `wandura::with_error_info` without any exception.
#include "wandura/playback/client.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/playback/error_info_token.hpp"
#include "wandura/resilience/clock.hpp"
#include "wandura/testing/fake_transport.hpp"

#include "client_harness.hpp"

using namespace client_harness;
using wandura::testing::fake_step;

namespace {

constexpr char const* not_found_body = R"({"error_code":"not_found","reason":"gone"})";

/// A 404 with a server code and an `X-Request-Id`.
fake_step not_found() {
  return fake_step::respond(404, not_found_body, {{"X-Request-Id", "req_404"}});
}

/// Polls the context and steps the clock until `done` or 1000 rounds.
void drive(harness& h, bool const& done) {
  for (int i = 0; i < 1000 && !done; ++i) {
    h.io.restart();
    h.io.poll();
    if (!done) {
      h.clock->advance_to_next_wakeup();
    }
  }
}

/// Starts one `async_` form of `api` with `token`, for each form in turn (index 0 to 6).
template <typename Token> void start_form(wandura::client& api, int form, Token token) {
  switch (form) {
  case 0: api.async_issue_tickets(single_play_batch(), std::move(token)); break;
  case 1: api.async_start_episode({"", "dev-1", "kek"}, "the-heiress-returns", 4, 4, std::move(token)); break;
  case 2: api.async_get_config(std::move(token)); break;
  case 3: api.async_get_film("nope", std::move(token)); break;
  case 4: api.async_list_videos(std::move(token)); break;
  case 5: api.async_get_video("nope", std::move(token)); break;
  default: api.async_list_creatives(std::move(token)); break;
  }
}

} // namespace

TEST_CASE("async forms: a plain callback gets no error and the value") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
  bool done = false;
  std::error_code code = wandura::errc::transport_failed;
  wandura::org_config config;
  h.api->async_get_config(wandura::call_options{}, [&](std::error_code ec, wandura::org_config c) {
    code = ec;
    config = std::move(c);
    done = true;
  });
  drive(h, done);
  REQUIRE(done);
  CHECK_FALSE(code);
  CHECK(config.org_id == "org_demo");
  CHECK(config.limit("playback") == 6000);
}

TEST_CASE("async forms: every form fails with http_error through redirect_error, details without an exception") {
  for (int form = 0; form < 7; ++form) {
    CAPTURE(form);
    harness h;
    h.fake->set_default(not_found());
    bool done = false;
    std::error_code code;
    wandura::error_info details;
    auto on_done = [&](auto&&...) { done = true; };
    start_form(*h.api, form, wandura::with_error_info(asio::redirect_error(on_done, code), details));
    drive(h, done);
    REQUIRE(done);
    CHECK(code == wandura::errc::http_error);
    CHECK(details.http_status == 404);
    CHECK(details.error_code == "not_found");
    CHECK(details.request_id == "req_404");
    CHECK(details.attempts == 1);
  }
}

TEST_CASE("async forms: every form fails with its code through as_tuple") {
  for (int form = 0; form < 7; ++form) {
    CAPTURE(form);
    harness h;
    h.fake->set_default(fake_step::respond(401, R"({"error_code":"unauthorized"})"));
    std::optional<std::error_code> code;
    start_form(*h.api, form, asio::experimental::as_tuple([&](auto result) { code = std::get<0>(result); }));
    for (int i = 0; i < 1000 && !code; ++i) {
      h.io.restart();
      h.io.poll();
      h.clock->advance_to_next_wakeup();
    }
    REQUIRE(code);
    CHECK(*code == wandura::errc::unauthorized);
  }
}

TEST_CASE("async forms: as_tuple and use_awaitable in a coroutine, with a success and a failure") {
  harness h;
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  h.fake->push(not_found());
  bool done = false;
  std::string ticket_id;
  std::error_code film_error;
  int film_status = 0;
  asio::co_spawn(
      h.io,
      [&]() -> asio::awaitable<void> {
        auto token = asio::experimental::as_tuple(asio::use_awaitable);
        auto start = h.api->async_start_episode({"", "dev-1", "kek"}, "the-heiress-returns", 4, 4, token);
        auto [start_error, episode] = co_await std::move(start);
        if (!start_error && episode.play.ticket) {
          ticket_id = episode.play.ticket->ticket_id;
        }
        wandura::error_info details;
        auto detailed = wandura::with_error_info(asio::redirect_error(asio::use_awaitable, film_error), details);
        auto lookup = h.api->async_get_film("nope", detailed);
        auto const missing = co_await std::move(lookup);
        film_status = details.http_status;
        CHECK(missing.title.empty());
      },
      [&](std::exception_ptr e) { done = !e; });
  drive(h, done);
  REQUIRE(done);
  CHECK(ticket_id == "t4");
  CHECK(film_error == wandura::errc::http_error);
  CHECK(film_status == 404);
}

TEST_CASE("async forms: use_future gets the value, and a failure as a system_error with the code") {
  harness h;
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
  h.fake->push(not_found());
  auto config = h.api->async_get_config(asio::use_future);
  auto missing = h.api->async_get_video("nope", asio::use_future);
  for (int i = 0; i < 1000 && missing.wait_for(std::chrono::seconds(0)) != std::future_status::ready; ++i) {
    h.io.restart();
    h.io.poll();
    h.clock->advance_to_next_wakeup();
  }
  REQUIRE(config.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
  CHECK(config.get().org_id == "org_demo");
  REQUIRE(missing.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
  try {
    (void)missing.get();
    FAIL("a 404 must fail the future");
  } catch (std::system_error const& e) {
    CHECK(e.code() == wandura::errc::http_error);
  }
}

TEST_CASE("async forms: cancellation through a bound slot completes with operation_aborted") {
  // Partial and total too: as for the awaitable forms, a call cannot promise that nothing observable happened.
  auto const type =
      GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total);
  INFO("cancellation type " << static_cast<unsigned>(type));
  harness h;
  h.fake->set_default(fake_step::stall());
  asio::cancellation_signal signal;
  bool done = false;
  std::error_code code;
  wandura::ticket_batch_result result;
  h.api->async_issue_tickets(single_play_batch(), wandura::call_options{},
                             asio::bind_cancellation_slot(signal.slot(), [&](std::error_code ec, auto r) {
                               code = ec;
                               result = std::move(r);
                               done = true;
                             }));
  h.io.restart();
  h.io.poll();
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK_FALSE(done);
  signal.emit(type);
  drive(h, done);
  REQUIRE(done);
  CHECK(code == asio::error::operation_aborted);
  CHECK(result.items.empty());
  CHECK(h.fake->attempt_count() == 1);
}

TEST_CASE("async forms: with_error_info outside a bound slot lets the cancellation through and writes the details") {
  // error_info_token.hpp: with_error_info is the outermost token, other adapters inside it.
  harness h;
  h.fake->set_default(fake_step::stall());
  asio::cancellation_signal signal;
  bool done = false;
  std::error_code code;
  wandura::error_info details;
  details.http_status = 599; // reset by the operation
  h.api->async_issue_tickets(single_play_batch(), wandura::call_options{},
                             wandura::with_error_info(asio::bind_cancellation_slot(signal.slot(),
                                                                                   [&](std::error_code ec, auto) {
                                                                                     code = ec;
                                                                                     done = true;
                                                                                   }),
                                                      details));
  h.io.restart();
  h.io.poll();
  REQUIRE(h.fake->attempt_count() == 1);
  signal.emit(asio::cancellation_type::terminal);
  drive(h, done);
  REQUIRE(done);
  CHECK(code == asio::error::operation_aborted);
  CHECK(details.http_status == 0);
  CHECK(details.attempts == 1);
}

namespace {
/// Starts form `form` with `handler` bound to `executor`, through `with_error_info` when `details` is not null.
template <typename Executor, typename Handler>
void start_bound(wandura::client& api, int form, Executor const& executor, wandura::error_info* details,
                 Handler handler) {
  if (details != nullptr) {
    start_form(api, form, wandura::with_error_info(asio::bind_executor(executor, std::move(handler)), *details));
  } else {
    start_form(api, form, asio::bind_executor(executor, std::move(handler)));
  }
}
} // namespace

TEST_CASE("async forms: the handler runs on its associated executor, a strand or another io_context's") {
  // client.hpp: "The call starts on `get_executor()`; the handler runs on its own associated executor". A handler
  // bound to another context must not run while only the client's context runs, and then run on the other's
  // thread; one bound to a strand runs inside the strand. Each form, with and without `with_error_info` around it.
  bool const other_context = GENERATE(false, true);
  bool const with_details = GENERATE(false, true);
  CAPTURE(other_context, with_details);
  for (int form = 0; form < 7; ++form) {
    CAPTURE(form);
    harness h;
    h.fake->set_default(not_found());
    asio::io_context other;
    auto strand = asio::make_strand(h.io);
    wandura::error_info details;
    bool done = false;
    bool on_its_executor = false;
    std::error_code code;
    auto handler = [&](std::error_code ec, auto&&) {
      code = ec;
      done = true;
      on_its_executor = other_context ? other.get_executor().running_in_this_thread() : strand.running_in_this_thread();
    };
    if (other_context) {
      start_bound(*h.api, form, other.get_executor(), with_details ? &details : nullptr, handler);
      drive(h, done);
      CHECK_FALSE(done); // the call ended on the client's context; its handler waits for the other one
      CHECK(h.fake->attempt_count() == 1);
      other.run_for(std::chrono::seconds(5)); // bounded; returns as soon as the handler has run
    } else {
      start_bound(*h.api, form, strand, with_details ? &details : nullptr, handler);
      drive(h, done);
    }
    REQUIRE(done);
    CHECK(on_its_executor);
    CHECK(code == wandura::errc::http_error);
    CHECK(details.http_status == (with_details ? 404 : 0));
  }
}

namespace {
/// A 200 body each form (index as in `start_form`) reads as a success.
std::string success_body(int form) {
  switch (form) {
  case 0:
  case 1: return batch_body({granted_item("the-heiress-returns", 4, "play", "t4")});
  case 2: return R"({"org_id":"org_demo","limits":{"playback":6000}})";
  case 3: return R"({"film_ref":"nope","title":"T","episodes":12})";
  case 4: return R"({"videos":[{"video_ref":"v1","title":"T","url":"https://v/1"}]})";
  case 5: return R"({"video_ref":"nope","title":"T","url":"https://v/1"})";
  default: return R"({"creatives":[{"creative_id":"c1","url":"https://c/1"}]})";
  }
}
} // namespace

TEST_CASE("async forms: with_error_info resets the named details to error_info{} when the call succeeds") {
  // error_info_token.hpp, `with_error_info`: "@param details receives the details; reset to `error_info{}` when the
  // call succeeds". The details are pre-filled as a failure before would have left them; a retried success (503
  // then 200) is included, since its last failed attempt must not be reported either.
  bool const retried = GENERATE(false, true);
  CAPTURE(retried);
  for (int form = 0; form < 7; ++form) {
    CAPTURE(form);
    harness h;
    if (retried) {
      h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable","request_id":"req_503"})"));
    }
    h.fake->push(fake_step::respond(200, success_body(form)));
    wandura::error_info details{404, "not_found", "gone", "req_old", 3};
    bool done = false;
    std::error_code code = wandura::errc::transport_failed;
    start_form(*h.api, form,
               wandura::with_error_info(
                   [&](std::error_code ec, auto&&) {
                     code = ec;
                     done = true;
                   },
                   details));
    drive(h, done);
    REQUIRE(done);
    CHECK_FALSE(code);
    CHECK(h.fake->attempt_count() == (retried ? 2U : 1U));
    CHECK(details.http_status == 0);
    CHECK(details.error_code.empty());
    CHECK(details.reason.empty());
    CHECK(details.request_id.empty());
    CHECK(details.attempts == 0);
  }
}

namespace {
/// An operation that waits for its cancellation, recording the thread that reached it.
asio::awaitable<int> wait_for_cancel(std::atomic<bool>& started, std::thread::id& cancelled_on) {
  co_await asio::async_initiate<asio::use_awaitable_t<> const, void()>(
      [&](auto handler) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        slot.assign([&, h](asio::cancellation_type) {
          cancelled_on = std::this_thread::get_id();
          auto const executor = asio::get_associated_executor(*h);
          asio::post(executor, [h] { std::move (*h)(); });
        });
        started = true;
      },
      asio::use_awaitable);
  co_return 1;
}
} // namespace

TEST_CASE("async forms: a bound slot emitted on the caller's thread reaches the call where the call runs") {
  // The call runs on one thread (a strand of a context run there), the caller's handler on another, where the
  // caller emits (Asio's rule for the handler it owns). Emitted straight through on the caller's thread, the
  // cancellation would run at once with the call's own handlers on the other.
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread::id call_thread_id;
  std::thread call_thread([&] {
    call_thread_id = std::this_thread::get_id();
    io.run();
  });
  asio::io_context caller_io;
  std::atomic<bool> started{false};
  std::thread::id cancelled_on;
  asio::cancellation_signal signal;
  bool done = false;
  std::error_code code;
  wandura::detail::async_call(
      asio::make_strand(io), wait_for_cancel(started, cancelled_on),
      asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(caller_io, [&](std::error_code ec, int) {
                                     code = ec;
                                     done = true;
                                   })));
  for (int i = 0; i < 5000 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(started);
  signal.emit(asio::cancellation_type::terminal); // on this, the caller's, thread
  for (int i = 0; i < 5000 && !done; ++i) {
    caller_io.restart();
    caller_io.poll();
    if (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  work.reset();
  call_thread.join();
  REQUIRE(done);
  CHECK_FALSE(code); // the operation above completes, cancelled or not
  CHECK(cancelled_on == call_thread_id);
}

TEST_CASE("async forms: a bound signal that outlives the client and its io_context holds nothing of them") {
  // The relay in the user's slot held the call's strand, whose end locks the destroyed context's strand service
  // (a use after free that AddressSanitizer shows); with hint 1 an emission posted to the destroyed context.
  for (int const hint : {ASIO_CONCURRENCY_HINT_DEFAULT, 1}) {
    asio::cancellation_signal signal; // a session's member, declared before the context
    {
      asio::io_context io(hint);
      auto clock = std::make_shared<wandura::real_clock>(); // frees the call's sleeps with the context
      auto fake = std::make_shared<wandura::testing::fake_transport>(io.get_executor(), *clock);
      auto slow = fake_step::respond(200, "{}");
      slow.latency = std::chrono::hours(1);
      fake->set_default(slow);
      wandura::client_options options;
      options.base_url = "http://127.0.0.1:9";
      options.api_key = "k";
      options.retry.time_source = clock;
      {
        wandura::client api(fake, std::move(options));
        api.async_get_config(wandura::call_options{},
                             asio::bind_cancellation_slot(signal.slot(), [](std::error_code, wandura::org_config) {}));
        io.poll();
        REQUIRE(fake->attempt_count() == 1);
      } // the client, then the context, destroyed with the call pending
    }
    signal.emit(asio::cancellation_type::terminal); // reaches nothing
  }                                                 // and each signal destroyed last
  SUCCEED("the signals, emitted and destroyed after their contexts, touched nothing of them");
}

TEST_CASE("async forms: a handler on another io_context keeps that context running until the call completes") {
  // As co_spawn does: the caller's context has work from the call's start, even while the client's thread is busy.
  asio::io_context client_io;
  auto work = asio::make_work_guard(client_io);
  std::thread client_thread([&] { client_io.run(); });
  std::atomic<bool> busy{false};
  asio::post(client_io, [&] {
    busy = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  while (!busy) {
    std::this_thread::yield();
  }
  asio::io_context caller_io;
  bool done = false;
  wandura::detail::async_call(
      asio::make_strand(client_io), []() -> asio::awaitable<int> { co_return 7; }(),
      asio::bind_executor(caller_io, [&](std::error_code, int) { done = true; }));
  caller_io.run(); // returns once the call's handler has run, not before
  work.reset();
  client_thread.join();
  CHECK(done);
}
