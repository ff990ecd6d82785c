// The ticket cache's replica of which keys exist (shared_ticket_cache.hpp, "Keys known absent") over a real
// redis-server: what it answers without a round trip, what it still asks, and how it recovers from each way of
// losing track (a lost subscription, a message it cannot read, an overflow, a read Redis refuses).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <asio/io_context.hpp>

#include "fleet/ticket_cache_access.hpp"
#include "fleet_test_support.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::keys_known;
using test_support::raw;
using test_support::two_caches;
using test_support::viewer_on;
using test_support::wait_until;

namespace {

/// How many times the server ran `command` (lower case), from INFO commandstats.
std::uint64_t calls_of(asio::io_context& io, wandura::redis_client& client, std::string const& command) {
  auto const info = raw(io, client, {"INFO", "commandstats"}).text;
  auto const at = info.find("cmdstat_" + command + ":calls=");
  if (at == std::string::npos) {
    return 0;
  }
  return std::stoull(info.substr(at + command.size() + 15));
}

/// `n` tickets of one viewer, devices `first`..`first + n - 1`, reusable for 30 min from `now`.
std::vector<std::pair<wandura::ticket_identity, wandura::cached_ticket>> tickets_of(int first, int n,
                                                                                    system_clock::time_point now) {
  std::vector<std::pair<wandura::ticket_identity, wandura::cached_ticket>> out;
  for (int i = first; i < first + n; ++i) {
    out.emplace_back(viewer_on("device-" + std::to_string(i)),
                     wandura::cached_ticket{"tkt_" + std::to_string(i), now + 30min});
  }
  return out;
}

} // namespace

TEST_CASE("known keys: once read whole, a key no process stored is answered absent without a command, one another "
          "process stored is read, and the replica is off with the near cache off or a capacity of 0") {
  bool const near_cache = GENERATE(true, false);
  std::size_t const capacity = GENERATE(std::size_t{1000}, std::size_t{0});
  CAPTURE(near_cache, capacity);
  auto started = two_caches::start_or_skip({.near_cache = near_cache, .known_keys_capacity = capacity});
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  bool const on = near_cache && capacity > 0;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now)); // subscribes
  if (on) {
    REQUIRE(keys_known(fleet.io, cache_a));
    CHECK(cache_a.stats().known_keys == 1);
    CHECK(cache_a.stats().known_keys_resyncs == 1);
  } else {
    test_support::wait(fleet.io, 200ms); // what a resync would take, had one started
    CHECK_FALSE(cache_a.stats().known_keys_complete);
    CHECK(cache_a.stats().known_keys == 0);
  }

  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-9"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + (on ? 0 : 1));
  CHECK(cache_a.stats().known_absent == (on ? 1U : 0U));
  CHECK(cache_a.stats().misses == 1); // counted once, either way

  auto const known = cache_a.stats().known_keys;
  test_support::run(fleet.io, cache_b.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now));
  if (on) {
    REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys == known + 1; })); // heard
  }
  auto const found = test_support::run(fleet.io, cache_a.get(viewer_on("device-2"), now));
  REQUIRE(found);
  CHECK(found->payload == "tkt_2");
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + (on ? 1 : 2));
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("known keys: the read whole finds what was stored before the subscription, a raw write included, and "
          "an erase anywhere makes its key known absent") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_b.put_many(tickets_of(10, 3, now), now));
  // A value under a key of the organisation that no store script wrote (announced to no one), and one that is no
  // ticket key of it at all, under the same prefix.
  auto const raw_key = wandura::fleet_keys::ticket("org_demo", viewer_on("device-20"));
  raw(fleet.io, fleet.b, {"SET", raw_key, "not an envelope", "PX", "600000"});
  raw(fleet.io, fleet.b, {"SET", "wandura:{org_demo}:ticket:not-a-hash", "x", "PX", "600000"});
  raw(fleet.io, fleet.b, {"SET", wandura::fleet_keys::ticket("org_demo", viewer_on("device-21")), "no expiry"});

  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now)); // subscribes
  REQUIRE(keys_known(fleet.io, cache_a));
  CHECK(cache_a.stats().known_keys == 5); // b's three, the raw one with an expiry, a's own (no PTTL: not taken)

  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  auto const found = test_support::run(fleet.io, cache_a.get_many({viewer_on("device-11"), viewer_on("device-20"),
                                                                   viewer_on("device-21"), viewer_on("device-99")},
                                                                  now));
  REQUIRE(found.size() == 4);
  CHECK(found[0]);
  CHECK_FALSE(found[1]);                                   // read, and refused: not an envelope
  CHECK_FALSE(found[2]);                                   // no expiry: not taken, answered absent
  CHECK_FALSE(found[3]);                                   // stored by no one
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1); // device-11 and device-20
  CHECK(cache_a.stats().rejected == 1);
  CHECK(cache_a.stats().known_absent == 2);

  // Erased by b: a hears it, drops the key, and answers it absent without asking.
  auto const heard = cache_a.erasures_heard();
  test_support::run(fleet.io, cache_b.erase(viewer_on("device-11")));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.erasures_heard() == heard + 1; }));
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-11"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
  CHECK(cache_a.stats().known_absent == 3);
}

