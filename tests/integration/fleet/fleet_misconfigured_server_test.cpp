// wandura::fleet against redis-servers an operator configured wrongly: what the one WARN line of each part says.
#include "wandura/fleet/fleet.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>

#include "fleet_test_support.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;

namespace {

constexpr char const* viewer = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";

wandura::ticket_key key_on(std::string device) {
  return {viewer, std::move(device), "the-heiress-returns", 4, wandura::intent::play};
}

wandura::ticket ticket_for(std::string const& device, system_clock::time_point expires_at) {
  return {"tkt_" + device, "https://cdn.example/m.mpd", "https://drm.example/l", expires_at, "", "drm"};
}

/// A server set up one way, the URL a fleet is given for it, and a word the server's refusal begins with.
struct misconfiguration {
  char const* name;
  std::vector<std::string> server_args;
  std::function<std::string(test_support::redis_server const&)> url;
  std::string_view refusal;
};

std::string at(test_support::redis_server const& redis) {
  return "@127.0.0.1:" + std::to_string(redis.port());
}

} // namespace

TEST_CASE("fleet against a misconfigured redis-server: each part's one WARN line quotes what Redis refused with, "
          "never the password nor a viewer, and playback goes on locally") {
  std::vector<misconfiguration> const cases{
      {"requirepass set, no password in the URL",
       {"--requirepass", "s3cret-pw"},
       [](auto const& redis) { return redis.url(); },
       "NOAUTH"},
      // AUTH refused: the connection is dropped before any command runs, and the parts that ask within the
      // reconnect backoff after it are told the same refusal, not that Redis could not be reached.
      {"a wrong password in the URL",
       {"--requirepass", "s3cret-pw"},
       [](auto const& redis) { return "redis://:wrong-s3cret" + at(redis); },
       "WRONGPASS"},
      {"a database out of range in the URL",
       {},
       [](auto const& redis) { return redis.url() + "/99"; },
       "DB index is out of range"},
      // Redis 7 gives a new ACL user no Pub/Sub channel (acl-pubsub-default resetchannels): the store script's
      // PUBLISH is refused (the store has run its SETs by then).
      {"ACL user without channels",
       {"--user", "fleet-worker", "on", ">acl-s3cret", "~*", "resetchannels", "+@all", "--user", "default", "off"},
       [](auto const& redis) { return "redis://fleet-worker:acl-s3cret" + at(redis); },
       "can't publish to the channel"},
      {"maxmemory reached with noeviction",
       {"--maxmemory", "1", "--maxmemory-policy", "noeviction"},
       [](auto const& redis) { return redis.url(); },
       "OOM"},
      {"a read-only replica",
       {"--replicaof", "127.0.0.1", "1", "--replica-read-only", "yes"},
       [](auto const& redis) { return redis.url(); },
       "READONLY"},
      // Redis echoes the first arguments of an unknown command: the ticket's envelope (viewer_ref, device), the
      // viewer limit's key. Not for a log line.
      {"EVALSHA renamed away",
       {"--rename-command", "EVALSHA", "\"\""},
       [](auto const& redis) { return redis.url(); },
       "unknown command 'EVALSHA'"},
  };
  for (auto const& misconfigured : cases) {
    SECTION(misconfigured.name) {
      auto redis = test_support::start_redis_or_skip(misconfigured.server_args);
      if (!redis) {
        return;
      }
      asio::io_context io;
      std::vector<std::string> lines;
      wandura::fleet_options fleet_options;
      fleet_options.redis.url = misconfigured.url(*redis);
      fleet_options.redis.command_timeout = 500ms;
      fleet_options.org = "acme";
      fleet_options.fallback = {.log = [&](std::string_view line) { lines.emplace_back(line); },
                                .probe_interval = 20ms};
      wandura::fleet shared(io.get_executor(), fleet_options);
      wandura::client_options options;
      options.viewer_tickets_per_minute = 30;
      shared.configure(options);
      auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());

      for (int i = 0; i < 4; ++i) { // Redis asked again after each probe interval
        std::string const device = "device-" + std::to_string(i);
        test_support::run(io, options.tickets->insert(key_on(device), ticket_for(device, now + 30min)));
        auto const found = test_support::run(io, options.tickets->find({key_on(device)}));
        CHECK(found[0] == ticket_for(device, now + 30min)); // its own ticket, from Redis or locally
        CHECK(test_support::run(io, options.viewer_limit->acquire(viewer, 1)).allowed);
        test_support::wait(io, 30ms);
      }
      auto const stats = shared.stats();
      CHECK(stats.degraded);
      CHECK(stats.fallbacks > 0);
      auto const warnings = test_support::count_starting(lines, "WARN ");
      CHECK(warnings >= 1);
      CHECK(warnings <= 2); // one per part that failed (ticket cache, viewer limit), not one per call
      for (auto const& line : lines) {
        INFO(line);
        if (line.starts_with("WARN ")) {
          CHECK(line.find(misconfigured.refusal) != std::string::npos);
        }
        CHECK(line.find("s3cret") == std::string::npos);
        CHECK(line.find(std::string_view(viewer).substr(0, 8)) == std::string::npos);
        CHECK(line.find("wandura:{acme}") == std::string::npos);
      }
      shared.shutdown();
    }
  }
}

