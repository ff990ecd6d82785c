// The shared ticket cache over a real redis-server: two clients stand for two processes of a fleet.
#include "wandura/fleet/shared_ticket_cache.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include "fleet/ticket_cache_access.hpp"
#include "fleet/ticket_envelope.hpp"
#include "fleet_test_support.hpp"
#include "wandura/error.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::at_ms;
using test_support::count_starting;
using test_support::elapsed_ms;
using test_support::raw;
using test_support::two_caches;
using test_support::two_processes;
using test_support::viewer_on;
using test_support::wait;
using test_support::wait_until;

TEST_CASE("shared ticket cache: a ticket stored by one process is reused by another, for that device only") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  auto const expires_at = std::chrono::time_point_cast<std::chrono::milliseconds>(now + 30min);
  wandura::cached_ticket const ticket{R"({"ticket_id":"tkt_1"})", expires_at};

  test_support::run(fleet.io, cache_a.put(viewer_on("device-7"), ticket, now));
  auto const found = test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now));
  REQUIRE(found);
  CHECK(*found == ticket);
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-8"), now)));
  auto other_viewer = viewer_on("device-7");
  other_viewer.viewer_ref = "another:viewer";
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(other_viewer, now)));
  // Reusable until 5 min before expires_at, and the entry expires by itself then.
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), expires_at - 5min)));
  auto const pttl = raw(fleet.io, fleet.a, {"PTTL", wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"))});
  CHECK(pttl.integer > (25min - 5s) / 1ms);
  CHECK(pttl.integer <= 25min / 1ms);
  CHECK(cache_b.stats().hits == 1);
  CHECK(cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: a stored value for another identity under the key is never served") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  // Without the replica of keys: the values below are written by raw commands, which announce nothing, so with it
  // they would be answered absent without being read (until the replica is next read whole: a test further down).
  wandura::shared_ticket_cache cache(fleet.a, "org_demo", {.known_keys_capacity = 0});
  auto const now = system_clock::now();
  // Another device's ticket copied under this device's key (a collision, a bug, a hostile writer).
  test_support::run(fleet.io, cache.put(viewer_on("device-8"), {"tkt_other", now + 30min}, now));
  auto const key8 = wandura::fleet_keys::ticket("org_demo", viewer_on("device-8"));
  auto const key7 = wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"));
  raw(fleet.io, fleet.a, {"COPY", key8, key7});
  CHECK_FALSE(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  raw(fleet.io, fleet.a, {"SET", key7, "not an envelope"});
  CHECK_FALSE(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  CHECK(cache.stats().rejected == 2);
}

TEST_CASE("shared ticket cache: a stored expiry past what the clock holds is rejected, never converted") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache(fleet.a, "org_demo", {.near_cache = false});
  auto const now = system_clock::now();
  auto const key = wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"));
  auto envelope = wandura::detail::encode_envelope(viewer_on("device-7"), {"tkt", system_clock::time_point{}});
  auto const epoch = envelope.rfind("1:03:tkt"); // the expiry (0 ms since the epoch), then the payload
  REQUIRE(epoch != std::string::npos);
  envelope.replace(epoch, 3, "19:9223372036854775807"); // INT64_MAX ms
  raw(fleet.io, fleet.a, {"SET", key, envelope});
  CHECK_FALSE(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  CHECK(cache.stats().rejected == 1);
}

TEST_CASE("shared ticket cache: a ticket expiring at the clock's end is stored for a finite time, one at its "
          "start is not stored") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("past"), {"old", system_clock::time_point::min()}, now));
  CHECK(raw(fleet.io, fleet.a, {"EXISTS", wandura::fleet_keys::ticket("org_demo", viewer_on("past"))}).integer == 0);
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("past"), now)));
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("past"), now)));

  test_support::run(fleet.io, cache_a.put(viewer_on("forever"), {"long", system_clock::time_point::max()}, now));
  auto const pttl = raw(fleet.io, fleet.a, {"PTTL", wandura::fleet_keys::ticket("org_demo", viewer_on("forever"))});
  CHECK(pttl.integer > 0);
  auto const found = test_support::run(fleet.io, cache_b.get(viewer_on("forever"), now));
  REQUIRE(found);
  CHECK(found->payload == "long");
  CHECK(test_support::run(fleet.io, cache_a.get(viewer_on("forever"), now))->payload == "long");
}

TEST_CASE("shared ticket cache: when two processes store for one identity, the longer-lived ticket stays") {
  wandura::ticket_cache_options const redis_only{.near_cache = false}; // what Redis keeps, not local copies
  auto started = two_caches::start_or_skip(redis_only, redis_only);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  test_support::run(fleet.io, cache_a.put(viewer_on("d"), {"long", now + 30min}, now));
  test_support::run(fleet.io, cache_b.put(viewer_on("d"), {"short", now + 20min}, now));
  CHECK(test_support::run(fleet.io, cache_b.get(viewer_on("d"), now))->payload == "long");
  test_support::run(fleet.io, cache_b.put(viewer_on("d"), {"longer", now + 40min}, now));
  CHECK(test_support::run(fleet.io, cache_a.get(viewer_on("d"), now))->payload == "longer");
}