TEST_CASE("known keys: a key deleted behind the fleet's back is read as nil once, then known absent") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  test_support::run(fleet.io, cache_b.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now));
  REQUIRE(keys_known(fleet.io, cache_a));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys == 2; }));
  raw(fleet.io, fleet.b, {"DEL", wandura::fleet_keys::ticket("org_demo", viewer_on("device-2"))}); // no PUBLISH
  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-2"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
  CHECK(cache_a.stats().known_keys == 1);
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-2"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
  CHECK(cache_a.stats().known_absent == 1);
}

TEST_CASE("known keys: a fleet in another database of the same server (same org, its own /db) neither erases this "
          "database's tickets nor makes them known absent") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client writer_client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::redis_client reader_client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::redis_client staging_client(io.get_executor(), {.url = redis->url() + "/1", .command_timeout = 500ms});
  wandura::shared_ticket_cache writer(writer_client, "acme", {});
  wandura::shared_ticket_cache reader(reader_client, "acme", {});
  wandura::shared_ticket_cache staging(staging_client, "acme", {}); // another deployment, database 1
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  auto const who = viewer_on("device-1");
  test_support::run(io, writer.put(who, {"tkt_db0", now + 30min}, now));
  test_support::run(io, reader.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now)); // subscribes
  test_support::run(io, staging.put(viewer_on("device-3"), {"tkt_3", now + 30min}, now));
  REQUIRE(keys_known(io, reader));
  REQUIRE(keys_known(io, staging));
  REQUIRE(test_support::run(io, reader.get(who, now)) == wandura::cached_ticket{"tkt_db0", now + 30min});

  // The same viewer's device in database 1: stored there and erased there.
  test_support::run(io, staging.put(who, {"tkt_db1", now + 30min}, now));
  test_support::run(io, staging.erase(who));
  REQUIRE(wait_until(io, [&] { return staging.stats().erasures_heard == 1; })); // the erase was published
  test_support::wait(io, 50ms);
  CHECK(raw(io, writer_client, {"EXISTS", wandura::fleet_keys::ticket("acme", who)}).integer == 1);
  CHECK(test_support::run(io, reader.get(who, now)) == wandura::cached_ticket{"tkt_db0", now + 30min});
  CHECK(reader.stats().erasures_heard == 0);
  CHECK(reader.stats().known_absent == 0);
}

TEST_CASE("known keys: with the subscription lost every near miss asks Redis, and once it is back the keys are "
          "read whole again, stores missed meanwhile included") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  // A second's backoff: the subscription stays down long enough for the other process to store meanwhile.
  wandura::redis_client client_a(io.get_executor(),
                                 {.url = redis->url(), .command_timeout = 500ms, .reconnect_backoff = 1s});
  wandura::redis_client client_b(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::shared_ticket_cache cache_a(client_a, "org_demo");
  wandura::shared_ticket_cache cache_b(client_b, "org_demo");
  auto const now = system_clock::now();
  test_support::run(io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(keys_known(io, cache_a));

  raw(io, client_b, {"CLIENT", "KILL", "TYPE", "pubsub"});
  REQUIRE(wait_until(
      io, [&] { return !cache_a.near_cache_live(); }, 2s));
  CHECK_FALSE(cache_a.stats().known_keys_complete);
  CHECK(cache_a.stats().known_keys == 0);
  test_support::run(io, cache_b.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now)); // unheard by a
  auto const mgets = calls_of(io, client_b, "mget");
  CHECK(test_support::run(io, cache_a.get(viewer_on("device-2"), now)));       // asked of Redis
  CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-9"), now))); // asked of Redis too
  CHECK(calls_of(io, client_b, "mget") == mgets + 2);

  REQUIRE(keys_known(io, cache_a));
  CHECK(cache_a.stats().known_keys_resyncs == 2);
  CHECK(cache_a.stats().known_keys == 2); // device-2, stored while a was not listening, read whole
  CHECK_FALSE(test_support::run(io, cache_a.get(viewer_on("device-9"), now)));
  CHECK(calls_of(io, client_b, "mget") == mgets + 2);
  CHECK(cache_a.stats().fallbacks + cache_b.stats().fallbacks == 0);
}

