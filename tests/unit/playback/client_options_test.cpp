// The client's constructor refuses options that would put a broken or injected header on the wire, or send
// requests to a URL other than the one written: nothing is made, nothing is sent.
#include "wandura/playback/client.hpp"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

#include "client_harness.hpp"

using wandura::testing::fake_step;

namespace {

struct fake_setup {
  asio::io_context io;
  wandura::testing::manual_clock clock;
  std::shared_ptr<wandura::testing::fake_transport> fake =
      std::make_shared<wandura::testing::fake_transport>(io.get_executor(), clock);
};

wandura::client_options valid_options() {
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:1";
  options.api_key = "test-key";
  return options;
}

/// The message of the invalid_argument error the client's constructor throws for `options` over a fake sender;
/// fails the test if it accepts them or throws anything else.
std::string refusal(wandura::client_options const& options) {
  fake_setup s;
  try {
    wandura::client api(s.fake, options);
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    CHECK(s.fake->attempt_count() == 0);
    return e.what();
  }
  return {};
}

/// As `refusal`, for the constructor that makes a real transport (which must not be made for such options).
std::string refusal_with_transport(wandura::client_options const& options) {
  asio::io_context io;
  try {
    wandura::client api(io.get_executor(), options);
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    CHECK(io.poll() == 0); // no transport was made: its shutdown, posted as it goes, would run here
    return e.what();
  }
  return {};
}

/// The one attempt `get_config` makes with `options` over `s`'s fake sender (answered 404), after the client made
/// from them accepted them.
wandura::testing::recorded_attempt config_attempt(fake_setup& s, wandura::client_options options) {
  options.retry.time_source = std::shared_ptr<wandura::clock>(&s.clock, [](wandura::clock*) {});
  wandura::client api(s.fake, options);
  s.fake->push(fake_step::respond(404, R"({"error_code":"not_found"})"));
  bool done = false;
  asio::co_spawn(s.io, api.get_config(), [&](std::exception_ptr, wandura::org_config) { done = true; });
  for (int i = 0; i < 100 && !done; ++i) {
    s.io.restart();
    s.io.poll();
  }
  REQUIRE(done);
  REQUIRE(s.fake->attempt_count() == 1);
  return s.fake->attempts().front();
}

} // namespace

TEST_CASE("client options: an api_key holding CR, LF or NUL is refused without echoing the key") {
  using namespace std::string_literals;
  auto const bad =
      GENERATE("k\r\nX-Injected: yes"s, "k\nX-Injected: yes"s, "k\rX-Injected: yes"s, "k\0X-Injected: yes"s);
  INFO("key of " << bad.size() << " bytes");
  auto options = valid_options();
  options.api_key = bad;
  for (std::string const& message : {refusal(options), refusal_with_transport(options)}) {
    CHECK(message.find("Authorization") != std::string::npos);
    CHECK(message.find("X-Injected") == std::string::npos);
  }
}

TEST_CASE("client options: an api_key or user agent holding another control byte or DEL is refused, nothing sent") {
  using namespace std::string_literals;
  auto const bad = GENERATE("k\x01X-Injected"s, "k\x1fX-Injected"s, "k\x7fX-Injected"s, "\x08X-Injected"s);
  INFO("value of " << bad.size() << " bytes");
  auto key = valid_options();
  key.api_key = bad;
  for (std::string const& message : {refusal(key), refusal_with_transport(key)}) {
    CHECK(message.find("Authorization") != std::string::npos);
    CHECK(message.find("control byte") != std::string::npos);
    CHECK(message.find("X-Injected") == std::string::npos);
  }
  auto agent = valid_options();
  agent.transport.user_agent = bad;
  for (std::string const& message : {refusal(agent), refusal_with_transport(agent)}) {
    CHECK(message.find("User-Agent") != std::string::npos);
    CHECK(message.find("X-Injected") == std::string::npos);
  }
}

TEST_CASE("client options: an api_key with HTAB or obs-text (bytes 0x80-0xFF) is accepted and sent as it is") {
  fake_setup s;
  auto options = valid_options();
  options.api_key = "k\tcaf\xc3\xa9\xff";
  options.transport.user_agent = "agent\t\x80";
  asio::io_context io;
  CHECK_NOTHROW(wandura::client(io.get_executor(), options)); // over a real transport too
  CHECK(config_attempt(s, options).header("Authorization") == "Bearer k\tcaf\xc3\xa9\xff");
}