TEST_CASE("shared ticket cache: with redis paused it answers locally within its timeout, one WARN, then "
          "shares again after SIGCONT") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client_a(io.get_executor(), {.url = redis->url()}); // the default few-ms timeout
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  std::vector<std::string> lines;
  wandura::ticket_cache_options options;
  options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); }, .probe_interval = 100ms};
  // With the replica of keys, the lookups of a device nobody stored are answered absent without asking Redis, slow
  // or not; without it, they fall back like the others.
  bool const known_keys = GENERATE(true, false);
  CAPTURE(known_keys);
  options.known_keys_capacity = known_keys ? 1000 : 0;
  wandura::shared_ticket_cache cache_a(client_a, "org_demo", options);
  wandura::shared_ticket_cache cache_b(client_b, "org_demo");
  auto const now = system_clock::now();
  test_support::run(io, cache_a.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  if (known_keys) {
    REQUIRE(test_support::keys_known(io, cache_a));
  }

  redis->pause();
  auto const start = std::chrono::steady_clock::now();
  int hits = 0;
  for (int i = 0; i < 20; ++i) {
    hits += test_support::run(io, cache_a.get(viewer_on("device-7"), now)) ? 1 : 0;
    CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-8"), now))); // never across devices
  }
  auto const took = elapsed_ms(start);
  redis->resume();
  CHECK(hits == 20); // what this process stored is still reused
  CHECK(took < 400); // one timeout, then local answers: never blocked
  CHECK(cache_a.stats().fallbacks == (known_keys ? 20 : 40));
  CHECK(cache_a.stats().known_absent == (known_keys ? 20 : 0));
  CHECK(cache_a.stats().degraded);
  CHECK(count_starting(lines, "WARN fleet ticket_cache: redis 127.0.0.1:") == 1);
  CHECK(lines.size() == 1);

  // Back by itself: after the probe interval the next lookup goes to Redis and sees another process's ticket. The
  // first probe after SIGCONT may still miss the few-ms timeout on a loaded machine (sanitizers, the backlog of the
  // commands sent during the pause); a later one must not.
  test_support::run(io, cache_b.put(viewer_on("device-9"), {"tkt_9", now + 30min}, now));
  std::optional<wandura::cached_ticket> shared;
  for (int probe = 0; probe < 20 && !shared; ++probe) {
    wait(io, 150ms);
    shared = test_support::run(io, cache_a.get(viewer_on("device-9"), now));
  }
  REQUIRE(shared);
  CHECK(shared->payload == "tkt_9");
  CHECK_FALSE(cache_a.stats().degraded);
  CHECK(count_starting(lines, "INFO fleet ticket_cache: redis 127.0.0.1:") == 1);
}

TEST_CASE("shared ticket cache: a cancelled lookup is cancelled, not answered locally") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  wandura::shared_ticket_cache cache(client, "org_demo", {.near_cache = false}); // the lookup must wait on Redis
  auto const now = system_clock::now();
  test_support::run(io, cache.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  redis->pause();
  asio::cancellation_signal signal;
  asio::steady_timer later(io, 20ms);
  later.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
  std::error_code code;
  auto const start = std::chrono::steady_clock::now();
  try {
    test_support::run(io, [&]() -> asio::awaitable<bool> {
      auto who = viewer_on("device-7");
      auto lookup = asio::co_spawn(io, cache.get(std::move(who), now),
                                   asio::bind_cancellation_slot(signal.slot(), asio::use_awaitable));
      co_return (co_await std::move(lookup)).has_value();
    }());
  } catch (std::system_error const& e) {
    code = e.code();
  }
  auto const took = elapsed_ms(start);
  redis->resume();
  CHECK(code == asio::error::operation_aborted);
  CHECK(took < 1000);
  CHECK(cache.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: a lookup cancelled while Redis is asked counts none of its tickets, near ones and "
          "known absent ones included") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client_a(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  wandura::shared_ticket_cache cache_a(client_a, "org_demo");
  wandura::shared_ticket_cache cache_b(client_b, "org_demo");
  auto const now = system_clock::now();
  test_support::run(io, cache_a.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now)); // near in a
  test_support::run(io, cache_b.put(viewer_on("device-8"), {"tkt_8", now + 30min}, now)); // only in Redis, for a
  // a's replica holds both keys, so device-9 (nobody's) is known absent, and device-8 is asked of Redis.
  REQUIRE(wait_until(io, [&] {
    auto const s = cache_a.stats();
    return s.near_cache_live && s.known_keys_complete && s.known_keys == 2;
  }));
  // Stored before the subscription was confirmed, a's own copy is not near yet; read once more, it is.
  REQUIRE(test_support::run(io, cache_a.get(viewer_on("device-7"), now)));
  REQUIRE(cache_a.find_near(viewer_on("device-7"), now));
  std::vector<wandura::ticket_identity> const who{viewer_on("device-7"), viewer_on("device-8"), viewer_on("device-9")};
  auto const before = cache_a.stats();

  redis->pause();
  asio::cancellation_signal signal;
  asio::steady_timer later(io, 20ms);
  later.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
  std::error_code code;
  try {
    test_support::run(io, [&]() -> asio::awaitable<std::size_t> {
      auto lookup = asio::co_spawn(io, cache_a.get_many(who, now),
                                   asio::bind_cancellation_slot(signal.slot(), asio::use_awaitable));
      co_return (co_await std::move(lookup)).size();
    }());
  } catch (std::system_error const& e) {
    code = e.code();
  }
  redis->resume();
  CHECK(code == asio::error::operation_aborted);
  auto const cancelled = cache_a.stats();
  CHECK(cancelled.hits == before.hits);
  CHECK(cancelled.near_hits == before.near_hits);
  CHECK(cancelled.misses == before.misses);
  CHECK(cancelled.known_absent == before.known_absent);

  // The same lookup, not cancelled: each ticket counted once.
  auto const found = test_support::run(io, cache_a.get_many(who, now));
  REQUIRE(found.size() == 3);
  REQUIRE(found[0]);
  CHECK(found[0]->payload == "tkt_7");
  REQUIRE(found[1]);
  CHECK(found[1]->payload == "tkt_8");
  CHECK_FALSE(found[2]);
  auto const after = cache_a.stats();
  CHECK(after.hits == before.hits + 2);
  CHECK(after.near_hits == before.near_hits + 1);
  CHECK(after.misses == before.misses + 1);
  CHECK(after.known_absent == before.known_absent + 1);
}

