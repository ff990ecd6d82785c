// The client through its two pluggable parts, `client_options::tickets` and `client_options::viewer_limit`: what it
// asks of them, how often, and what it gives back on every exit.
#include "wandura/playback/viewer_limit.hpp"

#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "client_harness.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace client_harness;
using namespace std::chrono_literals;
using wandura::item_outcome;

namespace {

/// A viewer limit with one allowance for everyone, recording every call as "acquire N yes|no" or
/// "release N primary|fallback". Takes answer the accounts of `accounts` in turn (`primary` once it is empty).
class recording_limit final : public wandura::viewer_limit {
public:
  explicit recording_limit(std::uint32_t initial) : allowance(initial) {}

  asio::awaitable<decision> acquire(std::string viewer_ref, std::uint32_t tickets) override {
    counted.push_back(std::move(viewer_ref));
    bool const fits = tickets <= allowance;
    allowance -= fits ? tickets : 0;
    calls.push_back("acquire " + std::to_string(tickets) + (fits ? " yes" : " no"));
    account from = account::primary;
    if (fits && !accounts.empty()) {
      from = accounts.front();
      accounts.pop_front();
    }
    co_return decision{fits, fits ? 0ms : refused_wait, from};
  }
  void release(std::string_view viewer_ref, std::uint32_t tickets, account taken_from) noexcept override {
    counted.emplace_back(viewer_ref);
    allowance += tickets;
    calls.push_back("release " + std::to_string(tickets) + (taken_from == account::primary ? " primary" : " fallback"));
  }

  std::uint32_t allowance;
  std::chrono::milliseconds refused_wait = 1500ms; ///< the retry_after of a refusal
  std::deque<account> accounts;
  std::vector<std::string> calls;
  std::vector<std::string> counted; ///< the viewer_ref of each acquire and release, in order
};

/// A memory store that counts the client's calls. With `at_once`, it answers `try_find` and `try_insert_many`
/// too (as the memory store does); without, it declines them, as the interface's defaults do.
class counting_store final : public wandura::ticket_store {
public:
  explicit counting_store(bool answer_at_once = false) : at_once(answer_at_once) {}

  std::optional<std::vector<std::optional<wandura::ticket>>>
  try_find(std::span<wandura::ticket_key const> keys) override {
    ++tried_finds;
    return at_once ? inner.try_find(keys) : std::nullopt;
  }
  bool try_insert_many(std::vector<std::pair<wandura::ticket_key, wandura::ticket>>& tickets) override {
    ++tried_inserts;
    offered = tickets;
    return at_once && inner.try_insert_many(tickets);
  }
  asio::awaitable<std::vector<std::optional<wandura::ticket>>> find(std::vector<wandura::ticket_key> keys) override {
    ++finds;
    looked_up += keys.size();
    co_return co_await inner.find(std::move(keys));
  }
  asio::awaitable<void> insert(wandura::ticket_key key, wandura::ticket t) override {
    ++inserts;
    co_await inner.insert(std::move(key), std::move(t));
  }
  /// Counts, then stores one at a time as the interface's default does.
  asio::awaitable<void> insert_many(std::vector<std::pair<wandura::ticket_key, wandura::ticket>> tickets) override {
    ++insert_batches;
    auto each = ticket_store::insert_many(std::move(tickets)); // named: GCC 12 and co_await temporaries
    co_await std::move(each);
  }
  asio::awaitable<void> erase(wandura::ticket_key key) override { co_await inner.erase(std::move(key)); }

  wandura::memory_ticket_store inner;
  bool at_once;
  int tried_finds = 0;
  int tried_inserts = 0;
  std::vector<std::pair<wandura::ticket_key, wandura::ticket>> offered; ///< what the last try_insert_many got
  int insert_batches = 0;
  int finds = 0;
  std::size_t looked_up = 0;
  int inserts = 0;
};

std::string three_granted() {
  return batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                     granted_item("the-heiress-returns", 5, "prefetch", "t5"),
                     granted_item("the-heiress-returns", 6, "prefetch", "t6")});
}

} // namespace