TEST_CASE("client options: an empty api_key is refused, never sent as \"Bearer \"") {
  auto options = valid_options();
  options.api_key.clear();
  CHECK(refusal(options).find("api_key") != std::string::npos);
  CHECK(refusal_with_transport(options).find("api_key") != std::string::npos);
}

TEST_CASE("client options: a user agent holding CR or LF is refused whatever the sender") {
  auto const bad = GENERATE(std::string("wandura\r\nX-Injected: yes"), std::string("wandura\nX-Injected: yes"));
  auto options = valid_options();
  options.transport.user_agent = bad;
  for (std::string const& message : {refusal(options), refusal_with_transport(options)}) {
    CHECK(message.find("User-Agent") != std::string::npos);
    CHECK(message.find("X-Injected") == std::string::npos);
  }
}

TEST_CASE("client options: a base_url with a port out of range, a query or a fragment is refused") {
  auto const bad = GENERATE(as<std::string>{}, "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:1?x=1",
                            "http://127.0.0.1:1/base?", "http://127.0.0.1:1#frag", "http://127.0.0.1:1/base#frag");
  INFO(bad);
  auto options = valid_options();
  options.base_url = bad;
  CHECK_FALSE(refusal(options).empty());
  CHECK_FALSE(refusal_with_transport(options).empty());
}

TEST_CASE("client options: a base_url with userinfo is refused and the message never holds the password") {
  auto const bad = GENERATE(as<std::string>{}, "http://user:s3cret-pw@127.0.0.1:1",
                            "https://user:s3cret-pw@api.example", "http://user:s3cret-pw@127.0.0.1:99999?x=1");
  auto options = valid_options();
  options.base_url = bad;
  for (std::string const& message : {refusal(options), refusal_with_transport(options)}) {
    CHECK(message.find("s3cret-pw") == std::string::npos);
  }
}

TEST_CASE("client options: a scheme in upper case is accepted and requests go to the normalised URL") {
  fake_setup s;
  auto options = valid_options();
  options.base_url = "HTTP://127.0.0.1:1/base/";
  CHECK(config_attempt(s, options).request.url == "http://127.0.0.1:1/base/v1/config");
}

TEST_CASE("client options: hooks that throw never end or lose a call, and are counted in the metrics") {
  fake_setup s;
  auto options = valid_options();
  options.retry.time_source = std::shared_ptr<wandura::clock>(&s.clock, [](wandura::clock*) {});
  options.retry.random = [] { return 0.5; };
  int hook_calls = 0;
  int log_calls = 0;
  options.retry.on_retry = [&](wandura::retry_event const&) {
    ++hook_calls;
    throw std::runtime_error("hook failed");
  };
  options.retry.log = [&](wandura::log_level, std::string_view) {
    ++log_calls;
    throw 42; // not even a std::exception
  };
  wandura::client api(s.fake, options);
  s.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  s.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  s.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
  std::optional<wandura::org_config> got;
  std::exception_ptr failure;
  asio::co_spawn(s.io, api.get_config(), [&](std::exception_ptr e, wandura::org_config c) {
    failure = e;
    got = std::move(c);
  });
  for (int i = 0; i < 1000 && !got; ++i) {
    s.io.restart();
    s.io.poll();
    if (!got) {
      s.clock.advance_to_next_wakeup();
    }
  }
  REQUIRE(got.has_value());
  CHECK_FALSE(failure);
  CHECK(got->limit("playback") == 6000);
  CHECK(s.fake->attempt_count() == 3);
  CHECK(hook_calls == 2); // the log still ran after each throwing hook
  CHECK(log_calls == 2);
  CHECK(api.stats().engine.hook_errors == 4);
  CHECK(api.metrics_text().find("\nwandura_hook_errors_total 4\n") != std::string::npos);
}

