// The client against the in-process emulator over real loopback sockets: SPEC §2 (server behaviour under load) and
// §3 (SDK behaviour) observed end to end, and nothing counted twice when attempts are lost.
#include "wandura/playback/client.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/viewer_ref.hpp"

using namespace std::chrono_literals;
using wandura::item_outcome;

namespace {

/// An emulator plus a client whose io_context runs on two threads, as a backend would run it.
struct live {
  std::unique_ptr<wandura::emulator::server> emu;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::vector<std::thread> threads;
  std::mutex lines_mutex;
  std::vector<std::string> warn_lines;
  std::unique_ptr<wandura::client> api;

  explicit live(wandura::emulator::config cfg = {}, wandura::client_options options = {}) {
    cfg.seed = 7;
    emu = wandura::emulator::server::start(std::move(cfg));
    options.base_url = emu->base_url();
    if (options.api_key.empty()) {
      options.api_key = "test-key";
    }
    options.retry.log = [this](wandura::log_level, std::string_view line) {
      std::lock_guard lock(lines_mutex);
      warn_lines.emplace_back(line);
    };
    api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([this] { io.run(); });
    }
  }
  ~live() {
    api.reset();
    work.reset();
    io.stop();
    for (auto& t : threads) {
      t.join();
    }
  }
  live(live const&) = delete;
  live& operator=(live const&) = delete;

  template <typename T> T wait(asio::awaitable<T> op) {
    auto f = asio::co_spawn(io, std::move(op), asio::use_future);
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    return f.get();
  }

  wandura::episode_start start(std::string film, int episode, int unlocked_through, std::string device = "device-1",
                               wandura::call_options options = {}) {
    wandura::viewer v{wandura::make_viewer_ref("secret", "user-1", "install-1"), std::move(device), "kek-1"};
    return wait(api->start_episode(std::move(v), std::move(film), episode, unlocked_through, std::move(options)));
  }
};

wandura::emulator::config with_playback_limit(std::uint32_t per_minute, bool manual_clock) {
  wandura::emulator::config cfg;
  cfg.orgs[0].limits.playback = per_minute;
  cfg.overshoot = 0;
  cfg.manual_clock = manual_clock;
  return cfg;
}

} // namespace

TEST_CASE("client and emulator: starting an episode grants play and both prefetches, counted once each") {
  live t;
  auto s = t.start("the-heiress-returns", 4, 12);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.play.ticket);
  CHECK(s.play.ticket->ticket_id.rfind("tkt_", 0) == 0);
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.prefetch[1].outcome == item_outcome::granted);
  CHECK(t.emu->stats().tickets_counted == 3);
}

TEST_CASE("client and emulator: an item the client cannot read fails alone, is not asked again, and the server's "
          "ticket for it is reused later, not counted twice") {
  // ticket_result.hpp unreadable_item_code: the other items keep their answers; the unreadable one is not retried.
  live t;
  t.emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"unreadable_item","item":1,"count":1}]})");
  auto s = t.start("the-heiress-returns", 4, 12);
  CHECK(s.attempts == 1);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.prefetch.size() == 2);
  auto const& lost = s.prefetch[0];
  CHECK(lost.outcome == item_outcome::failed);
  CHECK(lost.error == wandura::errc::invalid_response);
  CHECK(lost.error_code == wandura::unreadable_item_code);
  CHECK(lost.detail.find("items[1].status") == 0);
  CHECK(lost.episode_no == 5);
  CHECK_FALSE(lost.ticket);
  CHECK(s.prefetch[1].outcome == item_outcome::granted);
  CHECK(t.emu->stats().tickets_counted == 3); // the server issued episode 5's ticket all the same
  CHECK(t.emu->stats().faults_injected == 1);

  // Episode 5's prefetch asked for again by the same viewer and device: the client has no ticket for it, so it
  // asks, and the server reuses the one it issued.
  wandura::ticket_batch again;
  again.episodes = {{"the-heiress-returns", 5, wandura::intent::prefetch}};
  again.union_info = "device-1";
  again.drm_kek = "kek-1";
  again.viewer_ref = wandura::make_viewer_ref("secret", "user-1", "install-1");
  auto const second = t.wait(t.api->issue_tickets(again));
  REQUIRE(second.items.size() == 1);
  CHECK(second.items[0].outcome == item_outcome::granted);
  CHECK(second.items[0].reused);
  CHECK(second.attempts == 1);
  CHECK(t.emu->stats().tickets_counted == 3);
}

