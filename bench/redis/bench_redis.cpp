// redis_ticket_lookup_vs_raw_get: a shared ticket cache lookup that goes to Redis (wandura::shared_ticket_cache::get
// with the near cache off, over the Asio adapter: key hashing, one MGET, the stored identity checked, the ticket
// copied out) against the plainest baseline, a synchronous hiredis `GET` loop on the same keys and values, both
// against one private redis-server on loopback. One request in flight on each side: the cost of one lookup. The
// sides alternate (which goes first alternates too), many short runs each; the ratio is of the medians. Target:
// ratio <= 1.5. It also prints what a lookup costs when the near cache (on by default) answers it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <hiredis/hiredis.h>

#include "redis_server.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

constexpr int viewer_count = 256;

wandura::ticket_identity identity(int i) {
  return {"k3Jd9sQm2vXa7LpT0bWc1e:viewer" + std::to_string(i), "dev_0a1b2c3d4e5f" + std::to_string(i),
          "the-heiress-returns", 4, "play"};
}

// A ticket as the API returns it (SPEC §1), about 300 bytes.
std::string ticket_json(int i) {
  return R"({"ticket_id":"tkt_)" + std::to_string(i) +
         R"(","manifest_url":"https://cdn.wandura.example/m/the-heiress-returns/4/manifest.mpd",)"
         R"("license_url":"https://drm.wandura.example/license","expires_at":"2026-11-30T11:00:00Z",)"
         R"("drm_payload":"eyJhbGciOiJSUzI1NiJ9.eyJkZXYiOiJkZXZfMGExYjJjM2Q0ZTVmIn0.c2lnbmF0dXJlc2lnbmF0dXJl"})";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per lookup through the shared ticket cache; throws if one misses.
double run_cache(asio::io_context& io, wandura::shared_ticket_cache& cache, int lookups) {
  auto const start = clock_type::now();
  int hits = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < lookups; ++i) {
          auto who = identity(i % viewer_count); // named: no class temporaries inside co_await (GCC 12)
          auto const found = co_await cache.get(std::move(who));
          hits += found ? 1 : 0;
        }
        io.stop(); // the connection's read wait keeps run() going otherwise
      },
      asio::detached);
  io.restart();
  io.run();
  auto const us = std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
  if (hits != lookups) {
    throw std::runtime_error("cache lookups missed: " + std::to_string(lookups - hits));
  }
  return us / lookups;
}

// Microseconds per synchronous GET of the same keys; throws if one misses.
double run_raw(redisContext* c, std::vector<std::string> const& keys, int lookups) {
  auto const start = clock_type::now();
  for (int i = 0; i < lookups; ++i) {
    auto const& key = keys[static_cast<std::size_t>(i % viewer_count)];
    auto* reply = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
    bool const hit = reply != nullptr && reply->type == REDIS_REPLY_STRING;
    freeReplyObject(reply);
    if (!hit) {
      throw std::runtime_error("raw GET missed");
    }
  }
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / lookups;
}

} // namespace

int main(int argc, char** argv) {
  bool const quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int const runs = quick ? 7 : 21;
  int const lookups = quick ? 1000 : 3000;
  auto binary = test_support::redis_server::find_binary();
  if (!binary) {
    std::fprintf(stderr, "bench_redis: redis-server not found (scripts/install-deps.sh installs it)\n");
    return 1;
  }
  test_support::redis_server server(*binary);
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = server.url(), .command_timeout = std::chrono::seconds(1)});
  wandura::shared_ticket_cache cache(client, "org_demo", {.near_cache = false}); // every lookup asks Redis
  wandura::shared_ticket_cache near(client, "org_demo");
  std::vector<std::string> keys;
  auto const expires_at = std::chrono::system_clock::now() + std::chrono::minutes(30);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < viewer_count; ++i) {
          auto who = identity(i);
          wandura::cached_ticket ticket{ticket_json(i), expires_at};
          co_await cache.put(std::move(who), std::move(ticket));
        }
        io.stop();
      },
      asio::detached);
  io.run();
  io.restart();
  for (int i = 0; i < viewer_count; ++i) {
    keys.push_back(wandura::fleet_keys::ticket("org_demo", identity(i)));
  }
  redisContext* raw = redisConnect("127.0.0.1", server.port());
  if (raw == nullptr || raw->err != 0) {
    std::fprintf(stderr, "bench_redis: raw hiredis connect failed\n");
    return 1;
  }
  run_cache(io, cache, lookups / 10); // warm both sides up
  run_raw(raw, keys, lookups / 10);
  std::vector<double> ours;
  std::vector<double> theirs;
  for (int r = 0; r < runs; ++r) {
    if (r % 2 == 0) {
      ours.push_back(run_cache(io, cache, lookups));
      theirs.push_back(run_raw(raw, keys, lookups));
    } else {
      theirs.push_back(run_raw(raw, keys, lookups));
      ours.push_back(run_cache(io, cache, lookups));
    }
  }
  redisFree(raw);
  run_cache(io, near, viewer_count); // read from Redis once: kept as near copies, the subscription live by now
  run_cache(io, near, viewer_count); // those read before the subscription was confirmed, again
  std::vector<double> near_us;
  for (int r = 0; r < runs; ++r) {
    near_us.push_back(run_cache(io, near, lookups));
  }
  double const cache_us = median(ours);
  double const raw_us = median(theirs);
  std::printf("redis_ticket_lookup_vs_raw_get: ratio=%.2f (shared_ticket_cache::get %.1f us, raw hiredis GET %.1f us "
              "per lookup, medians of %d runs of %d; target <= 1.5; answered by the near cache: %.2f us, %llu of "
              "%llu lookups)\n",
              cache_us / raw_us, cache_us, raw_us, runs, lookups, median(near_us),
              static_cast<unsigned long long>(near.stats().near_hits),
              static_cast<unsigned long long>(near.stats().hits + near.stats().misses));
  if (cache.stats().near_hits != 0) {
    std::fprintf(stderr, "bench_redis: the Redis side was answered by a near cache\n");
    return 1;
  }
  if (cache.stats().fallbacks != 0) {
    std::fprintf(stderr, "bench_redis: %llu lookups fell back to local state\n",
                 static_cast<unsigned long long>(cache.stats().fallbacks));
    return 1;
  }
  return 0;
}