TEST_CASE("fleet with the least-privilege ACL user of the README, in database 2: nothing falls back, the near cache "
          "and the replica of keys come up, and a flushed script cache is reloaded") {
  // The README's ACL, for every organisation; an admin user to flush the script cache, the default user off.
  std::vector<std::string> const fleet_user{
      "--user",   "fleet-worker", "on",       ">acl-s3cret", "resetkeys",  "~wandura:*", "resetchannels", "&wandura:*",
      "-@all",    "+mget",        "+evalsha", "+eval",       "+subscribe", "+select",    "+set",          "+pttl",
      "+pexpire", "+del",         "+hmget",   "+hset",       "+hdel",      "+type",      "+publish",      "+scan"};
  std::vector<std::string> args = fleet_user;
  for (std::string const arg :
       {"--user", "admin", "on", ">admin-pw", "~*", "&*", "+@all", "--user", "default", "off"}) {
    args.push_back(arg);
  }
  auto redis = test_support::start_redis_or_skip(args);
  if (!redis) {
    return;
  }
  asio::io_context io;
  std::vector<std::string> lines;
  wandura::fallback_options const fallback{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                           .probe_interval = 20ms};
  wandura::fleet_options fleet_options;
  fleet_options.redis.url = "redis://fleet-worker:acl-s3cret" + at(*redis) + "/2";
  fleet_options.redis.command_timeout = 500ms;
  fleet_options.org = "acme";
  fleet_options.fallback = fallback;
  wandura::fleet shared(io.get_executor(), fleet_options);
  wandura::client_options options;
  options.viewer_tickets_per_minute = 30;
  shared.configure(options);
  wandura::redis_client pace_client(io.get_executor(), fleet_options.redis);
  wandura::shared_counter_pace pace(pace_client, "acme", {.fallback = fallback});
  wandura::redis_client admin(io.get_executor(),
                              {.url = "redis://admin:admin-pw" + at(*redis), .command_timeout = 500ms});
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());

  for (int i = 0; i < 4; ++i) {
    if (i == 2) {
      test_support::raw(io, admin, {"SCRIPT", "FLUSH"}); // NOSCRIPT: each script is sent again with EVAL
    }
    std::string const device = "device-" + std::to_string(i);
    test_support::run(io, options.tickets->insert(key_on(device), ticket_for(device, now + 30min)));
    test_support::run(io, shared.flush());
    CHECK(test_support::run(io, options.tickets->find({key_on(device)}))[0] == ticket_for(device, now + 30min));
    CHECK(test_support::run(io, options.viewer_limit->acquire(viewer, 1)).allowed);
    CHECK(test_support::run(io, pace.try_acquire(1)).go);
    test_support::run(io, pace.set_rate(600));
    test_support::run(io, pace.hold_until(system_clock::now()));
    (void)test_support::run(io, pace.read());
  }
  test_support::run(io, options.tickets->erase(key_on("device-0")));
  CHECK_FALSE(test_support::run(io, options.tickets->find({key_on("device-0")}))[0]);
  CHECK(test_support::wait_until(io, [&] {
    auto const tickets = shared.stats().tickets;
    return tickets.near_cache_live && tickets.known_keys_complete;
  }));
  CHECK(shared.stats().fallbacks == 0);
  CHECK(pace.stats().fallbacks == 0);
  CHECK(lines.empty());
  CHECK(test_support::raw(io, admin, {"SELECT", "2"}).text == "OK");
  CHECK(
      test_support::raw(io, admin, {"EXISTS", wandura::fleet_keys::ticket("acme", test_support::viewer_on("device-1"))})
          .integer == 1); // in the URL's database
  shared.shutdown();
}

TEST_CASE("fleet against a redis-server that refuses writes but answers reads (maxmemory reached, a read-only "
          "replica): this process still reuses the tickets it issued, after every probe of Redis") {
  auto const server_args = GENERATE(std::vector<std::string>{"--maxmemory", "1", "--maxmemory-policy", "noeviction"},
                                    std::vector<std::string>{"--replicaof", "127.0.0.1", "1"});
  auto redis = test_support::start_redis_or_skip(server_args);
  if (!redis) {
    return;
  }
  asio::io_context io;
  wandura::fleet_options fleet_options;
  fleet_options.redis.url = redis->url();
  fleet_options.redis.command_timeout = 500ms;
  fleet_options.org = "acme";
  fleet_options.fallback = {.log = [](std::string_view) {}, .probe_interval = 10ms};
  wandura::fleet shared(io.get_executor(), fleet_options);
  wandura::client_options options;
  shared.configure(options);
  auto const now = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
  for (int i = 0; i < 3; ++i) {
    std::string const device = "device-" + std::to_string(i);
    test_support::run(io, options.tickets->insert(key_on(device), ticket_for(device, now + 30min)));
    test_support::run(io, shared.flush()); // the store was refused
  }
  test_support::wait(io, 50ms); // past the probe interval: lookups ask Redis, which answers them
  for (int i = 0; i < 3; ++i) {
    std::string const device = "device-" + std::to_string(i);
    INFO(device);
    CHECK(test_support::run(io, options.tickets->find({key_on(device)}))[0] == ticket_for(device, now + 30min));
  }
  shared.shutdown();
}