TEST_CASE("client options: a retry policy, budget, admission option or viewer rate out of range is refused at "
          "construction by either constructor") {
  auto jitter = valid_options();
  jitter.retry.policy = wandura::retry_policy::standard();
  jitter.retry.policy.jitter = 1.0; // a factor of (1 + U(-1, 1)) could wait 0 on every retry
  auto window = valid_options();
  window.retry.budget.window = std::chrono::milliseconds(0);
  auto retries = valid_options();
  retries.retry.policy.max_retries = -2;
  auto decrease = valid_options();
  decrease.retry.admission.decrease = 1.5; // a 429 would raise the pacing rate
  auto viewer_rate = valid_options();
  viewer_rate.viewer_tickets_per_minute = 0;
  for (auto const& [options, field] : {std::pair{jitter, "jitter"},
                                       {window, "window"},
                                       {retries, "max_retries"},
                                       {decrease, "decrease"},
                                       {viewer_rate, "viewer_tickets_per_minute"}}) {
    INFO(field);
    CHECK_THAT(refusal(options), Catch::Contains(field));
    CHECK_THAT(refusal_with_transport(options), Catch::Contains(field));
  }
}

TEST_CASE("client options: a ca_bundle naming no file is refused by the transport, which leaves nothing behind") {
  auto options = valid_options();
  options.transport.ca_bundle = "/nonexistent/wandura-ca.pem";
  CHECK_THAT(refusal_with_transport(options), Catch::Contains("ca_bundle"));
}

TEST_CASE("client options: a per-call policy out of range fails that call before anything is sent or taken") {
  wandura::client_options options;
  options.viewer_tickets_per_minute = 3;
  client_harness::harness h(options);
  wandura::viewer v{"vr-1", "dev-1", "kek"};
  wandura::call_options bad;
  bad.policy = wandura::retry_policy::interactive();
  bad.policy->multiplier = std::nan("");
  auto const refused = [&](auto op) {
    try {
      (void)h.run(std::move(op));
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("multiplier"));
    }
  };
  refused(h.api->start_episode(v, "the-heiress-returns", 4, 6, bad));
  refused(h.api->get_config(bad));
  refused(h.api->get_film("the-heiress-returns", bad));
  CHECK(h.fake->attempt_count() == 0);
  // Nothing of the viewer's allowance was taken: the whole batch still goes out and is granted.
  using client_harness::granted_item;
  h.fake->push(
      fake_step::respond(200, client_harness::batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                                          granted_item("the-heiress-returns", 5, "prefetch", "t5"),
                                                          granted_item("the-heiress-returns", 6, "prefetch", "t6")})));
  auto const start = h.run(h.api->start_episode(v, "the-heiress-returns", 4, 6));
  CHECK(start.play.outcome == wandura::item_outcome::granted);
  REQUIRE(start.prefetch.size() == 2);
  CHECK(start.prefetch[1].outcome == wandura::item_outcome::granted);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.api->stats().metrics.call_failures == 3);
  CHECK(h.api->stats().metrics.calls == 4);
}

TEST_CASE("client options: a null sender is refused with invalid_argument, valid options or not") {
  // client.hpp: `errc::invalid_argument` for a null `sender`. Without the check the client would keep a null
  // sender and crash on its first call instead.
  bool const valid = GENERATE(true, false);
  CAPTURE(valid);
  auto options = valid_options();
  if (!valid) {
    options.base_url = "ftp://example.com";
  }
  try {
    wandura::client api(std::shared_ptr<wandura::http_sender>{}, options);
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    if (valid) {
      CHECK(std::string_view(e.what()).find("sender") != std::string_view::npos);
    }
  }
}