TEST_CASE("shared ticket cache: destroyed with a lookup and a store and an erase in flight it lets each complete") {
  // The operations kept references into the cache across their wait for Redis: ASan saw a use after free.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 5s});
  auto cache = std::make_unique<wandura::shared_ticket_cache>(client, "org_demo",
                                                              wandura::ticket_cache_options{.near_cache = false});
  auto const now = system_clock::now();
  test_support::run(io, cache->put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  redis->pause();
  std::optional<wandura::cached_ticket> found;
  int done = 0;
  asio::co_spawn(io, cache->get(viewer_on("device-7"), now), [&](std::exception_ptr e, auto ticket) {
    if (!e) {
      found = std::move(ticket);
    }
    ++done;
  });
  asio::co_spawn(io, cache->put(viewer_on("device-8"), {"tkt_8", now + 30min}, now),
                 [&](std::exception_ptr) { ++done; });
  asio::co_spawn(io, cache->erase(viewer_on("device-9")), [&](std::exception_ptr) { ++done; });
  io.restart();
  io.run_for(50ms); // all three sent, waiting on the paused server
  CHECK(done == 0);
  cache.reset();
  redis->resume();
  CHECK(test_support::run_until(io, [&] { return done == 3; }));
  REQUIRE(found.has_value());
  CHECK(found->payload == "tkt_7");
}

TEST_CASE("shared ticket cache: a ticket erased by one process is no longer reused by another") {
  wandura::ticket_cache_options const redis_only{.near_cache = false};
  auto started = two_caches::start_or_skip(redis_only, redis_only);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  REQUIRE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now)));
  test_support::run(fleet.io, cache_b.erase(viewer_on("device-7")));
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

namespace {

/// Stores `ticket` for `who`, waits until the cache's erase subscription is live, then reads it once from Redis:
/// from then on the cache holds it as a near copy.
void keep_near(asio::io_context& io, wandura::shared_ticket_cache& cache, wandura::ticket_identity const& who,
               wandura::cached_ticket const& ticket, system_clock::time_point now) {
  test_support::run(io, cache.put(who, ticket, now));
  REQUIRE(wait_until(io, [&] { return cache.stats().near_cache_live; }));
  REQUIRE(test_support::run(io, cache.get(who, now)));
}

} // namespace

TEST_CASE("shared ticket cache: the near cache answers a ticket already stored or read without a round trip, "
          "once its erase subscription is live") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  CHECK_FALSE(cache_a.stats().near_cache_live); // nothing kept yet: no subscription
  test_support::run(fleet.io, cache_a.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().near_cache_live; }));
  // Kept before the subscription was confirmed: asked of Redis once more, then near.
  REQUIRE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  auto const commands = fleet.a.stats().commands;
  auto const again = test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now));
  REQUIRE(again);
  CHECK(again->payload == "tkt_7");
  CHECK(fleet.a.stats().commands == commands);
  CHECK(cache_a.stats().near_hits == 1);
  CHECK(cache_a.stats().hits == 2);
  // Never across devices, and never past the reuse limit, near or not.
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-8"), now)));
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now + 25min)));
  CHECK(cache_a.stats().near_hits == 1);

  // Another process reads it from Redis once, then near.
  REQUIRE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now)));
  REQUIRE(wait_until(fleet.io, [&] { return cache_b.stats().near_cache_live; }));
  REQUIRE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now))); // kept before it was live
  auto const b_commands = fleet.b.stats().commands;
  REQUIRE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), now)));
  CHECK(fleet.b.stats().commands == b_commands);
  CHECK(cache_b.stats().near_hits == 1);
}

TEST_CASE("shared ticket cache: an erase in one process drops another's near copy when its notice arrives") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-7"), {"tkt_7", now + 30min}, now);
  REQUIRE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  REQUIRE(cache_a.stats().near_hits == 1); // a near copy now

  test_support::run(fleet.io, cache_b.erase(viewer_on("device-7")));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().erasures_heard == 1; }));
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  CHECK(cache_a.stats().near_hits == 1);
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: with Redis down and reconnect waits of zero the subscription does not spin") {
  // A new-user trial: with both waits 0 the erase subscription reconnected ~23,000 times a second, a core busy
  // and `io_context::poll()` never returning. Every wait is at least 1 ms now (reconnect_backoff.hpp).
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(
      io.get_executor(),
      {.url = redis->url(), .command_timeout = 500ms, .reconnect_backoff = 0ms, .max_reconnect_backoff = 0ms});
  wandura::ticket_cache_options options;
  options.fallback = {.log = [](std::string_view) {}};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = system_clock::now();
  keep_near(io, cache, viewer_on("device-7"), {"tkt_7", now + 30min}, now);
  redis->kill();
  REQUIRE(wait_until(io, [&] { return !cache.stats().near_cache_live; }));
  io.restart();
  auto const handlers = io.run_for(500ms); // the subscription's reconnects, nothing else
  INFO("handlers run in 500 ms: " << handlers);
  CHECK(handlers < 4000); // one reconnect a millisecond is a few handlers each; a spin is tens of thousands
}

TEST_CASE("shared ticket cache: with its subscription lost the near cache is silent until a new one is confirmed") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::ticket_cache_options options;
  options.fallback = {.log = [](std::string_view) {}, .probe_interval = 50ms};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = system_clock::now();
  keep_near(io, cache, viewer_on("device-7"), {"tkt_7", now + 30min}, now);
  REQUIRE(test_support::run(io, cache.get(viewer_on("device-7"), now)));
  REQUIRE(cache.stats().near_hits == 1);

  redis->kill(); // erases could now be missed: no copy may be served as near
  REQUIRE(wait_until(io, [&] { return !cache.stats().near_cache_live; }));
  auto const local = test_support::run(io, cache.get(viewer_on("device-7"), now));
  CHECK(local); // the fallback still answers what this process holds
  CHECK(cache.stats().near_hits == 1);
  CHECK(cache.stats().fallbacks == 1);

  redis->start(); // empty: the ticket is gone from Redis, and the subscription comes back by itself
  REQUIRE(wait_until(
      io, [&] { return cache.stats().near_cache_live; }, 10s));
  wait(io, 60ms); // past the probe interval: Redis is asked again
  CHECK_FALSE(test_support::run(io, cache.get(viewer_on("device-7"), now))); // asked of Redis, not the old copy
  CHECK(cache.stats().near_hits == 1);
}