TEST_CASE("known keys: a message on the channel that is not one of the store script's makes the replica read "
          "whole again, and lookups ask Redis until it is") {
  auto started = two_caches::start_or_skip();
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(keys_known(fleet.io, cache_a));
  auto const channel = wandura::fleet_keys::ticket_erasures("org_demo");
  auto const key = wandura::fleet_keys::ticket("org_demo", viewer_on("device-2"));
  for (std::string const& message :
       std::vector<std::string>{"+" + key + " 0\n", "+" + key + "\n", "+" + key + " 12x\n",
                                std::string("+garbage 100\n"), "+" + key.substr(0, key.size() - 1) + "Z 100\n"}) {
    CAPTURE(message);
    auto const resyncs = cache_a.stats().known_keys_resyncs;
    raw(fleet.io, fleet.b, {"PUBLISH", channel, message});
    REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys_resyncs == resyncs + 1; }));
    CHECK(cache_a.stats().known_keys_complete);
    CHECK(cache_a.stats().known_keys == 1);
  }
  // A well-formed message names a key the replica takes: it is then read (and found absent).
  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  raw(fleet.io, fleet.b, {"PUBLISH", channel, "+" + key + " 60000\n"});
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys == 2; }));
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-2"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
  CHECK(cache_a.stats().known_keys == 1); // read as nil: dropped
}

TEST_CASE("known keys: past its capacity the replica empties and every near miss asks Redis, until a later read "
          "whole fits") {
  wandura::ticket_cache_options small;
  small.known_keys_capacity = 4;
  small.reuse_margin = 1s; // the entries expire 1 s before the tickets do
  auto started = two_caches::start_or_skip(small, small);
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(keys_known(fleet.io, cache_a));
  // Six more that live 2 s in Redis: a hears them, and overflows at the fifth key.
  std::vector<std::pair<wandura::ticket_identity, wandura::cached_ticket>> brief;
  for (int i = 2; i <= 7; ++i) {
    brief.emplace_back(viewer_on("device-" + std::to_string(i)), wandura::cached_ticket{"t", now + 3s});
  }
  test_support::run(fleet.io, cache_b.put_many(brief, now));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.stats().known_keys_overflows >= 1; }));
  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-9"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1); // asked: the replica cannot say
  // Once those keys expired in Redis, a read whole fits again (after the backoff of 1 s, then 2 s, ...).
  REQUIRE(wait_until(
      fleet.io, [&] { return cache_a.stats().known_keys_complete; }, 15s));
  CHECK(cache_a.stats().known_keys == 1);
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-9"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
}