TEST_CASE("client options: the parts documented as null by default are accepted null, and the client works") {
  // client.hpp and call_options.hpp: a null ticket store means the in-memory LRU, a null viewer_limit the local
  // bucket (none here), a null observer and time source none and the real clock. Nulls there are not refusals.
  fake_setup s;
  auto options = valid_options();
  options.tickets = nullptr;
  options.viewer_limit = nullptr;
  options.retry.observer = nullptr;
  options.retry.time_source = nullptr;
  s.fake->set_default(fake_step::respond(
      200, R"({"request_id":"r","items":[{"film_ref":"f","episode_no":1,"intent":"play","status":200,)"
           R"("reused":false,"ticket":{"ticket_id":"t1","manifest_url":"https://m/1","license_url":"https://l/1",)"
           R"("expires_at":"2099-01-01T00:00:00Z","drm_payload":"p"}}]})"));
  wandura::client api(s.fake, options);
  wandura::viewer const who{"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "dev-1", "kek"};
  for (int i = 0; i < 2; ++i) {
    bool done = false;
    asio::co_spawn(s.io, api.start_episode(who, "f", 1, 1), [&](std::exception_ptr e, wandura::episode_start r) {
      REQUIRE_FALSE(e);
      CHECK(r.play.outcome == wandura::item_outcome::granted);
      CHECK(r.play.reused == (i == 1)); // the second from the in-memory store that null stands for
      done = true;
    });
    s.io.restart();
    s.io.run();
    REQUIRE(done);
  }
  CHECK(s.fake->attempt_count() == 1);
}

TEST_CASE("client options: hooks that throw during a per-item retry never end or lose the ticket call") {
  // retry_options::log and on_retry: "a throwing logger never ends, delays or loses a call". A ticket call's
  // per-item retry is a retry like any other and fires both.
  fake_setup s;
  auto options = valid_options();
  options.retry.time_source = std::shared_ptr<wandura::clock>(&s.clock, [](wandura::clock*) {});
  options.retry.random = [] { return 0.5; };
  int hook_calls = 0;
  int log_calls = 0;
  options.retry.on_retry = [&](wandura::retry_event const&) {
    ++hook_calls;
    throw std::runtime_error("hook failed");
  };
  options.retry.log = [&](wandura::log_level, std::string_view) {
    ++log_calls;
    throw std::runtime_error("log failed");
  };
  wandura::client api(s.fake, options);
  s.fake->push(fake_step::respond(
      200, client_harness::batch_body({client_harness::refused_item("f", 4, "play", 503, "service_unavailable", {}, 1),
                                       client_harness::granted_item("f", 5, "prefetch", "t5")})));
  s.fake->push(
      fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 4, "play", "t4")})));
  std::optional<wandura::episode_start> got;
  std::exception_ptr failure;
  auto const start = s.clock.now();
  asio::co_spawn(s.io, api.start_episode({"viewer-1", "dev-1", "kek"}, "f", 4, 5),
                 [&](std::exception_ptr e, wandura::episode_start r) {
                   failure = e;
                   got = std::move(r);
                 });
  for (int i = 0; i < 1000 && !got; ++i) {
    s.io.restart();
    s.io.poll();
    if (!got) {
      s.clock.advance_to_next_wakeup();
    }
  }
  REQUIRE(got.has_value());
  CHECK_FALSE(failure);
  CHECK(got->play.outcome == wandura::item_outcome::granted);
  CHECK(got->prefetch.at(0).outcome == wandura::item_outcome::granted);
  CHECK(got->attempts == 2);
  CHECK(s.fake->attempt_count() == 2);
  CHECK(hook_calls == 1);
  CHECK(log_calls == 1);
  CHECK(s.clock.now() - start < std::chrono::milliseconds(2001)); // the item's 1 s plus jitter, not delayed
  CHECK(api.stats().engine.hook_errors == 2);
}

namespace {
/// An observer recording, for each hook, which of two contexts ran it: "begin client", "call caller", ...
struct where_observer final : wandura::attempt_observer {
  void* on_attempt_begin(wandura::attempt_begin const&) noexcept override {
    events.push_back("begin " + where());
    return nullptr;
  }
  void on_attempt_end(void*, wandura::attempt_begin const&, wandura::attempt_end const&) noexcept override {
    events.push_back("end " + where());
  }
  void on_call_end(wandura::call_end const&) noexcept override { events.push_back("call " + where()); }
  [[nodiscard]] std::string where() const {
    return client->get_executor().running_in_this_thread()   ? "client"
           : caller->get_executor().running_in_this_thread() ? "caller"
                                                             : "neither";
  }
  asio::io_context* client = nullptr;
  asio::io_context* caller = nullptr;
  std::vector<std::string> events;
};
} // namespace