TEST_CASE("shared ticket cache: with the near cache off every lookup asks Redis and nothing subscribes") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache(fleet.a, "org_demo", {.near_cache = false});
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  wait(fleet.io, 50ms);
  auto const commands = fleet.a.stats().commands;
  for (int i = 0; i < 3; ++i) {
    CHECK(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now)));
  }
  CHECK(fleet.a.stats().commands == commands + 3);
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), now)); // the caller's fast path answers nothing either
  CHECK(cache.stats().near_hits == 0);
  CHECK_FALSE(cache.stats().near_cache_live);
  auto const clients = raw(fleet.io, fleet.a, {"PUBSUB", "NUMSUB", wandura::fleet_keys::ticket_erasures("org_demo")});
  REQUIRE(clients.elements.size() == 2);
  CHECK(clients.elements[1].integer == 0);
}

TEST_CASE("shared ticket cache: a ticket being stored is served near until its script ends, only with the near "
          "cache on") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  bool const near_on = GENERATE(true, false);
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache(fleet.a, "org_demo", {.near_cache = near_on});
  auto const now = system_clock::now();
  redis->pause(); // the store's script waits for Redis: its write has not ended
  bool stored = false;
  asio::co_spawn(
      fleet.io,
      [](wandura::shared_ticket_cache& c, system_clock::time_point at, bool& done) -> asio::awaitable<void> {
        auto put = c.put(viewer_on("device-7"), {"tkt_7", at + 30min}, at); // named: GCC 12 and co_await temporaries
        co_await std::move(put);
        done = true;
      }(cache, now, stored),
      asio::detached);
  wait(fleet.io, 50ms);
  REQUIRE_FALSE(stored);
  auto const during = cache.find_near(viewer_on("device-7"), now);
  CHECK(during.has_value() == near_on);
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), now)); // never another device
  redis->resume();
  REQUIRE(wait_until(fleet.io, [&] { return stored; }));
  CHECK(cache.stats().fallbacks == 0);
  if (!cache.stats().near_cache_live) { // kept before the subscription was confirmed: not near once written
    CHECK_FALSE(cache.find_near(viewer_on("device-7"), now));
  }
  CHECK(test_support::run(fleet.io, cache.get(viewer_on("device-7"), now))); // in Redis
}

TEST_CASE("shared ticket cache: get_many answers near copies locally, keys known absent at once, and the rest "
          "with one MGET, in order") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(test_support::keys_known(fleet.io, cache_a)); // live, and its keys read
  test_support::run(fleet.io, cache_a.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now)); // near at once
  test_support::run(fleet.io, cache_b.put(viewer_on("device-3"), {"tkt_3", now + 30min}, now)); // only in Redis
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys == 3; }));               // b's store heard
  auto const commands = fleet.a.stats().commands;
  auto const found = test_support::run(
      fleet.io, cache_a.get_many(
                    {viewer_on("device-3"), viewer_on("device-9"), viewer_on("device-2"), viewer_on("device-1")}, now));
  REQUIRE(found.size() == 4);
  CHECK(found[0]->payload == "tkt_3");
  CHECK_FALSE(found[1]);
  CHECK(found[2]->payload == "tkt_2");
  CHECK(found[3]->payload == "tkt_1");             // kept before the subscription: asked of Redis
  CHECK(fleet.a.stats().commands == commands + 1); // device-3 and device-1 in one MGET
  CHECK(cache_a.stats().near_hits == 1);
  CHECK(cache_a.stats().hits == 3);
  CHECK(cache_a.stats().misses == 1);
  CHECK(cache_a.stats().known_absent == 1); // device-9: stored by no process
}

TEST_CASE("shared ticket cache: coroutines on a multi-threaded io_context reach it through its strand") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  auto strand = asio::make_strand(io);
  wandura::redis_client client(strand, {.url = redis->url(), .command_timeout = 2s});
  wandura::shared_ticket_cache cache(client, "org_demo");
  auto const now = system_clock::now();
  std::atomic<int> hits{0};
  std::atomic<int> done{0};
  constexpr int workers = 8;
  for (int w = 0; w < workers; ++w) {
    asio::co_spawn(
        io,
        [&, w]() -> asio::awaitable<void> {
          for (int i = 0; i < 25; ++i) {
            auto who = viewer_on("device-" + std::to_string(w) + "-" + std::to_string(i));
            wandura::cached_ticket ticket{"tkt_" + std::to_string(w), now + 30min};
            // The operations are named before co_await: no class temporaries inside it (GCC 12).
            auto put = cache.put(who, std::move(ticket), now);
            co_await asio::co_spawn(strand, std::move(put), asio::use_awaitable);
            auto get = cache.get(std::move(who), now);
            auto found = co_await asio::co_spawn(strand, std::move(get), asio::use_awaitable);
            hits += found && found->payload == "tkt_" + std::to_string(w) ? 1 : 0;
          }
          if (++done == workers) {
            io.stop();
          }
        },
        asio::detached);
  }
  std::thread second([&] { io.run(); });
  io.run();
  second.join();
  CHECK(hits == workers * 25);
  CHECK(cache.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: put_many stores every ticket in one script, the longer-lived rule per key") {
  wandura::ticket_cache_options const redis_only{.near_cache = false};
  auto started = two_caches::start_or_skip(redis_only, redis_only);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  test_support::run(fleet.io, cache_b.put(viewer_on("device-2"), {"long", now + 40min}, now));
  auto const commands = fleet.a.stats().commands;
  std::vector<std::pair<wandura::ticket_identity, wandura::cached_ticket>> batch;
  batch.emplace_back(viewer_on("device-1"), wandura::cached_ticket{"tkt_1", now + 30min});
  batch.emplace_back(viewer_on("device-2"), wandura::cached_ticket{"short", now + 20min});   // b's lives longer
  batch.emplace_back(viewer_on("device-3"), wandura::cached_ticket{"expiring", now + 5min}); // nothing to reuse
  test_support::run(fleet.io, cache_a.put_many(std::move(batch), now));
  CHECK(fleet.a.stats().commands == commands + 1);
  auto const found = test_support::run(
      fleet.io, cache_b.get_many({viewer_on("device-1"), viewer_on("device-2"), viewer_on("device-3")}, now));
  REQUIRE(found.size() == 3);
  REQUIRE(found[0]);
  CHECK(found[0]->payload == "tkt_1");
  REQUIRE(found[1]);
  CHECK(found[1]->payload == "long");
  CHECK_FALSE(found[2]);
  auto const pttl = raw(fleet.io, fleet.a, {"PTTL", wandura::fleet_keys::ticket("org_demo", viewer_on("device-1"))});
  CHECK(pttl.integer > (25min - 5s) / 1ms);
  CHECK(pttl.integer <= 25min / 1ms);
}