TEST_CASE("client and emulator: past the last episode is not_ready and never retried") {
  live t;
  auto s = t.start("the-heiress-returns", 12, 14);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.prefetch.size() == 2); // unlocked through 14, but the film has 12 episodes
  CHECK(s.prefetch[0].outcome == item_outcome::not_ready);
  CHECK(s.prefetch[1].outcome == item_outcome::not_ready);
  auto past = t.start("the-heiress-returns", 13, 13);
  CHECK(past.play.outcome == item_outcome::not_ready);
  CHECK(past.attempts == 1);
  CHECK(t.warn_lines.empty());
}

TEST_CASE("client and emulator: the same viewer and device reuse the ticket, another device gets its own") {
  SECTION("from the client's own store: no second request") {
    live t;
    auto first = t.start("the-heiress-returns", 2, 2);
    auto again = t.start("the-heiress-returns", 2, 2);
    CHECK(again.play.reused);
    CHECK(again.attempts == 0);
    CHECK(again.play.ticket->ticket_id == first.play.ticket->ticket_id);
    auto other = t.start("the-heiress-returns", 2, 2, "device-2");
    CHECK_FALSE(other.play.reused);
    CHECK(other.play.ticket->ticket_id != first.play.ticket->ticket_id);
    CHECK(t.emu->stats().tickets_counted == 2);
  }
  SECTION("from the server, with the client's store off: reused, counted 0") {
    wandura::client_options options;
    options.reuse_tickets = false;
    live t({}, options);
    auto first = t.start("the-heiress-returns", 2, 2);
    auto again = t.start("the-heiress-returns", 2, 2);
    CHECK(again.attempts == 1);
    CHECK(again.play.reused);
    CHECK(again.play.ticket->ticket_id == first.play.ticket->ticket_id);
    auto const st = t.emu->stats();
    CHECK(st.tickets_counted == 1);
    CHECK(st.tickets_reused == 1);
  }
}

TEST_CASE("client and emulator: near the limit prefetches are shed while play is still granted") {
  // 100 tickets a minute, exact counters, manual clock. Plays are never shed: spend 85 with play-only starts on
  // distinct devices (no reuse), leaving 15 %, under the 20 % at which prefetches are shed.
  live t(with_playback_limit(100, true));
  for (int i = 0; i < 85; ++i) {
    wandura::viewer v{"", "warm-" + std::to_string(i), "kek"};
    auto r = t.wait(t.api->start_episode(v, "the-heiress-returns", 1, 1));
    REQUIRE(r.play.outcome == item_outcome::granted);
  }
  auto s = t.start("the-heiress-returns", 4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  REQUIRE(s.prefetch.size() == 2);
  CHECK(s.prefetch[0].outcome == item_outcome::shed);
  CHECK(s.prefetch[0].reason == "prefetch_shed");
  CHECK(s.prefetch[0].retry_after.has_value());
  CHECK(s.prefetch[1].outcome == item_outcome::shed);
  auto const st = t.emu->stats();
  CHECK(st.tickets_shed >= 2);
  CHECK(st.tickets_counted == 86);
}

TEST_CASE("client and emulator: scripted 503s are retried with WARN lines and the key is reused") {
  live t;
  t.emu->install_faults(
      R"({"rules":[{"path":"/v1/playback/tickets","kind":"status","status":503,"retry_after":1,"count":2}]})");
  wandura::call_options fast;
  fast.policy = wandura::retry_policy::standard();
  auto s = t.start("the-heiress-returns", 1, 1, "device-1", fast);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.attempts == 3);
  std::lock_guard lock(t.lines_mutex);
  REQUIRE(t.warn_lines.size() == 2);
  CHECK(t.warn_lines[0].rfind("retry 1/2 in ", 0) == 0);
  CHECK(t.warn_lines[0].find(": HTTP 503 code=service_unavailable") != std::string::npos);
  CHECK(t.emu->stats().tickets_counted == 1);
  CHECK(t.emu->stats().faults_injected == 2);
}

TEST_CASE("client and emulator: a request lost after the server read it is not counted twice") {
  live t;
  t.emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"drop_after_read","count":1}]})");
  auto s = t.start("the-heiress-returns", 5, 7);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.attempts == 2);
  CHECK(t.emu->stats().tickets_counted == 3);
}

