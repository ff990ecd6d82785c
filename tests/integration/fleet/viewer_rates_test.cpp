// Per-viewer limits of different rates in one organisation, over a real redis-server: clients of one fleet may set
// different `viewer_tickets_per_minute` (one shared limit per rate), and each rate is its own bucket, in Redis and
// in the local fallback; the same rate in two processes is one bucket.
#include "wandura/fleet/fleet.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <asio/io_context.hpp>

#include "fleet_test_support.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/fleet/shared_viewer_limit.hpp"
#include "wandura/playback/client.hpp"

using namespace std::chrono_literals;
using test_support::at_ms;
using test_support::two_processes;

namespace {

/// One process with one fleet and two clients of it that differ only in their per-viewer rate: a backend serving
/// TVs at 3 tickets a minute per viewer and the web at 30. Everything runs on the test's thread (`test_support::run`).
struct two_rates {
  two_rates(std::string const& redis_url, std::string const& base_url)
      : shared(io.get_executor(), make_fleet_options(redis_url)), tv(make_client(base_url, 3)),
        web(make_client(base_url, 30)) {}

  /// `n` plays of one episode each for `viewer_ref`, on distinct devices (no ticket is reused): how many were
  /// granted.
  int plays(wandura::client& api, std::string const& viewer_ref, int n) {
    int granted = 0;
    for (int episode = 1; episode <= n; ++episode) {
      wandura::ticket_batch batch;
      batch.viewer_ref = viewer_ref;
      batch.union_info = "device-" + std::to_string(++devices_);
      batch.drm_kek = "kek";
      batch.episodes.push_back({"the-heiress-returns", episode, wandura::intent::play});
      auto call = api.issue_tickets(std::move(batch)); // named: GCC 12 and co_await temporaries
      auto const result = test_support::run(io, std::move(call));
      REQUIRE(result.items.size() == 1);
      granted += result.items.front().outcome == wandura::item_outcome::granted ? 1 : 0;
    }
    return granted;
  }

  asio::io_context io;
  wandura::fleet shared;
  std::unique_ptr<wandura::client> tv;
  std::unique_ptr<wandura::client> web;

private:
  static wandura::fleet_options make_fleet_options(std::string const& redis_url) {
    wandura::fleet_options fo;
    fo.redis.url = redis_url;
    fo.redis.command_timeout = 500ms;
    fo.org = "rates";
    fo.fallback.log = [](std::string_view) {}; // the WARN of the Redis-down case is not what is tested
    return fo;
  }
  std::unique_ptr<wandura::client> make_client(std::string const& base_url, std::uint32_t per_minute) {
    wandura::client_options options;
    options.base_url = base_url;
    options.api_key = "test-key";
    options.viewer_tickets_per_minute = per_minute;
    shared.configure(options);
    return std::make_unique<wandura::client>(io.get_executor(), std::move(options));
  }
  int devices_ = 0;
};

std::unique_ptr<wandura::emulator::server> start_emulator() {
  wandura::emulator::config cfg;
  cfg.seed = 7;
  return wandura::emulator::server::start(std::move(cfg));
}

} // namespace

TEST_CASE("viewer rates: a 3 a minute and a 30 a minute client of one fleet each hold their own limit for a viewer") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  two_rates backend(redis->url(), emu->base_url());
  // The 3/min client spends its whole allowance for viewer A: the 30/min client still has all of its own.
  CHECK(backend.plays(*backend.tv, "viewer-A", 4) == 3);
  CHECK(backend.plays(*backend.web, "viewer-A", 5) == 5);
  // And the other way round: the 30/min client's plays for viewer B take nothing from the 3/min client's.
  CHECK(backend.plays(*backend.web, "viewer-B", 10) == 10);
  CHECK(backend.plays(*backend.tv, "viewer-B", 4) == 3);
  auto const viewers = backend.shared.stats().viewers;
  CHECK(viewers.fallbacks == 0); // decided by Redis, not by the local buckets
  CHECK(viewers.granted == 21);
  CHECK(viewers.refused == 2);
  // What Redis holds: one bucket per viewer and rate, named by the key layout.
  wandura::redis_client look(backend.io.get_executor(), {.url = redis->url()});
  auto keys = test_support::raw(backend.io, look, {"KEYS", "wandura:{rates}:viewer:*"});
  std::set<std::string> held;
  for (auto const& key : keys.elements) {
    held.insert(key.text);
  }
  CHECK(held == std::set<std::string>{wandura::fleet_keys::viewer("rates", {3, 3}, "viewer-A"),
                                      wandura::fleet_keys::viewer("rates", {30, 30}, "viewer-A"),
                                      wandura::fleet_keys::viewer("rates", {3, 3}, "viewer-B"),
                                      wandura::fleet_keys::viewer("rates", {30, 30}, "viewer-B")});
}

TEST_CASE("viewer rates: with Redis down, the local fallback keeps each rate's own limit") {
  auto emu = start_emulator();
  std::string const nowhere = "redis://127.0.0.1:" + std::to_string(test_support::free_loopback_port());
  two_rates backend(nowhere, emu->base_url());
  CHECK(backend.plays(*backend.tv, "viewer-A", 4) == 3);
  CHECK(backend.plays(*backend.web, "viewer-A", 5) == 5);
  CHECK(backend.plays(*backend.web, "viewer-B", 10) == 10);
  CHECK(backend.plays(*backend.tv, "viewer-B", 4) == 3);
  auto const viewers = backend.shared.stats().viewers;
  CHECK(viewers.fallbacks >= 23); // every decision, locally
  CHECK(viewers.degraded);
}

TEST_CASE("viewer rates: the same rate and burst in two processes is one bucket, another burst is its own") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  wandura::shared_viewer_limit limit_a(fleet.a, "org_demo", {.tickets_per_minute = 10});
  // Burst 10 said explicitly is the default burst of 10 a minute: the same limit, the same bucket.
  wandura::shared_viewer_limit limit_b(fleet.b, "org_demo", {.tickets_per_minute = 10, .burst = 10});
  wandura::shared_viewer_limit bursty(fleet.b, "org_demo", {.tickets_per_minute = 10, .burst = 20});
  auto const t0 = at_ms(1'764'590'400'000);
  CHECK(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 6, t0)).granted);
  CHECK(test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 4, t0)).granted);
  auto const shared_refusal = test_support::run(fleet.io, limit_b.try_acquire("viewer:1", 1, t0));
  CHECK_FALSE(shared_refusal.granted);
  CHECK(shared_refusal.retry_after == 6000ms); // one ticket at one per 6 s
  CHECK_FALSE(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 1, t0)).granted);
  // A limit of the same rate and another burst has a full bucket of its own for the same viewer.
  CHECK(test_support::run(fleet.io, bursty.try_acquire("viewer:1", 20, t0)).granted);
  CHECK_FALSE(test_support::run(fleet.io, bursty.try_acquire("viewer:1", 1, t0)).granted);
  // Giving back to one does not fill the other.
  test_support::run(fleet.io, bursty.release("viewer:1", 5, wandura::viewer_limit::account::primary, t0));
  CHECK_FALSE(test_support::run(fleet.io, limit_a.try_acquire("viewer:1", 1, t0)).granted);
  CHECK(test_support::run(fleet.io, bursty.try_acquire("viewer:1", 5, t0)).granted);
  CHECK(limit_a.stats().fallbacks + limit_b.stats().fallbacks + bursty.stats().fallbacks == 0);
}