TEST_CASE("shared ticket cache: once its own erase is done, no lookup that raced it left a copy of the erased ticket") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-0"), {"tkt_0", now + 30min}, now); // a's subscription is live
  // Each round: another process stores a ticket; here a lookup of it is in flight (its MGET sent, not answered)
  // when this process erases it. The lookup reads the ticket (Redis ran the MGET first); the erase must still leave
  // nothing behind here once it is done, whether or not its notice has arrived yet. The notice usually comes back
  // before the erase's reply: many short rounds (about 0.3 ms each over loopback) for the few where it lags.
  constexpr int rounds = 1000;
  int served_after_erase = 0;
  int kept_after_erase = 0;
  for (int round = 0; round < rounds; ++round) {
    auto const who = viewer_on("device-race-" + std::to_string(round));
    test_support::run(fleet.io, cache_b.put(who, {"tkt_race", now + 30min}, now));
    test_support::run(fleet.io, [&]() -> asio::awaitable<void> {
      bool looked_up = false;
      auto lookup = cache_a.get(who, now);
      asio::co_spawn(
          co_await asio::this_coro::executor,
          [&looked_up](asio::awaitable<std::optional<wandura::cached_ticket>> inner) -> asio::awaitable<void> {
            co_await std::move(inner);
            looked_up = true;
          }(std::move(lookup)),
          asio::detached);
      asio::steady_timer yield_once(co_await asio::this_coro::executor, 0ms); // let the lookup send its MGET
      co_await yield_once.async_wait(asio::use_awaitable);
      auto erase = cache_a.erase(who);
      co_await std::move(erase);
      REQUIRE(looked_up); // one connection, in order: the MGET was answered before the erase
      served_after_erase += cache_a.find_near(who, now) ? 1 : 0;
    }());
    // Redis holds nothing for it now: neither the near cache nor the fallback may answer it.
    kept_after_erase += cache_a.find_near(who, now) ? 1 : 0;
  }
  CHECK(served_after_erase == 0);
  CHECK(kept_after_erase == 0);
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: a lookup that raced another process's erase keeps nothing, not even for the "
          "fallback") {
  wandura::ticket_cache_options options;
  options.fallback = {.log = [](std::string_view) {}, .probe_interval = 50ms};
  auto started = two_caches::start_or_skip(options);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-0"), {"tkt_0", now + 30min}, now); // a's subscription is live
  constexpr int rounds = 10;
  auto const raced = [](int round) { return viewer_on("device-raced-" + std::to_string(round)); };
  for (int round = 0; round < rounds; ++round) {
    test_support::run(fleet.io, cache_b.put(raced(round), {"tkt_raced", now + 30min}, now));
    // Redis held still while a's MGET and then b's erase reach it: it runs them in that order, so a reads the
    // ticket and the erase's notice to a leaves with (or before) the MGET's reply.
    redis->pause();
    test_support::run(fleet.io, [&]() -> asio::awaitable<void> {
      int done = 0;
      auto const finish = [&done]() -> asio::awaitable<void> {
        ++done;
        co_return;
      };
      auto lookup = cache_a.get(raced(round), now);
      asio::co_spawn(
          co_await asio::this_coro::executor,
          [&finish](asio::awaitable<std::optional<wandura::cached_ticket>> inner) -> asio::awaitable<void> {
            co_await std::move(inner);
            co_await finish();
          }(std::move(lookup)),
          asio::detached);
      asio::steady_timer settle(co_await asio::this_coro::executor, 5ms); // the MGET is on its way first
      co_await settle.async_wait(asio::use_awaitable);
      auto erase = cache_b.erase(raced(round));
      asio::co_spawn(
          co_await asio::this_coro::executor,
          [&finish](asio::awaitable<void> inner) -> asio::awaitable<void> {
            co_await std::move(inner);
            co_await finish();
          }(std::move(erase)),
          asio::detached);
      co_await settle.async_wait(asio::use_awaitable);
      settle.expires_after(5ms);
      co_await settle.async_wait(asio::use_awaitable);
      redis->resume();
      for (int tick = 0; tick < 200 && done < 2; ++tick) {
        settle.expires_after(5ms);
        co_await settle.async_wait(asio::use_awaitable);
      }
      REQUIRE(done == 2);
    }());
  }
  REQUIRE(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0); // every race ran against Redis
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.erasures_heard() == rounds; }));

  // Redis gone: a answers from its local copy. The ticket it stored is there; none that the fleet erased is.
  redis->kill();
  REQUIRE(wait_until(fleet.io, [&] { return !cache_a.near_cache_live(); }));
  CHECK(test_support::run(fleet.io, cache_a.get(viewer_on("device-0"), now)));
  int erased_but_served = 0;
  for (int round = 0; round < rounds; ++round) {
    erased_but_served += test_support::run(fleet.io, cache_a.get(raced(round), now)) ? 1 : 0;
  }
  CHECK(erased_but_served == 0);
}

