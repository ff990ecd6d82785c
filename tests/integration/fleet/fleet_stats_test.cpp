// wandura::fleet::stats read on another thread while the fleet's io_context runs: what changes between the fleet's
// operations (the ticket cache's near hits, erase notices and subscription) is read as of now.
#include "wandura/fleet/fleet.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>

#include "fleet_test_support.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using test_support::wait_until;

namespace {

constexpr char const* viewer = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";

wandura::ticket_key key_on(std::string device) {
  return {viewer, std::move(device), "the-heiress-returns", 4, wandura::intent::play};
}

/// The same ticket's identity as the shared cache names it (what another process erases by).
wandura::ticket_identity identity_on(std::string device) {
  return {viewer, std::move(device), "the-heiress-returns", 4, "play"};
}

wandura::ticket ticket_for(std::string const& device, system_clock::time_point expires_at) {
  return {"tkt_" + device, "https://cdn.example/m.mpd", "https://drm.example/l", expires_at, "", "drm"};
}

} // namespace

TEST_CASE("fleet stats: the ticket cache's erase notices and subscription are read as of now, on another thread, "
          "through another process's erase, a kill and a restart of redis-server") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::fallback_options const quiet{.log = [](std::string_view) {}, .probe_interval = 50ms};
  wandura::fleet_options fleet_options;
  fleet_options.redis.url = redis->url();
  fleet_options.redis.command_timeout = 500ms;
  fleet_options.org = "acme";
  fleet_options.process_id = "here";
  fleet_options.fallback = quiet;
  wandura::fleet shared(io.get_executor(), fleet_options);
  wandura::client_options options;
  shared.configure(options);
  auto const store = options.tickets;
  REQUIRE(store);
  // Another process of the fleet: the public cache of the same organisation, on its own connection.
  wandura::redis_client other_client(io.get_executor(), {.url = redis->url(), .command_timeout = 500ms});
  wandura::shared_ticket_cache other(other_client, "acme", {.fallback = quiet});
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());

  auto const before = shared.stats();
  CHECK(before.tickets.erasures_heard == 0);
  CHECK_FALSE(before.tickets.near_cache_live);
  CHECK(before.tickets.near_hits == 0);

  // What `stats()` on another thread says, every 100 us while this thread runs the io_context.
  std::atomic<bool> stop{false};
  std::atomic<long> samples{0};
  std::atomic<std::uint64_t> seen_heard{0};
  std::atomic<std::uint64_t> seen_near_hits{0};
  std::atomic<bool> seen_live{false};
  std::thread reader([&] {
    for (long i = 0; i < 300'000 && !stop.load(); ++i) { // 30 s at most
      auto const s = shared.stats();
      seen_heard = s.tickets.erasures_heard;
      seen_near_hits = s.tickets.near_hits;
      seen_live = s.tickets.near_cache_live;
      ++samples;
      std::this_thread::sleep_for(100us);
    }
  });
  auto const seen = [&](std::uint64_t heard, bool live) {
    auto const from = samples.load();
    return wait_until(io, [&] { return samples.load() > from + 1 && seen_heard == heard && seen_live == live; });
  };

  // The first ticket kept opens the subscription: live as soon as it is confirmed, with no operation after it.
  test_support::run(io, store->insert(key_on("device-7"), ticket_for("device-7", now + 30min)));
  CHECK(seen(0, true));
  // Stored while live: the next lookup is a near hit, answered on this thread without an operation on the strand.
  test_support::run(io, store->insert(key_on("device-8"), ticket_for("device-8", now + 30min)));
  auto const near_hits = shared.stats().tickets.near_hits;
  auto const found = test_support::run(io, store->find({key_on("device-8")}));
  REQUIRE(found.size() == 1);
  CHECK(found[0] == ticket_for("device-8", now + 30min));
  CHECK(wait_until(io, [&] { return seen_near_hits == near_hits + 1; }));

  // Another process erases: heard here between operations, and read as of now.
  test_support::run(io, other.erase(identity_on("device-7")));
  CHECK(seen(1, true));
  auto const after_erase = test_support::run(io, store->find({key_on("device-7")}));
  CHECK_FALSE(after_erase[0]);

  redis->kill(); // the subscription drops by itself: no operation of the fleet tells of it
  CHECK(seen(1, false));
  redis->start();
  CHECK(seen(1, true));

  stop = true;
  reader.join();
  auto const after = shared.stats();
  CHECK(after.tickets.erasures_heard == 1);
  CHECK(after.tickets.near_cache_live);
  CHECK(after.tickets.near_hits == near_hits + 1);
  CHECK(after.cross_process_reuse == 0); // every ticket found was this process's own
}

TEST_CASE("fleet: made on an executor other than an io_context's own (a strand of any_io_executor, a thread pool's), "
          "it stores and finds tickets") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  wandura::fallback_options const quiet{.log = [](std::string_view) {}, .probe_interval = 50ms};
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  auto const check_on = [&](asio::io_context& io, asio::any_io_executor const& executor, std::string const& device) {
    wandura::fleet_options fleet_options;
    fleet_options.redis.url = redis->url();
    fleet_options.redis.command_timeout = 500ms;
    fleet_options.org = "acme";
    fleet_options.fallback = quiet;
    wandura::fleet shared(executor, fleet_options);
    wandura::client_options options;
    shared.configure(options);
    REQUIRE(options.tickets);
    test_support::run(io, options.tickets->insert(key_on(device), ticket_for(device, now + 30min)));
    auto const found = test_support::run(io, options.tickets->find({key_on(device)}));
    REQUIRE(found.size() == 1);
    CHECK(found[0] == ticket_for(device, now + 30min));
    CHECK(shared.stats().redis.commands > 0); // through Redis: the lookup above was not only near
  };
  SECTION("a strand of an any_io_executor") {
    asio::io_context io;
    check_on(io, asio::make_strand(asio::any_io_executor(io.get_executor())), "device-strand");
  }
  SECTION("a thread pool's executor") {
    asio::io_context io; // runs the test's awaits; the fleet's own work runs on the pool
    asio::thread_pool pool(1);
    check_on(io, pool.get_executor(), "device-pool");
    pool.join();
  }
}