TEST_CASE("client viewer_limit: a batch takes its allowance in one decision and gives back what was not granted") {
  auto limit = std::make_shared<recording_limit>(10);
  wandura::client_options options;
  options.viewer_limit = limit;
  options.viewer_tickets_per_minute = 1; // the given limit decides, not this rate
  harness h(options);
  h.fake->push(fake_step::respond(
      200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                       refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed"),
                       granted_item("the-heiress-returns", 6, "prefetch", "t6")})));
  auto s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch[0].outcome == item_outcome::shed);
  CHECK(limit->calls == std::vector<std::string>{"acquire 3 yes", "release 1 primary"});
  CHECK(limit->allowance == 8);
}

TEST_CASE("client viewer_limit: a short allowance goes to the play first, one ticket at a time until refused") {
  auto limit = std::make_shared<recording_limit>(1);
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto s = h.start(4, 6);
  REQUIRE(h.fake->attempt_count() == 1);
  CHECK(sent_episodes(h.fake->attempts()[0].request.body) == std::vector<std::string>{"the-heiress-returns/4/play"});
  CHECK(s.play.outcome == item_outcome::granted);
  for (auto const& prefetch : s.prefetch) {
    CHECK(prefetch.outcome == item_outcome::viewer_limited);
    CHECK(prefetch.retry_after == 2s); // the limit's 1500 ms, rounded up to whole seconds
  }
  CHECK(limit->calls == std::vector<std::string>{"acquire 3 no", "acquire 1 yes", "acquire 1 no"});
  CHECK(limit->allowance == 0);
}

TEST_CASE("client viewer_limit: a refusal's wait is never negative on the item") {
  auto limit = std::make_shared<recording_limit>(1);
  limit->refused_wait = -5000ms; // outside the limit's contract
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->push(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  for (auto const& prefetch : s.prefetch) {
    CHECK(prefetch.outcome == item_outcome::viewer_limited);
    CHECK(prefetch.retry_after == 0s);
  }
}

TEST_CASE("client viewer_limit: a call that fails as a whole gives back everything it took") {
  auto limit = std::make_shared<recording_limit>(5);
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->push(fake_step::respond(401, R"({"error_code":"unauthorized"})"));
  CHECK_THROWS_AS(h.start(4, 6), wandura::error);
  CHECK(limit->calls == std::vector<std::string>{"acquire 3 yes", "release 3 primary"});
  CHECK(limit->allowance == 5);
}

TEST_CASE("client viewer_limit: each unused ticket goes back to the account it was taken from") {
  using account = wandura::viewer_limit::account;
  auto limit = std::make_shared<recording_limit>(2);
  limit->accounts = {account::fallback, account::primary}; // the play decided locally, the prefetch in the service
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  SECTION("the call is answered: the shed prefetch goes back to the primary account, the granted play to none") {
    h.fake->push(fake_step::respond(
        200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                         refused_item("the-heiress-returns", 5, "prefetch", 429, "rate_limited", "prefetch_shed")})));
    auto s = h.start(4, 6);
    CHECK(s.play.outcome == item_outcome::granted);
    CHECK(s.prefetch[0].outcome == item_outcome::shed);
    CHECK(s.prefetch[1].outcome == item_outcome::viewer_limited);
    CHECK(limit->calls == std::vector<std::string>{"acquire 3 no", "acquire 1 yes", "acquire 1 yes", "acquire 1 no",
                                                   "release 1 primary"});
    CHECK(limit->allowance == 1);
  }
  SECTION("the call fails as a whole: one give-back per account") {
    h.fake->push(fake_step::respond(401, R"({"error_code":"unauthorized"})"));
    CHECK_THROWS_AS(h.start(4, 6), wandura::error);
    CHECK(limit->calls == std::vector<std::string>{"acquire 3 no", "acquire 1 yes", "acquire 1 yes", "acquire 1 no",
                                                   "release 1 primary", "release 1 fallback"});
    CHECK(limit->allowance == 2);
  }
}