TEST_CASE("shared ticket cache: near lookups on other threads, while stores, erases and notices change the local "
          "copy, only ever see the asking device's ticket") {
  wandura::ticket_cache_options options;
  options.local_capacity = 4; // smaller than the devices: stores evict all the time
  auto started = two_caches::start_or_skip(options);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-0"), {"tkt_device-0", now + 30min}, now);
  constexpr int devices = 6;
  auto const device = [](int d) { return "device-" + std::to_string(d); };
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::atomic<long> served{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      for (long i = 0; !stop.load(std::memory_order_relaxed) && i < 50'000'000; ++i) {
        auto const d = static_cast<int>((i + r) % devices);
        if (auto found = cache_a.find_near(viewer_on(device(d)), now)) {
          ++served;
          wrong += found->payload == "tkt_" + device(d) ? 0 : 1;
        }
      }
    });
  }
  // On the executor: this process stores and reads, the other erases and stores again; a's notices arrive between.
  test_support::run(fleet.io, [&]() -> asio::awaitable<void> {
    for (int round = 0; round < 60; ++round) {
      auto const d = round % devices;
      auto put = cache_a.put(viewer_on(device(d)), {"tkt_" + device(d), now + 30min}, now);
      co_await std::move(put);
      auto get = cache_a.get(viewer_on(device((d + 1) % devices)), now);
      co_await std::move(get);
      auto erase = cache_b.erase(viewer_on(device((d + 2) % devices)));
      co_await std::move(erase);
      auto other =
          cache_b.put(viewer_on(device((d + 3) % devices)), {"tkt_" + device((d + 3) % devices), now + 40min}, now);
      co_await std::move(other);
      auto mine = cache_a.erase(viewer_on(device((d + 4) % devices)));
      co_await std::move(mine);
    }
  }());
  stop = true;
  for (auto& t : readers) {
    t.join();
  }
  CHECK(wrong == 0);
  CHECK(served > 0);
  CHECK(cache_a.near_hits() >= static_cast<std::uint64_t>(served.load()));
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: an erase missed while only the subscription was down is never served near, and "
          "copies read meanwhile are not near once it is back") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  // A second's backoff: the subscription stays down long enough for the other process to erase meanwhile.
  wandura::redis_client client_a(io.get_executor(),
                                 {.url = redis->url(), .command_timeout = 500ms, .reconnect_backoff = 1s});
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::shared_ticket_cache cache_a(client_a, "org_demo");
  wandura::shared_ticket_cache cache_b(client_b, "org_demo");
  auto const now = system_clock::now();
  keep_near(io, cache_a, viewer_on("device-7"), {"tkt_7", now + 30min}, now);
  test_support::run(io, cache_b.put(viewer_on("device-8"), {"tkt_8", now + 30min}, now));
  REQUIRE(cache_a.find_near(viewer_on("device-7"), now));
  auto const heard = cache_a.erasures_heard();

  // Only the subscription's connection goes; the command connection stays up.
  raw(io, client_b, {"CLIENT", "KILL", "TYPE", "pubsub"});
  REQUIRE(wait_until(
      io, [&] { return !cache_a.near_cache_live(); }, 2s));
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), now)); // erases could be missed now
  test_support::run(io, cache_b.erase(viewer_on("device-7")));
  CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-7"), now))); // asked of Redis: gone
  REQUIRE(test_support::run(io, cache_a.get(viewer_on("device-8"), now)));     // read while not subscribed
  CHECK(cache_a.erasures_heard() == heard);                                    // the erase was missed

  REQUIRE(wait_until(
      io, [&] { return cache_a.near_cache_live(); }, 10s));
  auto const near_hits = cache_a.near_hits();
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), now)); // the missed erase's ticket, kept before: not near
  CHECK_FALSE(cache_a.find_near(viewer_on("device-8"), now)); // read before the subscription was confirmed
  REQUIRE(test_support::keys_known(io, cache_a));             // the keys read again: the erased one is not among them
  auto const commands = client_a.stats().commands;
  auto const absent = cache_a.known_absent();
  CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-7"), now)));
  REQUIRE(test_support::run(io, cache_a.get(viewer_on("device-8"), now)));
  CHECK(client_a.stats().commands == commands + 1); // device-8 asked of Redis
  CHECK(cache_a.known_absent() == absent + 1);      // device-7 known to be gone
  CHECK(cache_a.near_hits() == near_hits);
  CHECK(test_support::run(io, cache_a.get(viewer_on("device-8"), now))); // read under the new subscription: near
  CHECK(cache_a.near_hits() == near_hits + 1);
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: erasures_heard and near_cache_live, read on another thread while the io_context "
          "runs, follow the subscription through erases, a kill and a restart of redis-server") {
  wandura::ticket_cache_options options;
  options.fallback = {.log = [](std::string_view) {}, .probe_interval = 50ms};
  auto started = two_caches::start_or_skip(options, options);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  CHECK(cache_a.erasures_heard() == 0); // nothing kept yet: no subscription, nothing heard
  CHECK_FALSE(cache_a.near_cache_live());

  // What a reader on another thread sees, sampled every 100 us while this thread runs the io_context.
  std::atomic<bool> stop{false};
  std::atomic<long> samples{0};
  std::atomic<std::uint64_t> seen_heard{0};
  std::atomic<bool> seen_live{false};
  std::atomic<int> live_changes{0};
  std::atomic<bool> heard_went_back{false};
  std::thread reader([&] {
    std::uint64_t last_heard = 0;
    bool last_live = false;
    for (long i = 0; i < 300'000 && !stop.load(); ++i) { // 30 s at most
      auto const heard = cache_a.erasures_heard();
      auto const live = cache_a.near_cache_live();
      heard_went_back = heard_went_back || heard < last_heard;
      live_changes += live != last_live ? 1 : 0;
      last_heard = heard;
      last_live = live;
      seen_heard = heard;
      seen_live = live;
      ++samples;
      std::this_thread::sleep_for(100us);
    }
  });
  auto const seen = [&](std::uint64_t heard, bool live, std::chrono::milliseconds limit = 10s) {
    auto const from = samples.load();
    return wait_until(
        fleet.io, [&] { return samples.load() > from + 1 && seen_heard == heard && seen_live == live; }, limit);
  };

  CHECK(seen(0, false)); // the io_context runs, yet nothing subscribes before a ticket is kept

  keep_near(fleet.io, cache_a, viewer_on("device-7"), {"tkt_7", now + 30min}, now);
  CHECK(seen(0, true));

  test_support::run(fleet.io, cache_b.erase(viewer_on("device-7"))); // another process's erase
  CHECK(seen(1, true));
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), now));
  test_support::run(fleet.io, cache_a.put(viewer_on("device-8"), {"tkt_8", now + 30min}, now));
  test_support::run(fleet.io, cache_a.erase(viewer_on("device-8"))); // its own: heard too
  CHECK(seen(2, true));

  redis->kill(); // the subscription drops: not live, and what was heard stays counted
  CHECK(seen(2, false));
  CHECK(cache_a.stats().near_cache_live == cache_a.near_cache_live());

  redis->start(); // empty; the subscription comes back by itself
  CHECK(seen(2, true));
  // An erase now is heard again. The first command on b's connection may still meet the old socket: then it answers
  // locally and publishes nothing, and a later one (past the 50 ms probe interval) reaches the new server.
  bool heard_after_restart = false;
  for (int attempt = 0; attempt < 20 && !heard_after_restart; ++attempt) {
    test_support::run(fleet.io, cache_b.erase(viewer_on("device-9")));
    heard_after_restart = seen(3, true, 500ms);
  }
  CHECK(heard_after_restart);

  stop = true;
  reader.join();
  CHECK_FALSE(heard_went_back);
  CHECK(live_changes == 3); // live, dropped, live again
  auto const stats = cache_a.stats();
  CHECK(stats.erasures_heard == 3);
  CHECK(stats.near_cache_live);
}

