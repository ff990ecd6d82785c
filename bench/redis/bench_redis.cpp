// redis_ticket_lookup_vs_raw_get: a shared ticket cache lookup that goes to Redis (wandura::shared_ticket_cache::get
// with the near cache off, over the Asio adapter: key hashing, one MGET, the stored identity checked, the ticket
// copied out) against the plainest baseline, a synchronous hiredis `GET` loop on the same keys and values, both
// against one private redis-server on loopback. One request in flight on each side: the cost of one lookup. The
// sides alternate (which goes first alternates too), many short runs each; the ratio is of the medians. Target:
// ratio <= 1.5. It also prints what a lookup costs when the near cache (on by default) answers it.
//
// ticket_store_near_hit_vs_memory: what the client pays for a ticket the fleet's near cache answers, against the
// default in-memory store: `ticket_store::find` of a batch of three keys (play, two prefetches), every one found,
// through the store `wandura::fleet::configure` sets (answered on the caller's thread by the near cache, no Redis
// command) and through a `memory_ticket_store`, one find in flight, the sides alternating. Target: ratio <= 1.25.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <hiredis/hiredis.h>

#include "bench_tickets.hpp"
#include "redis_server.hpp"
#include "wandura/fleet/fleet.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/ticket_store.hpp"

namespace {

using wandura::bench::identity;
using wandura::bench::ticket_json;

using clock_type = std::chrono::steady_clock;

constexpr int viewer_count = 256;

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

// Runs `op` on `io` until it completes (the fleet's connections keep reads waiting, so run() would not return).
void run_until_done(asio::io_context& io, asio::awaitable<void> op) {
  asio::co_spawn(io, std::move(op), [&io](std::exception_ptr const& e) {
    io.stop();
    if (e) {
      std::rethrow_exception(e);
    }
  });
  io.restart();
  io.run();
}

// A batch of keys as the client asks for it: play episode 4 and prefetch 5 and 6, for viewer `i` on its device.
std::vector<wandura::ticket_key> batch_keys(int i) {
  auto const who = identity(i);
  std::vector<wandura::ticket_key> keys;
  for (int e = 4; e <= 6; ++e) {
    keys.push_back(
        {who.viewer_ref, who.union_info, who.film_ref, e, e == 4 ? wandura::intent::play : wandura::intent::prefetch});
  }
  return keys;
}

// A ticket as the client keeps it, about 300 bytes of fields.
wandura::ticket full_ticket(int i, int episode, std::chrono::system_clock::time_point expires_at) {
  wandura::ticket t;
  t.ticket_id = "tkt_" + std::to_string(i) + "_" + std::to_string(episode);
  t.manifest_url = "https://cdn.wandura.example/m/the-heiress-returns/" + std::to_string(episode) + "/manifest.mpd";
  t.license_url = "https://drm.wandura.example/license";
  t.expires_at = std::chrono::time_point_cast<std::chrono::seconds>(expires_at);
  t.expires_at_text = "2026-11-30T11:00:00Z";
  t.drm_payload = "eyJhbGciOiJSUzI1NiJ9.eyJkZXYiOiJkZXZfMGExYjJjM2Q0ZTVmIn0.c2lnbmF0dXJlc2lnbmF0dXJl";
  return t;
}

// Microseconds per `find` of one batch; throws unless every key of every batch is found.
double run_store(asio::io_context& io, wandura::ticket_store& store, int finds) {
  auto const start = clock_type::now();
  std::size_t found = 0;
  run_until_done(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < finds; ++i) {
      auto keys = batch_keys(i % viewer_count); // named: no class temporaries inside co_await (GCC 12)
      auto const tickets = co_await store.find(std::move(keys));
      found += static_cast<std::size_t>(
          std::count_if(tickets.begin(), tickets.end(), [](auto const& t) { return t.has_value(); }));
    }
  }());
  auto const us = std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
  if (found != 3 * static_cast<std::size_t>(finds)) {
    throw std::runtime_error("store finds missed: " + std::to_string(3 * finds - static_cast<int>(found)));
  }
  return us / finds;
}

// ticket_store_near_hit_vs_memory (see the top of the file). Returns the exit status.
int store_near_vs_memory(std::string const& redis_url, int runs, int finds) {
  asio::io_context io;
  wandura::fleet_options fo;
  fo.redis.url = redis_url;
  fo.redis.command_timeout = std::chrono::seconds(1);
  fo.org = "org_store";
  wandura::fleet shared(io.get_executor(), fo);
  wandura::client_options co;
  shared.configure(co);
  wandura::ticket_store& fleet_store = *co.tickets;
  wandura::memory_ticket_store memory;
  auto const expires_at = std::chrono::system_clock::now() + std::chrono::minutes(30);
  run_until_done(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < viewer_count; ++i) {
      std::vector<std::pair<wandura::ticket_key, wandura::ticket>> tickets;
      for (auto& key : batch_keys(i)) {
        tickets.emplace_back(key, full_ticket(i, key.episode_no, expires_at));
      }
      auto copy = tickets;
      co_await fleet_store.insert_many(std::move(tickets));
      co_await memory.insert_many(std::move(copy));
    }
  }());
  for (int i = 0; i < 500 && !shared.stats().tickets.near_cache_live; ++i) { // 5 s at most
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  run_store(io, fleet_store, viewer_count); // stored before the subscription was confirmed: read once more
  auto const near_before = shared.stats().tickets.near_hits;
  run_store(io, memory, finds / 10); // warm both sides up
  run_store(io, fleet_store, finds / 10);
  std::vector<double> fleet_us;
  std::vector<double> memory_us;
  for (int r = 0; r < runs; ++r) {
    if (r % 2 == 0) {
      fleet_us.push_back(run_store(io, fleet_store, finds));
      memory_us.push_back(run_store(io, memory, finds));
    } else {
      memory_us.push_back(run_store(io, memory, finds));
      fleet_us.push_back(run_store(io, fleet_store, finds));
    }
  }
  auto const stats = shared.stats();
  std::printf("ticket_store_near_hit_vs_memory: ratio=%.2f (fleet store answered by the near cache %.2f us, "
              "memory_ticket_store %.2f us per find of 3 keys, medians of %d runs of %d; target <= 1.25)\n",
              median(fleet_us) / median(memory_us), median(fleet_us), median(memory_us), runs, finds);
  // Every key of every find after the first pass, warm-up included, answered near: none asked of Redis.
  auto const expected = 3 * static_cast<std::uint64_t>(finds / 10 + runs * finds);
  if (stats.tickets.near_hits - near_before != expected) {
    std::fprintf(stderr, "bench_redis: the fleet store's finds were not all answered by the near cache\n");
    return 1;
  }
  return 0;
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
  return store_near_vs_memory(server.url(), runs, lookups);
}