TEST_CASE("client viewer_limit: a batch is counted under its viewer_ref, or as device:<union_info> when it has none") {
  auto limit = std::make_shared<recording_limit>(10);
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  auto batch_for = [](std::optional<std::string> viewer_ref) {
    wandura::ticket_batch batch;
    batch.union_info = "device-7";
    batch.drm_kek = "kek";
    batch.viewer_ref = std::move(viewer_ref);
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    return batch;
  };
  for (int i = 0; i < 2; ++i) {
    h.fake->push(
        fake_step::respond(200, batch_body({refused_item("the-heiress-returns", 4, "play", 404, "not_ready", "")})));
  }
  (void)h.run(h.api->issue_tickets(batch_for("k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a")));
  (void)h.run(h.api->issue_tickets(batch_for(std::nullopt)));
  CHECK(limit->counted == std::vector<std::string>{"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a",
                                                   "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "device:device-7",
                                                   "device:device-7"});
}

TEST_CASE(
    "client viewer_limit: a device whose id is a viewer's viewer_ref spends its own allowance, not the viewer's") {
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1; // the client's own limit: one ticket a minute each
  harness h(options);
  h.fake->set_default(fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4")})));
  auto batch_for = [](std::string union_info, std::optional<std::string> viewer_ref) {
    wandura::ticket_batch batch;
    batch.union_info = std::move(union_info);
    batch.drm_kek = "kek";
    batch.viewer_ref = std::move(viewer_ref);
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    return batch;
  };
  auto const victim = std::string("k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a");
  auto const device = h.run(h.api->issue_tickets(batch_for(victim, std::nullopt)));
  CHECK(device.items.at(0).outcome == item_outcome::granted);
  auto const viewer = h.run(h.api->issue_tickets(batch_for("device-1", victim)));
  CHECK(viewer.items.at(0).outcome == item_outcome::granted); // refused viewer_limited when the two shared a name
  CHECK(h.fake->attempt_count() == 2);
}

TEST_CASE("client viewer_limit: a zero rate is refused even when a limit is given") {
  wandura::client_options options;
  options.viewer_limit = std::make_shared<recording_limit>(5);
  options.viewer_tickets_per_minute = 0;
  options.api_key = "k";
  asio::io_context io;
  CHECK_THROWS_AS(wandura::client(io.get_executor(), options), wandura::error);
}

TEST_CASE("client ticket store: one lookup for the whole batch, one store operation for its fresh tickets") {
  auto store = std::make_shared<counting_store>();
  wandura::client_options options;
  options.tickets = store;
  harness h(options);
  h.fake->push(fake_step::respond(200, three_granted()));
  auto first = h.start(4, 6);
  CHECK(store->tried_finds == 1); // offered at once first, declined, then awaited
  CHECK(store->finds == 1);
  CHECK(store->looked_up == 3);
  CHECK(store->tried_inserts == 1);
  REQUIRE(store->offered.size() == 3);
  CHECK(store->insert_batches == 1);
  CHECK(store->inserts == 3); // the default insert_many, one at a time: the tickets as offered, not moved from
  auto again = h.start(4, 6); // every episode from the store: nothing sent, nothing stored
  CHECK(h.fake->attempt_count() == 1);
  CHECK(again.play.reused);
  CHECK(again.play.ticket == first.play.ticket);
  CHECK(store->finds == 2);
  CHECK(store->insert_batches == 1);
  CHECK(store->inserts == 3);
}

TEST_CASE("client ticket store: what the store does at once is not awaited, and the result is the same") {
  auto store = std::make_shared<counting_store>(true);
  wandura::client_options options;
  options.tickets = store;
  harness h(options);
  h.fake->push(fake_step::respond(200, three_granted()));
  auto first = h.start(4, 6);
  CHECK(store->tried_finds == 1);
  CHECK(store->tried_inserts == 1);
  CHECK(store->finds == 0);
  CHECK(store->insert_batches == 0);
  CHECK(store->inner.size() == 3);
  CHECK_FALSE(first.play.reused);
  auto again = h.start(4, 6);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(again.play.reused);
  CHECK(again.play.ticket == first.play.ticket);
  CHECK(again.prefetch[1].ticket == first.prefetch[1].ticket);
  CHECK(store->tried_finds == 2);
  CHECK(store->finds == 0);
  CHECK(store->tried_inserts == 1); // nothing fresh the second time
}

TEST_CASE("client ticket store: never touched with reuse off or without a viewer_ref") {
  auto store = std::make_shared<counting_store>();
  wandura::client_options options;
  options.tickets = store;
  options.reuse_tickets = false;
  harness h(options);
  h.fake->set_default(fake_step::respond(200, three_granted()));
  (void)h.start(4, 6);
  (void)h.start(4, 6);
  CHECK(h.fake->attempt_count() == 2);
  CHECK(store->finds == 0);
  CHECK(store->inserts == 0);
  CHECK(store->tried_finds == 0);
  CHECK(store->tried_inserts == 0);

  auto other = std::make_shared<counting_store>();
  wandura::client_options with_reuse;
  with_reuse.tickets = other;
  harness anonymous(with_reuse);
  anonymous.fake->set_default(fake_step::respond(200, three_granted()));
  wandura::viewer nobody{"", "dev-1", "kek"}; // no viewer_ref: nothing may be reused
  (void)anonymous.run(anonymous.api->start_episode(nobody, "the-heiress-returns", 4, 6));
  CHECK(other->finds == 0);
  CHECK(other->inserts == 0);
  CHECK(other->tried_finds == 0);
  CHECK(other->tried_inserts == 0);
}

TEST_CASE("client: an admission gate option out of range is refused at construction, nothing left running") {
  asio::io_context io;
  wandura::client_options options;
  options.api_key = "k";
  options.retry.admission.decrease = 1.2; // a 429 would raise the pacing rate
  try {
    wandura::client c(io.get_executor(), options);
    FAIL("constructed");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("decrease"));
  }
  io.run_for(std::chrono::seconds(1));
  CHECK(io.stopped()); // nothing of the refused client is left waiting
  options.retry.admission.decrease = 0.5;
  CHECK_NOTHROW(wandura::client(io.get_executor(), options));
}