TEST_CASE("shared ticket cache: for the fleet's ticket store, bytes that are not its payload are a miss, neither a "
          "hit nor a near hit, and no copy of them is kept or served") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  using wandura::detail::ticket_cache_access;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-0"), {"tkt_0", now + 30min}, now); // a's subscription is live
  // Another writer of the organisation stores bytes of another format for device-7 (the public API carries any).
  test_support::run(fleet.io, cache_b.put(viewer_on("device-7"), {"not a ticket store payload", now + 30min}, now));
  REQUIRE(test_support::keys_known(fleet.io, cache_a));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys == 2; })); // b's store heard

  // The store's lookup past the near cache: a miss, counted as a value refused, and nothing kept.
  auto const before = cache_a.stats();
  auto const found =
      test_support::run(fleet.io, [&]() -> asio::awaitable<std::optional<wandura::detail::stored_ticket>> {
        auto lookup = ticket_cache_access::get_many_past_near(cache_a, {viewer_on("device-7")}, now);
        auto result = co_await std::move(lookup);
        co_return std::move(result.at(0));
      }());
  CHECK_FALSE(found);
  auto const after = cache_a.stats();
  CHECK(after.hits == before.hits);
  CHECK(after.misses == before.misses + 1);
  CHECK(after.rejected == before.rejected + 1);
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), now)); // no copy kept

  // A near copy of such bytes (kept by a public lookup of the same cache) is not a near hit of the store, and goes.
  REQUIRE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  REQUIRE(cache_a.find_near(viewer_on("device-7"), now));
  auto const near_hits = cache_a.near_hits();
  CHECK_FALSE(ticket_cache_access::find_near(cache_a, viewer_on("device-7"), now, "this-process"));
  CHECK(cache_a.near_hits() == near_hits);
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), now)); // dropped
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: the fleet's ticket store looks up past the near cache what it asked of it already, "
          "while get_many asks the near cache first") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  using wandura::detail::ticket_cache_access;
  auto const now = system_clock::now();
  keep_near(fleet.io, cache_a, viewer_on("device-0"), {"tkt_0", now + 30min}, now); // a's subscription is live
  auto const payload = [](std::string const& id) {
    wandura::ticket t;
    t.ticket_id = id;
    t.expires_at = system_clock::now() + 30min;
    return wandura::detail::stored_ticket{"this-process", t};
  };
  // Stored while the subscription is live: near copies at once, and in Redis.
  test_support::run(fleet.io, [&]() -> asio::awaitable<void> {
    std::vector<std::pair<wandura::ticket_identity, wandura::detail::stored_ticket>> batch;
    batch.emplace_back(viewer_on("device-1"), payload("tkt_1"));
    batch.emplace_back(viewer_on("device-2"), payload("tkt_2"));
    wandura::detail::prepared_stores stores;
    ticket_cache_access::prepare(cache_a, std::move(batch), now, stores); // kept locally at once
    auto write = ticket_cache_access::write(cache_a, std::move(stores));
    co_await std::move(write);
  }());
  REQUIRE(ticket_cache_access::find_near(cache_a, viewer_on("device-1"), now, "this-process"));
  REQUIRE(test_support::keys_known(fleet.io, cache_a));
  auto const before = cache_a.stats();
  auto const commands = fleet.a.stats().commands;

  // The store's lookup of the keys its near check left (here device-2, near by now): one MGET, no near hit; and
  // device-3, which no process stored, known absent without asking.
  auto const found = test_support::run(fleet.io, [&]() -> asio::awaitable<int> {
    auto lookup = ticket_cache_access::get_many_past_near(cache_a, {viewer_on("device-2"), viewer_on("device-3")}, now);
    auto result = co_await std::move(lookup);
    co_return (result.at(0) && result.at(0)->value.ticket_id == "tkt_2" ? 1 : 0) + (result.at(1) ? 10 : 0);
  }());
  CHECK(found == 1);
  CHECK(fleet.a.stats().commands == commands + 1);
  CHECK(cache_a.stats().near_hits == before.near_hits);
  CHECK(cache_a.stats().hits == before.hits + 1);
  CHECK(cache_a.stats().misses == before.misses + 1);
  CHECK(cache_a.stats().known_absent == before.known_absent + 1);

  // get_many, for direct users, answers the near copy first and asks Redis only for the rest (here nothing: the
  // rest is known absent).
  auto const many = test_support::run(fleet.io, cache_a.get_many({viewer_on("device-2"), viewer_on("device-3")}, now));
  REQUIRE(many.size() == 2);
  CHECK(many[0]);
  CHECK_FALSE(many[1]);
  CHECK(fleet.a.stats().commands == commands + 1);
  CHECK(cache_a.stats().near_hits == before.near_hits + 1);
  CHECK(cache_a.stats().known_absent == before.known_absent + 2);
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("shared ticket cache: an erase with Redis down forgets the local copy and counts a fallback") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::ticket_cache_options options;
  options.fallback.log = [](std::string_view) {};
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = system_clock::now();
  test_support::run(io, cache.put(viewer_on("device-7"), {"tkt_7", now + 30min}, now));
  redis->kill();
  REQUIRE(test_support::run(io, cache.get(viewer_on("device-7"), now))); // answered locally
  auto const fallbacks = cache.stats().fallbacks;
  test_support::run(io, cache.erase(viewer_on("device-7")));
  CHECK(cache.stats().fallbacks == fallbacks + 1);
  CHECK_FALSE(test_support::run(io, cache.get(viewer_on("device-7"), now)));
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), now));
}