TEST_CASE("client and emulator: a reset mid-body is retried under the same key and replayed, not re-executed") {
  live t;
  t.emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"reset","count":1}]})");
  auto s = t.start("the-heiress-returns", 5, 7);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.attempts == 2);
  auto const st = t.emu->stats();
  CHECK(st.tickets_counted == 3);    // executed once, by the first attempt
  CHECK(st.idempotent_replays == 1); // the retry got the stored result
}

TEST_CASE("client and emulator: a first attempt slower than the attempt timeout still counts each ticket once") {
  live t;
  // The first attempt is held 6 s by the server; the client gives up on it at its 5 s floor and retries with the
  // same key, which waits (409 in progress) until the first has executed and then gets the stored result.
  t.emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"delay","ms":6000,"count":1}]})");
  wandura::call_options options;
  options.attempt_timeout = 1000ms; // raised to the 5 s floor of ticket requests
  options.total_timeout = 30000ms;
  auto s = t.start("the-heiress-returns", 8, 9, "device-1", options);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.attempts >= 2);
  CHECK(t.emu->stats().tickets_counted == 2);
}

TEST_CASE("client and emulator: an unknown key fails the call as unauthorized and is not counted") {
  wandura::client_options options;
  options.api_key = "wrong-key";
  live t({}, options);
  try {
    (void)t.start("the-heiress-returns", 1, 1);
    FAIL("expected unauthorized");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::unauthorized);
    CHECK(e.http_status() == 401);
  }
  CHECK(t.emu->stats().tickets_counted == 0);
}

TEST_CASE("client and emulator: attempt and total timeouts of milliseconds::max() mean no limit, not an instant "
          "timeout") {
  wandura::client_options options;
  options.retry.attempt_timeout = std::chrono::milliseconds::max();
  options.retry.total_timeout = std::chrono::milliseconds::max();
  live t({}, options);
  CHECK(t.wait(t.api->get_config()).limit("playback") == 6000);
  wandura::call_options per_call;
  per_call.attempt_timeout = std::chrono::milliseconds::max();
  per_call.total_timeout = std::chrono::milliseconds::max();
  CHECK(t.wait(t.api->get_config(per_call)).limit("playback") == 6000);
  wandura::ticket_batch batch;
  batch.episodes = {{"the-heiress-returns", 1, wandura::intent::play}};
  batch.union_info = "device-max";
  batch.drm_kek = "kek-max";
  auto const result = t.wait(t.api->issue_tickets(batch, per_call));
  REQUIRE(result.items.size() == 1);
  CHECK(result.items[0].outcome == wandura::item_outcome::granted);
  std::lock_guard lock(t.lines_mutex);
  CHECK(t.warn_lines.empty()); // no attempt failed on the way
}

TEST_CASE(
    "client and emulator: a garbage or truncated 2xx body is retried, and when every retry gets one it is a typed "
    "error") {
  live t;
  for (auto kind : {"garbage", "truncate"}) {
    INFO(kind);
    t.emu->install_faults(std::string(R"({"rules":[{"path":"/v1/config","kind":")") + kind + R"(","count":1}]})");
    CHECK(t.wait(t.api->get_config()).limit("playback") == 6000); // a read is safe to resend
    std::lock_guard lock(t.lines_mutex);
    REQUIRE_FALSE(t.warn_lines.empty());
    CHECK(t.warn_lines.back().find(": invalid response body") != std::string::npos);
  }
  t.emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"garbage","count":4}]})");
  try {
    (void)t.wait(t.api->get_config());
    FAIL("expected invalid_response");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_response);
    CHECK(e.attempts() == 4);
  }
  auto cfg = t.wait(t.api->get_config());
  CHECK(cfg.limit("playback") == 6000);
}

TEST_CASE("client and emulator: typed reads of config, catalog, videos and creatives") {
  live t;
  auto f = t.wait(t.api->get_film("the-heiress-returns"));
  CHECK(f.episode_count == 12);
  auto videos = t.wait(t.api->list_videos());
  REQUIRE_FALSE(videos.empty());
  auto one = t.wait(t.api->get_video(videos.front().video_ref));
  CHECK(one.video_ref == videos.front().video_ref);
  auto creatives = t.wait(t.api->list_creatives());
  CHECK_FALSE(creatives.empty());
  try {
    (void)t.wait(t.api->get_film("no-such-film"));
    FAIL("expected 404");
  } catch (wandura::error const& e) {
    CHECK(e.http_status() == 404);
  }
}