namespace {
/// Where a `throwing_store` fails, and what it throws.
enum class store_fault { try_find, find, try_insert, insert, find_non_standard, find_cancelled };

/// A memory store that fails once at `fault`, as a store whose backing service fails in a way it did not expect
/// would (a plain `std::runtime_error`, or something not derived from std::exception), or says it was cancelled.
/// It offers its work at once (`try_`) only where it fails there.
class throwing_store final : public wandura::ticket_store {
public:
  explicit throwing_store(store_fault fault) : fault_(fault) {}
  std::optional<std::vector<std::optional<wandura::ticket>>>
  try_find(std::span<wandura::ticket_key const> /*keys*/) override {
    fail_at(store_fault::try_find, "store: lookup at once failed");
    return std::nullopt;
  }
  bool try_insert_many(std::vector<std::pair<wandura::ticket_key, wandura::ticket>>& /*tickets*/) override {
    fail_at(store_fault::try_insert, "store: write at once failed");
    return false;
  }
  asio::awaitable<std::vector<std::optional<wandura::ticket>>> find(std::vector<wandura::ticket_key> keys) override {
    fail_at(store_fault::find, "store: lookup failed");
    if (fault_ == store_fault::find_non_standard && !std::exchange(failed_, true)) {
      throw 42;
    }
    if (fault_ == store_fault::find_cancelled && !std::exchange(failed_, true)) {
      throw wandura::error(asio::error::operation_aborted, "store: cancelled");
    }
    co_return co_await inner_.find(std::move(keys));
  }
  asio::awaitable<void> insert(wandura::ticket_key key, wandura::ticket t) override {
    fail_at(store_fault::insert, "store: write failed");
    co_await inner_.insert(std::move(key), std::move(t));
  }
  asio::awaitable<void> erase(wandura::ticket_key key) override { co_await inner_.erase(std::move(key)); }

private:
  void fail_at(store_fault where, char const* what) {
    if (fault_ == where && !std::exchange(failed_, true)) {
      throw std::runtime_error(what);
    }
  }