TEST_CASE("client options: for a caller on another io_context, attempts are reported on the client's context and "
          "the call's end where the call runs") {
  // attempt_observer.hpp, on_call_end: a coroutine awaiting the call on another io_context hears it there; an
  // `async_` call, which starts on the client's executor, on the client's. client.hpp: the attempts on the client's.
  bool const awaitable_form = GENERATE(true, false);
  CAPTURE(awaitable_form);
  asio::io_context caller;
  auto observer = std::make_shared<where_observer>();
  wandura::client_options options;
  options.retry.observer = observer;
  client_harness::harness h(options);
  observer->client = &h.io;
  observer->caller = &caller;
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->push(fake_step::respond(200, R"({"org_id":"org_demo","limits":{"playback":6000}})"));
  bool done = false;
  std::string completed_on;
  if (awaitable_form) {
    asio::co_spawn(caller, h.api->get_config(), [&](std::exception_ptr e, wandura::org_config) {
      CHECK_FALSE(e);
      completed_on = observer->where();
      done = true;
    });
  } else {
    h.api->async_get_config(asio::bind_executor(caller, [&](std::error_code ec, wandura::org_config) {
      CHECK_FALSE(ec);
      completed_on = observer->where();
      done = true;
    }));
  }
  for (int i = 0; i < 1000 && !done; ++i) { // both contexts on this thread, in turn; bounded
    caller.restart();
    caller.poll();
    h.io.restart();
    h.io.poll();
    if (!done) {
      h.clock->advance_to_next_wakeup();
    }
  }
  REQUIRE(done);
  CHECK(completed_on == "caller");
  std::string const call_end = awaitable_form ? "call caller" : "call client";
  CHECK(observer->events ==
        std::vector<std::string>{"begin client", "end client", "begin client", "end client", call_end});
}

namespace {
/// An observer recording each attempt's begin and end and each call's end, as "begin <op> <resend>",
/// "end <op> <status>" and "call <op> <error>".
struct recording_observer final : wandura::attempt_observer {
  void* on_attempt_begin(wandura::attempt_begin const& a) noexcept override {
    events.push_back("begin " + std::string(a.operation) + " " + std::to_string(a.resend_count));
    return &events;
  }
  void on_attempt_end(void* context, wandura::attempt_begin const& a, wandura::attempt_end const& e) noexcept override {
    events.push_back("end " + std::string(a.operation) + " " + std::to_string(e.status_code) +
                     (context == &events ? "" : " (lost context)"));
  }
  void on_call_end(wandura::call_end const& c) noexcept override {
    events.push_back("call " + std::string(c.operation) + " " + (c.error ? c.error.message() : "ok"));
  }
  std::vector<std::string> events;
};
} // namespace