TEST_CASE("client and emulator: get_film reads films whose refs the client percent-encodes") {
  wandura::emulator::config cfg;
  cfg.films = {{"x:y", "X Y", 2, true},
               {"a b", "A B", 3, true},
               {"caf\xc3\xa9", "Cafe", 4, true},
               {"a/b", "A slash B", 5, true}};
  live t(std::move(cfg));
  CHECK(t.wait(t.api->get_film("x:y")).episode_count == 2);
  CHECK(t.wait(t.api->get_film("a b")).episode_count == 3);
  CHECK(t.wait(t.api->get_film("caf\xc3\xa9")).episode_count == 4);
  CHECK(t.wait(t.api->get_film("a/b")).episode_count == 5);
  // The open videos are the demo's own, none needing an escape: a ref that does is looked up decoded (404, not a
  // malformed path), and a plain one is found.
  CHECK(t.wait(t.api->get_video("trailer-heiress")).video_ref == "trailer-heiress");
  try {
    (void)t.wait(t.api->get_video("x:y %"));
    FAIL("expected 404");
  } catch (wandura::error const& e) {
    CHECK(e.http_status() == 404);
  }
}

TEST_CASE(
    "client and emulator: after a 429 the counter is held, and a call that could not be sent in time fails at once") {
  // 3 tickets a minute, exact counters, manual clock (plays are refused, not held): the first start takes all 3.
  live t(with_playback_limit(3, true));
  auto first = t.start("the-heiress-returns", 1, 12);
  REQUIRE(first.play.outcome == item_outcome::granted);
  wandura::call_options quick;
  quick.total_timeout = 3000ms; // Retry-After is ~20 s here: the deadline decides at once
  auto second = t.start("the-heiress-returns", 7, 12, "device-2", quick);
  CHECK(second.play.outcome == item_outcome::rate_limited);
  CHECK(second.attempts == 1);
  CHECK(second.play.retry_after.has_value());
  // The 429 holds the playback counter at the admission gate for its Retry-After, longer than the next call's
  // deadline: that call sends nothing and fails at once, saying why.
  auto const requests_before = t.emu->stats().requests.at("playback");
  try {
    (void)t.start("the-heiress-returns", 10, 12, "device-3", quick);
    FAIL("expected rate_limited");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::rate_limited); // held back by the rate limit, nothing sent
    CHECK(e.code() == wandura::condition::rate_limited);
    CHECK(e.attempts() == 0);
    CHECK(std::string(e.what()).find("playback counter is held back after a 429") != std::string::npos);
  }
  CHECK(t.emu->stats().requests.at("playback") == requests_before);
  CHECK(t.emu->stats().tickets_counted == 3);
}

TEST_CASE("client and emulator: concurrent identical starts from one device share one request") {
  live t;
  wandura::viewer v{wandura::make_viewer_ref("secret", "user-9", "install-9"), "device-9", "kek"};
  std::vector<std::future<wandura::episode_start>> futures;
  for (int i = 0; i < 8; ++i) {
    futures.push_back(asio::co_spawn(t.io, t.api->start_episode(v, "the-heiress-returns", 3, 3), asio::use_future));
  }
  std::set<std::string> ids;
  int fresh = 0;
  for (auto& f : futures) {
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    auto s = f.get();
    REQUIRE(s.play.outcome == item_outcome::granted);
    ids.insert(s.play.ticket->ticket_id);
    fresh += s.play.reused ? 0 : 1;
  }
  CHECK(ids.size() == 1);
  CHECK(fresh == 1);
  CHECK(t.emu->stats().tickets_counted == 1);
}