  store_fault fault_;
  bool failed_ = false;
  wandura::memory_ticket_store inner_;
};
} // namespace

TEST_CASE("client ticket store: a store that throws is gone without, counted and logged, and the call is answered") {
  // ticket_store.hpp, Errors: anything but a cancellation that a store throws does not fail the call: a lookup that
  // threw answers nothing (every episode goes to the server), tickets whose store threw are returned unstored.
  auto const fault = GENERATE(store_fault::try_find, store_fault::find, store_fault::try_insert, store_fault::insert,
                              store_fault::find_non_standard);
  CAPTURE(static_cast<int>(fault));
  wandura::client_options options;
  options.tickets = std::make_shared<throwing_store>(fault);
  harness h(options); // its logger keeps the client's WARN lines
  auto const& lines = h.warn_lines;
  h.fake->set_default(fake_step::respond(200, three_granted()));
  auto const first = h.start(4, 6);
  CHECK(first.play.outcome == item_outcome::granted);
  CHECK(first.play.ticket.has_value());
  CHECK(first.prefetch[0].outcome == item_outcome::granted);
  CHECK(first.prefetch[1].outcome == item_outcome::granted);
  CHECK(h.fake->attempt_count() == 1);
  auto const metrics = h.api->stats().metrics;
  CHECK(metrics.store_errors == 1);
  CHECK(metrics.call_failures == 0);
  CHECK(h.api->metrics_text().find("\nwandura_store_errors_total 1\n") != std::string::npos);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("ticket store: "));
  CHECK_THAT(lines[0],
             Catch::Contains(fault == store_fault::find_non_standard ? "not derived from std::exception" : "failed"));

  // The store works again: what it stored is reused; what it failed to store is asked for again.
  auto const again = h.start(4, 6);
  bool const stored =
      fault == store_fault::try_find || fault == store_fault::find || fault == store_fault::find_non_standard;
  CHECK(again.play.outcome == item_outcome::granted);
  CHECK(again.play.reused == stored);
  CHECK(h.fake->attempt_count() == (stored ? 1 : 2));
  CHECK(h.api->stats().metrics.store_errors == 1);
}

TEST_CASE("client ticket store: a store that throws leaves no identical call waiting, and the client goes on") {
  // Identical calls at once share one request (coalesce, on by default): the store's failure in the call that sends
  // is not the joiner's either, none is left waiting, and the client's shutdown works.
  auto const fault = GENERATE(store_fault::find, store_fault::insert);
  CAPTURE(static_cast<int>(fault));
  wandura::client_options options;
  options.tickets = std::make_shared<throwing_store>(fault);
  harness h(options);
  auto slow = fake_step::respond(200, three_granted());
  slow.latency = 100ms;
  h.fake->set_default(slow);
  int ended = 0;
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    asio::co_spawn(h.io, h.api->start_episode(harness::viewer_on(), "the-heiress-returns", 4, 6),
                   [&](std::exception_ptr e, wandura::episode_start s) {
                     ++ended;
                     failed += e || s.play.outcome != item_outcome::granted ? 1 : 0;
                   });
  }
  for (int i = 0; i < 100 && ended < 2; ++i) {
    h.io.restart();
    h.io.poll();
    if (ended < 2) {
      h.clock->advance_to_next_wakeup();
    }
  }
  REQUIRE(ended == 2);
  CHECK(failed == 0);
  CHECK(h.fake->attempt_count() <= 2);
  CHECK(h.api->stats().metrics.store_errors == 1);
  bool shut_down = false;
  asio::co_spawn(h.io, h.api->shutdown(), [&](std::exception_ptr e) { shut_down = !e; });
  h.io.restart();
  h.io.poll();
  CHECK(shut_down);
}