TEST_CASE("shared ticket cache: every operation refuses an identity without a viewer_ref or a union_info, before "
          "any command") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  wandura::cached_ticket const ticket{"tkt", now + 30min};
  auto no_viewer = viewer_on("device-7");
  no_viewer.viewer_ref.clear();
  auto const no_device = viewer_on("");
  auto const commands = fleet.a.stats().commands;
  for (auto const& who : {no_viewer, no_device}) {
    CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, cache_a.get(who, now)); }));
    CHECK(test_support::refused_as_invalid([&] {
      test_support::run(fleet.io, cache_a.get_many({viewer_on("device-8"), who}, now));
    }));
    CHECK(test_support::refused_as_invalid([&] { (void)cache_a.find_near(who, now); }));
    CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, cache_a.put(who, ticket, now)); }));
    CHECK(test_support::refused_as_invalid([&] {
      test_support::run(fleet.io, cache_a.put_many({{viewer_on("device-8"), ticket}, {who, ticket}}, now));
    }));
    CHECK(test_support::refused_as_invalid([&] { test_support::run(fleet.io, cache_a.erase(who)); }));
  }
  CHECK(fleet.a.stats().commands == commands);
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-8"), now))); // nothing of a batch was stored
}

TEST_CASE("shared ticket cache: reuse_margin sets when a ticket stops being reused, and its Redis entry's life") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_ticket_cache cache_a(fleet.a, "org_demo", {.reuse_margin = 1min});
  wandura::shared_ticket_cache cache_b(fleet.b, "org_demo", {.reuse_margin = 1min, .near_cache = false});
  auto const now = system_clock::now();
  auto const expires_at = std::chrono::time_point_cast<std::chrono::milliseconds>(now + 30min);
  test_support::run(fleet.io, cache_a.put(viewer_on("device-7"), {"tkt_7", expires_at}, now));
  auto const pttl = raw(fleet.io, fleet.a, {"PTTL", wandura::fleet_keys::ticket("org_demo", viewer_on("device-7"))});
  CHECK(pttl.integer > (29min - 5s) / 1ms);
  CHECK(pttl.integer <= 29min / 1ms);
  CHECK(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), expires_at - 2min))); // 5 min would refuse
  CHECK_FALSE(test_support::run(fleet.io, cache_b.get(viewer_on("device-7"), expires_at - 30s)));
  // Near, once the erase subscription is live and the ticket read again: the same margin.
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().near_cache_live; }));
  REQUIRE(test_support::run(fleet.io, cache_a.get(viewer_on("device-7"), now)));
  CHECK(cache_a.find_near(viewer_on("device-7"), expires_at - 2min));
  CHECK_FALSE(cache_a.find_near(viewer_on("device-7"), expires_at - 1min));
}

TEST_CASE("shared ticket cache: a Redis that answers reads and refuses writes logs one WARN until a write succeeds, "
          "then one INFO") {
  // A read-only replica (as OOM under noeviction, or an ACL): an MGET answered after each probe interval ended the
  // outage its refused store had opened, and the log flipped WARN, INFO, WARN for as long as the refusal lasted.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::redis_client admin(io.get_executor(), {.url = redis->url(), .command_timeout = 2s});
  std::vector<std::string> lines;
  wandura::ticket_cache_options options;
  options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); }, .probe_interval = 50ms};
  options.near_cache = false;
  options.known_keys_capacity = 0; // every lookup reads Redis
  wandura::shared_ticket_cache cache(client, "org_demo", options);
  auto const now = system_clock::now();
  auto store = [&](int i) {
    auto const who = viewer_on("device-" + std::to_string(i));
    test_support::run(io, cache.put(who, {"tkt_" + std::to_string(i), now + 30min}, now));
  };
  store(0);
  raw(io, admin, {"REPLICAOF", "127.0.0.1", "1"}); // a replica of nothing: reads answered, writes READONLY
  for (int i = 1; i <= 8; ++i) { // after each probe interval a lookup first (Redis answers it), then a store
    wait(io, 60ms);
    CHECK(test_support::run(io, cache.get(viewer_on("device-0"), now)));
    store(i);
  }
  CHECK(count_starting(lines, "WARN fleet ticket_cache") == 1);
  CHECK(count_starting(lines, "INFO fleet ticket_cache") == 0);
  CHECK(cache.stats().degraded);
  raw(io, admin, {"REPLICAOF", "NO", "ONE"});
  wait(io, 60ms);
  store(9); // the probe: a write, answered
  CHECK_FALSE(cache.stats().degraded);
  CHECK(count_starting(lines, "WARN fleet ticket_cache") == 1);
  REQUIRE(count_starting(lines, "INFO fleet ticket_cache") == 1);
  CHECK(lines.back().find("is back after") != std::string::npos);
}