TEST_CASE("client and emulator: on a plain executor run by two threads, joiners' deadlines and the client's end meet "
          "answers being read, and every call ends once, cleanly") {
  // client.hpp: any thread, an executor whose context several threads run; no strand of the caller's. What the
  // client cancels itself (a joiner's deadline passing as the shared answer is read, the client destroyed with
  // answers arriving) must not race the request's own work, whichever threads run them (TSan checks).
  wandura::emulator::config cfg;
  cfg.seed = 7;
  auto t = std::make_unique<live>(cfg);
  t->emu->install_faults(R"({"rules":[{"path":"","kind":"delay","ms":30}]})");
  std::atomic<int> done{0};
  std::atomic<int> granted{0};
  std::atomic<int> deadline{0};
  std::atomic<int> aborted{0};
  std::atomic<int> other{0};
  auto spawn = [&](wandura::client& api, int i, std::optional<std::chrono::milliseconds> total) {
    wandura::ticket_batch batch;
    batch.union_info = "device-" + std::to_string(i);
    batch.drm_kek = "kek";
    batch.episodes.push_back({"the-heiress-returns", 1, wandura::intent::play});
    wandura::call_options options;
    options.total_timeout = total;
    asio::co_spawn(t->io, api.issue_tickets(std::move(batch), options),
                   [&](std::exception_ptr e, wandura::ticket_batch_result r) {
                     try {
                       if (e) {
                         std::rethrow_exception(e);
                       }
                       (r.items.at(0).outcome == wandura::item_outcome::granted ? granted : other) += 1;
                     } catch (wandura::error const& failure) {
                       (failure.code() == wandura::errc::deadline_exceeded ? deadline
                        : failure.code() == asio::error::operation_aborted ? aborted
                                                                           : other) += 1;
                     } catch (...) {
                       other += 1;
                     }
                     ++done;
                   });
  };
  int const pairs = 150;
  for (int i = 0; i < pairs; ++i) {
    spawn(*t->api, i, std::nullopt);                           // starts the request
    spawn(*t->api, i, std::chrono::milliseconds(25 + i % 10)); // joins it, leaves about when the answer comes
  }
  for (int wait = 0; wait < 3000 && done < 2 * pairs; ++wait) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(done == 2 * pairs);
  CHECK(other == 0);
  CHECK(aborted == 0);
  CHECK(granted + deadline == 2 * pairs);
  CHECK(granted > 0); // which caller of a pair starts its request (and gives it its deadline) is the threads' race

  done = 0;
  granted = 0;
  aborted = 0;
  for (int i = 0; i < pairs; ++i) {
    spawn(*t->api, 1000 + i, std::nullopt);
  }
  std::this_thread::sleep_for(30ms); // the answers are about to arrive
  t->api.reset();                    // each call still in flight ends operation_aborted, on whichever thread
  for (int wait = 0; wait < 3000 && done < pairs; ++wait) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(done == pairs);
  CHECK(other == 0);
  CHECK(granted + aborted == pairs);
}

TEST_CASE("client and emulator: `call || timeout` from coroutines on two threads cancels every call cleanly") {
  // The usual timeout pattern, on an io_context run by two threads (client.hpp: any thread, many calls at once):
  // each call is cancelled by its timer while the emulator holds the request, so each caller leaves as the last
  // waiter of its request, on whichever thread, while another thread may resume it.
  wandura::emulator::config cfg;
  cfg.seed = 7;
  live t(cfg);
  t.emu->install_faults(R"({"rules":[{"path":"","kind":"delay","ms":1000}]})");
  using namespace asio::experimental::awaitable_operators;
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> done{0};
    std::atomic<int> timed_out{0};
    std::atomic<int> threw{0};
    int const calls = 300;
    for (int i = 0; i < calls; ++i) {
      asio::co_spawn(
          t.io,
          [&, round, i]() -> asio::awaitable<void> {
            asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(20 + i % 50));
            wandura::ticket_batch batch;
            batch.union_info = "device-" + std::to_string(round) + "-" + std::to_string(i);
            batch.drm_kek = "kek";
            batch.episodes.push_back({"the-heiress-returns", 1, wandura::intent::play});
            auto const which =
                co_await (t.api->issue_tickets(std::move(batch)) || timer.async_wait(asio::use_awaitable));
            timed_out += which.index() == 1 ? 1 : 0;
          },
          [&](std::exception_ptr e) {
            threw += e ? 1 : 0;
            ++done;
          });
    }
    for (int wait = 0; wait < 3000 && done < calls; ++wait) {
      std::this_thread::sleep_for(10ms);
    }
    REQUIRE(done == calls);
    CHECK(timed_out == calls);
    CHECK(threw == 0);
  }
}
