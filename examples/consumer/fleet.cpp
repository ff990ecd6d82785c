// Links against the installed package's `fleet` component (wandura::fleet, with hiredis) and runs it without a
// Redis server: a command to a closed port fails with a typed connect error, and the shared ticket cache on that
// client degrades to its local cache instead of failing.
#include <wandura/error.hpp>
#include <wandura/fleet/redis_client.hpp>
#include <wandura/fleet/shared_ticket_cache.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <cstdio>
#include <optional>

int main() {
  asio::io_context io;
  // Nothing listens on 127.0.0.1:1: the connect is refused at once.
  wandura::redis_client redis(io.get_executor(), {.url = "redis://127.0.0.1:1"});
  wandura::shared_ticket_cache cache(redis, "consumer");

  auto ping = asio::co_spawn(io, redis.command({"PING"}), asio::use_future);
  io.run();
  try {
    ping.get();
    std::puts("unexpected PONG from a closed port");
    return 1;
  } catch (wandura::error const& e) {
    if (e.code() != wandura::errc::connect_failed) {
      std::printf("unexpected error: %s\n", e.what());
      return 1;
    }
    std::printf("wandura consumer (fleet): %s\n", e.what());
  }

  io.restart();
  wandura::ticket_identity who{"viewer-1", "device-1", "the-heiress-returns", 1, "play"};
  auto lookup = asio::co_spawn(io, cache.get(who), asio::use_future);
  io.run();
  auto const found = lookup.get();
  auto const stats = cache.stats();
  if (found || stats.misses != 1 || stats.fallbacks != 1) {
    std::printf("unexpected cache lookup: found %d, misses %llu, fallbacks %llu\n", found.has_value(),
                static_cast<unsigned long long>(stats.misses), static_cast<unsigned long long>(stats.fallbacks));
    return 1;
  }
  std::puts("wandura consumer (fleet): shared ticket cache answered locally while Redis is down");
  return 0;
}