TEST_CASE("known keys: where Redis refuses the read whole the replica stays incomplete, the near cache works, and "
          "the cache's end ends the retries") {
  // As behind a proxy without SCAN.
  auto started = two_caches::start_or_skip({}, {}, {"--rename-command", "SCAN", "\"\""});
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = system_clock::now();
  test_support::run(fleet.io, cache_a.put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(wait_until(fleet.io, [&] { return cache_a.near_cache_live(); }));
  test_support::wait(fleet.io, 300ms);
  CHECK_FALSE(cache_a.stats().known_keys_complete);
  CHECK(cache_a.stats().known_keys_resyncs == 0);
  test_support::run(fleet.io, cache_a.put(viewer_on("device-2"), {"tkt_2", now + 30min}, now));
  CHECK(cache_a.find_near(viewer_on("device-2"), now)); // the near cache does not need the replica
  auto const mgets = calls_of(fleet.io, fleet.b, "mget");
  CHECK_FALSE(test_support::run(fleet.io, cache_a.get(viewer_on("device-9"), now)));
  CHECK(calls_of(fleet.io, fleet.b, "mget") == mgets + 1);
  CHECK(cache_a.stats().fallbacks == 0); // the read failing is no operation's fallback
}

TEST_CASE("known keys: a cache destroyed while its read whole waits out a backoff does not keep the io_context "
          "running") {
  auto redis = test_support::start_redis_or_skip({"--rename-command", "SCAN", "\"\""}); // every read fails
  if (!redis) {
    return;
  }
  asio::io_context io;
  auto client = std::make_unique<wandura::redis_client>(
      io.get_executor(), wandura::redis_options{.url = redis->url(), .command_timeout = 500ms});
  auto cache = std::make_unique<wandura::shared_ticket_cache>(*client, "org_demo");
  auto const now = system_clock::now();
  test_support::run(io, cache->put(viewer_on("device-1"), {"tkt_1", now + 30min}, now));
  REQUIRE(wait_until(io, [&] { return cache->near_cache_live(); }));
  test_support::wait(io, 200ms); // the first read failed: the next one waits 1 s
  CHECK_FALSE(cache->stats().known_keys_complete);
  cache.reset();
  client.reset();
  auto const started = std::chrono::steady_clock::now();
  CHECK(test_support::run_returns_within(io, 3000ms));
  CHECK(test_support::elapsed_ms(started) < 500); // not the backoff's second
}

TEST_CASE("known keys: a read whole that fails on a late page resumes from that page and not from the first") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::redis_client client(io.get_executor(),
                               wandura::redis_options{.url = redis->url(), .command_timeout = 300ms});
  asio::io_context side_io; // the test's own connection, run inside the cache's hook
  wandura::redis_client side(side_io.get_executor(),
                             wandura::redis_options{.url = redis->url(), .command_timeout = 3000ms});
  // 2,000 tickets of the organisation written behind the cache's back: the read whole takes several pages.
  for (int i = 0; i < 2000; ++i) {
    raw(side_io, side,
        {"SET", wandura::fleet_keys::ticket("org_demo", viewer_on("device-" + std::to_string(i))), "x", "PX",
         "600000"});
  }
  wandura::shared_ticket_cache cache(client, "org_demo");
  int pages = 0;
  int pause_after = 0; // the page after which Redis stops answering for 800 ms (0: none)
  wandura::detail::ticket_cache_access::after_own_commands(cache, [&] {
    if (++pages == pause_after) {
      raw(side_io, side, {"CLIENT", "PAUSE", "800", "ALL"}); // the next page waits past its 300 ms
    }
  });
  auto const now = system_clock::now();
  test_support::run(io, cache.put(viewer_on("device-a"), {"tkt_a", now + 30min}, now)); // subscribes
  REQUIRE(keys_known(io, cache));
  int const whole = pages; // the pages of one read whole, none failing
  REQUIRE(whole >= 5);
  CHECK(cache.stats().known_keys == 2001);

  // A message it cannot read makes it read whole again; its third page is late.
  pages = 0;
  pause_after = 2;
  auto const resyncs = cache.stats().known_keys_resyncs;
  raw(side_io, side, {"PUBLISH", wandura::fleet_keys::ticket_erasures("org_demo"), "+garbage 100\n"});
  SECTION("the same subscription: resumed at the late page") {
    REQUIRE(wait_until(io, [&] { return cache.stats().known_keys_resyncs == resyncs + 1; }));
    CHECK(cache.stats().known_keys_complete);
    CHECK(cache.stats().known_keys == 2001);
    // Two pages, the late one, then the rest from the late one: one page more than a read whole (from the first
    // page again it would be two pages and the late one more).
    CHECK(pages == whole + 1);
  }
  SECTION("a new subscription meanwhile: read from the first page") {
    REQUIRE(wait_until(io, [&] { return pages == 3; }));      // the late page failed; the next pass waits 1 s
    raw(side_io, side, {"CLIENT", "KILL", "TYPE", "pubsub"}); // once the pause ends: the subscription is lost
    REQUIRE(wait_until(io, [&] { return cache.stats().known_keys_resyncs == resyncs + 1; }));
    CHECK(cache.stats().known_keys_complete);
    CHECK(cache.stats().known_keys == 2001);
    CHECK(pages == 3 + whole);
  }
}