TEST_CASE("client options: the observer hears each attempt and each client call's end once, whatever "
          "report_call_end says") {
  // call_options.hpp, report_call_end: "wandura::client ... reports each of its calls' end itself, whatever this
  // says"; attempt_observer.hpp: once per call, after its last attempt, for calls answered from the ticket store or
  // joined to another's request too. The default (true) is the case most users get.
  bool const report_call_end = GENERATE(true, false);
  CAPTURE(report_call_end);
  auto observer = std::make_shared<recording_observer>();
  wandura::client_options options;
  options.retry.observer = observer;
  options.retry.report_call_end = report_call_end;
  client_harness::harness h(options);
  h.fake->push(fake_step::respond(503, R"({"error_code":"service_unavailable"})"));
  h.fake->push(
      fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 4, "play", "t4")})));
  wandura::ticket_batch batch;
  batch.episodes.push_back({"f", 4, wandura::intent::play});
  batch.union_info = "dev-1";
  batch.drm_kek = "kek";
  batch.viewer_ref = "viewer-1";
  CHECK(h.run(h.api->issue_tickets(batch)).items[0].outcome == wandura::item_outcome::granted);
  CHECK(h.run(h.api->issue_tickets(batch)).items[0].reused); // from the store: no attempt, still a call
  h.fake->push(fake_step::respond(404, R"({"error_code":"not_found"})"));
  CHECK_THROWS_AS(h.run(h.api->get_film("nope")), wandura::error);
  std::string const http_error = make_error_code(wandura::errc::http_error).message();
  CHECK(observer->events ==
        std::vector<std::string>{"begin issue_tickets 0", "end issue_tickets 503", "begin issue_tickets 1",
                                 "end issue_tickets 200", "call issue_tickets ok", "call issue_tickets ok",
                                 "begin get_film 0", "end get_film 404", "call get_film " + http_error});

  // Two identical calls at once: one request, two calls, two ends.
  observer->events.clear();
  auto slow = fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 5, "play", "t5")}));
  slow.latency = std::chrono::milliseconds(100);
  h.fake->push(slow);
  batch.episodes[0].episode_no = 5;
  std::vector<asio::awaitable<wandura::ticket_batch_result>> calls;
  calls.push_back(h.api->issue_tickets(batch));
  calls.push_back(h.api->issue_tickets(batch));
  (void)h.run_together(std::move(calls));
  CHECK(observer->events == std::vector<std::string>{"begin issue_tickets 0", "end issue_tickets 200",
                                                     "call issue_tickets ok", "call issue_tickets ok"});

  // start_episode is its own operation, for its attempts and its end (http_client_metrics labels it so).
  observer->events.clear();
  h.fake->push(
      fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 6, "play", "t6")})));
  wandura::viewer const who{"viewer-1", "dev-1", "kek"};
  CHECK(h.run(h.api->start_episode(who, "f", 6, 6)).play.outcome == wandura::item_outcome::granted);
  CHECK(observer->events ==
        std::vector<std::string>{"begin start_episode 0", "end start_episode 200", "call start_episode ok"});

  // A start_episode and an issue_tickets call for the same batch share one request (attempt_observer.hpp: its
  // attempts carry the operation of the call that started it); each call's end names its own operation.
  for (bool const episode_first : {true, false}) {
    CAPTURE(episode_first);
    int const episode_no = episode_first ? 7 : 8; // a new one each time: a granted ticket is reused from the store
    observer->events.clear();
    auto shared = fake_step::respond(
        200, client_harness::batch_body({client_harness::granted_item("f", episode_no, "play", "t7")}));
    shared.latency = std::chrono::milliseconds(100);
    h.fake->push(shared);
    auto const attempts_before = h.fake->attempt_count();
    wandura::ticket_batch same = batch;
    same.episodes[0].episode_no = episode_no;
    same.viewer_ref = who.viewer_ref;
    same.union_info = who.union_info;
    same.drm_kek = who.drm_kek;
    auto episode = [&]() -> asio::awaitable<wandura::ticket_batch_result> {
      auto const started = co_await h.api->start_episode(who, "f", episode_no, episode_no);
      wandura::ticket_batch_result r;
      r.items.push_back(started.play);
      co_return r;
    };
    std::vector<asio::awaitable<wandura::ticket_batch_result>> both;
    if (episode_first) {
      both.push_back(episode());
      both.push_back(h.api->issue_tickets(same));
    } else {
      both.push_back(h.api->issue_tickets(same));
      both.push_back(episode());
    }
    for (auto const& r : h.run_together(std::move(both))) {
      CHECK(r.items.at(0).outcome == wandura::item_outcome::granted);
    }
    CHECK(h.fake->attempt_count() == attempts_before + 1);
    std::string const first = episode_first ? "start_episode" : "issue_tickets";
    std::string const second = episode_first ? "issue_tickets" : "start_episode";
    CHECK(observer->events == std::vector<std::string>{"begin " + first + " 0", "end " + first + " 200",
                                                       "call " + first + " ok", "call " + second + " ok"});
  }
}

// README and client.hpp write options with designated initializers that name a few fields. GCC before 14 warns
// (-Wmissing-field-initializers, in -Wextra) about every field left out that has no default member initializer,
// so a user's -Wextra -Werror build failed on the documented code.
TEST_CASE("client options: designated initializers naming a few fields keep every other default, warning-free") {
  wandura::client_options const options{.base_url = "https://api.wandura.example", .api_key = "test-key"};
  CHECK(options.transport.max_response_bytes == std::size_t{1} << 20U);
  CHECK(options.transport.ca_bundle.empty());
  CHECK(options.retry.policy == wandura::retry_policy::interactive());
  CHECK_FALSE(options.tickets);
  CHECK_FALSE(options.viewer_tickets_per_minute);
  CHECK_FALSE(options.viewer_limit);
  wandura::client_options const limited{.api_key = "test-key", .viewer_tickets_per_minute = 30};
  CHECK(limited.base_url == "http://127.0.0.1:8787");
  CHECK(limited.viewer_tickets_per_minute == 30U);
  wandura::transport_options const transport{.ca_bundle = "/etc/ssl/staging-ca.pem"};
  CHECK(transport.verify_peer);
}