TEST_CASE("client ticket store: a store's own operation_aborted, the call not cancelled, is a failure gone without") {
  // A store whose backend connection was torn down under it says operation_aborted while the call is not cancelled:
  // the call goes on, as for any other failure of the store, and keeps the tickets the server issued.
  wandura::client_options options;
  options.tickets = std::make_shared<throwing_store>(store_fault::find_cancelled);
  harness h(options);
  h.fake->set_default(fake_step::respond(200, three_granted()));
  auto const s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(h.fake->attempt_count() == 1);
  CHECK(h.api->stats().metrics.store_errors == 1);
  CHECK(h.api->stats().metrics.call_failures == 0);
}

namespace {
/// A viewer limit that cannot decide: its service failed in a way it did not expect.
class failing_limit final : public wandura::viewer_limit {
public:
  asio::awaitable<decision> acquire(std::string /*viewer_ref*/, std::uint32_t /*tickets*/) override {
    ++acquires;
    throw std::runtime_error("limit: service failed");
    co_return decision{};
  }
  void release(std::string_view /*viewer_ref*/, std::uint32_t /*tickets*/, account /*taken_from*/) noexcept override {
    ++releases;
  }
  int acquires = 0;
  int releases = 0;
};
} // namespace

TEST_CASE("client viewer_limit: a limit that throws fails the call as thrown, nothing sent") {
  auto limit = std::make_shared<failing_limit>();
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->set_default(fake_step::respond(200, three_granted()));
  CHECK_THROWS_WITH(h.start(4, 6), "limit: service failed");
  CHECK(limit->acquires == 1);
  CHECK(limit->releases == 0); // nothing was taken
  CHECK(h.fake->attempt_count() == 0);
  CHECK(h.api->stats().metrics.call_failures == 1);
  // An async_ form completes with the exception's code: std::errc::io_error for one that carries none (client.hpp).
  std::optional<std::error_code> code;
  h.api->async_start_episode(harness::viewer_on(), "the-heiress-returns", 4, 6,
                             [&](std::error_code ec, wandura::episode_start) { code = ec; });
  for (int i = 0; i < 100 && !code; ++i) {
    h.io.restart();
    h.io.poll();
  }
  REQUIRE(code);
  CHECK(*code == std::errc::io_error);
  CHECK(limit->acquires == 2);
  CHECK(h.fake->attempt_count() == 0);
}

TEST_CASE("client viewer_limit: tickets the server answered as reused or refused go back, fresh ones stay taken") {
  // viewer_limit.hpp: the client "gives back what was not freshly granted (reused, refused, shed, never sent...)".
  auto limit = std::make_shared<recording_limit>(10);
  wandura::client_options options;
  options.viewer_limit = limit;
  harness h(options);
  h.fake->push(
      fake_step::respond(200, batch_body({granted_item("the-heiress-returns", 4, "play", "t4"),
                                          granted_item("the-heiress-returns", 5, "prefetch", "t5", /*reused=*/true),
                                          refused_item("the-heiress-returns", 6, "prefetch", 404, "not_ready")})));
  auto const s = h.start(4, 6);
  CHECK(s.play.outcome == item_outcome::granted);
  CHECK(s.prefetch[0].outcome == item_outcome::granted);
  CHECK(s.prefetch[0].reused);
  CHECK(s.prefetch[1].outcome == item_outcome::not_ready);
  CHECK(limit->calls == std::vector<std::string>{"acquire 3 yes", "release 2 primary"});
  CHECK(limit->allowance == 9);
}
