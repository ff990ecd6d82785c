// Keys of the fleet's shared state that hold what the SDK never writes (another type, NaN, ±inf, garbage, a number
// out of its range), over a real redis-server: the script that meets one repairs it, and no other viewer, counter or
// ticket notices; an error reply about one call's key is that call's fallback, not an outage.
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleet_test_support.hpp"

#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/fleet/shared_viewer_limit.hpp"

#include "fleet/fallback_guard.hpp"
#include "fleet/redis_script.hpp"

using namespace std::chrono_literals;
using test_support::at_ms;
using test_support::raw;
using test_support::two_processes;

namespace {

/// What a test writes into a key before the SDK meets it: a command that replaces the key's value.
struct poison {
  std::string name;
  std::vector<std::string> command; ///< without the key, which goes after the command's name
};

/// `poison.command` for `key`, after a `DEL` of it.
void write_poison(two_processes& fleet, poison const& p, std::string const& key) {
  raw(fleet.io, fleet.a, {"DEL", key});
  std::vector<std::string> command{p.command.front(), key};
  command.insert(command.end(), p.command.begin() + 1, p.command.end());
  raw(fleet.io, fleet.a, std::move(command));
}

/// Collects the lines a part logs.
struct log_lines {
  std::vector<std::string> lines;
  [[nodiscard]] wandura::fallback_options options() {
    return {.log = [this](std::string_view line) { lines.emplace_back(line); }};
  }
  [[nodiscard]] std::size_t warnings() const { return test_support::count_starting(lines, "WARN"); }
};

/// Both processes used Redis for every call: no call answered from local state, no WARN line.
template <class Shared>
void check_redis_answered_all(Shared const& a, Shared const& b, log_lines const& log_a, log_lines const& log_b) {
  CHECK(a.stats().fallbacks == 0);
  CHECK(b.stats().fallbacks == 0);
  CHECK(log_a.warnings() == 0);
  CHECK(log_b.warnings() == 0);
}

} // namespace

TEST_CASE("poisoned keys: one viewer's bucket holding what the SDK never writes leaves another viewer's limit "
          "fleet-wide, and is repaired with an expiry") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  log_lines log_a;
  log_lines log_b;
  wandura::shared_viewer_limit limit_a(fleet.a, "org_demo", {.tickets_per_minute = 3, .fallback = log_a.options()});
  wandura::shared_viewer_limit limit_b(fleet.b, "org_demo", {.tickets_per_minute = 3, .fallback = log_b.options()});
  std::vector<poison> const poisons{
      {"a string", {"SET", "x"}},
      {"a list", {"RPUSH", "x"}},
      {"t=-inf", {"HSET", "t", "-inf", "ts", "0"}},
      {"t=inf", {"HSET", "t", "inf", "ts", "0"}},
      {"t=nan", {"HSET", "t", "nan", "ts", "0"}},
      {"ts=nan", {"HSET", "t", "1", "ts", "nan"}},
      {"ts=-inf", {"HSET", "t", "1", "ts", "-inf"}},
      {"t=1e400", {"HSET", "t", "1e400"}},
      {"t=abc", {"HSET", "t", "abc", "ts", "abc"}},
      {"t=-2, out of range", {"HSET", "t", "-2", "ts", "0"}},
      {"t=1e300, out of range", {"HSET", "t", "1e300", "ts", "0"}},
  };
  auto const t0 = at_ms(1'764'590'400'000);
  int round = 0;
  for (auto const& p : poisons) {
    INFO("the bad viewer's key holds " << p.name);
    ++round;
    std::string const bad = "bad-" + std::to_string(round);
    std::string const good = "good-" + std::to_string(round);
    auto const bad_key = wandura::fleet_keys::viewer("org_demo", {3, 3}, bad);
    write_poison(fleet, p, bad_key);
    // The good viewer asks 8 times within 16 ms, alternating processes, each time right after the bad viewer: 3 a
    // minute fleet-wide is 3 of 8, whichever process serves them.
    int good_granted = 0;
    int bad_granted = 0;
    for (int step = 0; step < 8; ++step) {
      auto& limit = step % 2 == 0 ? limit_a : limit_b;
      auto const now = t0 + std::chrono::minutes(round) + step * 2ms;
      bad_granted += test_support::run(fleet.io, limit.try_acquire(bad, 1, now)).granted ? 1 : 0;
      good_granted += test_support::run(fleet.io, limit.try_acquire(good, 1, now + 1ms)).granted ? 1 : 0;
    }
    CHECK(good_granted == 3);
    CHECK(bad_granted == 3); // the repaired bucket started full, as a missing one does, and is counted once too
    CHECK(raw(fleet.io, fleet.a, {"TYPE", bad_key}).text == "hash");
    auto const ttl = raw(fleet.io, fleet.a, {"PTTL", bad_key}).integer;
    CHECK(ttl > 0);
    CHECK(ttl <= (1min + 61s) / 1ms); // empty: full again in a minute, plus 60 s
    double const tokens = std::stod(raw(fleet.io, fleet.a, {"HGET", bad_key, "t"}).text);
    CHECK(tokens >= 0);
    CHECK(tokens < 1); // what 14 ms refilled since the third take emptied it
  }
  check_redis_answered_all(limit_a, limit_b, log_a, log_b);
}

TEST_CASE("poisoned keys: a counter's pace key holding what the SDK never writes is repaired with an expiry, and "
          "both processes still pace to the counter's one rate") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  std::vector<poison> const poisons{
      {"a string", {"SET", "x"}},
      {"a set", {"SADD", "x"}},
      {"tat=-inf", {"HSET", "tat", "-inf"}},
      {"tat=inf", {"HSET", "tat", "inf"}},
      {"tat=nan", {"HSET", "tat", "nan"}},
      {"hold=inf", {"HSET", "hold", "inf", "press", "inf"}},
      {"hold=nan", {"HSET", "hold", "nan", "press", "nan"}},
      {"hold=1e400", {"HSET", "hold", "1e400"}},
      {"hold=1e300, out of range", {"HSET", "hold", "1e300", "press", "-1e300"}},
      {"em=0, burst=-1", {"HSET", "em", "0", "burst", "-1"}},
      {"em=inf, burst=nan", {"HSET", "em", "inf", "burst", "nan"}},
      {"em=-inf, burst=inf", {"HSET", "em", "-inf", "burst", "inf"}},
      {"em=abc, hold=0x10 ", {"HSET", "em", "abc", "hold", " 0x10 "}},
  };
  auto const t0 = at_ms(1'764'590'400'000);
  int round = 0;
  for (auto const& p : poisons) {
    INFO("the pace key holds " << p.name);
    ++round;
    log_lines log_a;
    log_lines log_b;
    std::string const counter = "poisoned-" + std::to_string(round);
    // 600 a minute with a burst of 10: from idle, 10 units at one instant for the whole fleet (20 if each process
    // paced alone, as it does answering locally).
    wandura::shared_counter_pace pace_a(
        fleet.a, "org_demo", {.counter = counter, .limit_per_minute = 600, .burst = 10, .fallback = log_a.options()});
    wandura::shared_counter_pace pace_b(
        fleet.b, "org_demo", {.counter = counter, .limit_per_minute = 600, .burst = 10, .fallback = log_b.options()});
    auto const key = wandura::fleet_keys::pace("org_demo", counter);
    write_poison(fleet, p, key);
    auto const seen = test_support::run(fleet.io, pace_b.read()); // read-only: what is not the SDK's reads absent
    CHECK(seen.held_until == std::chrono::system_clock::time_point{});
    CHECK(seen.pressure_at == std::chrono::system_clock::time_point{});
    int admitted = 0;
    for (int i = 0; i < 30; ++i) {
      auto& pace = i % 2 == 0 ? pace_a : pace_b;
      admitted += test_support::run(fleet.io, pace.try_acquire(1, t0)).go ? 1 : 0;
    }
    CHECK(admitted == 10);
    CHECK(raw(fleet.io, fleet.a, {"TYPE", key}).text == "hash");
    auto const ttl = raw(fleet.io, fleet.a, {"PTTL", key}).integer;
    CHECK(ttl > 0);
    CHECK(ttl <= (1h / 1ms));
    for (char const* field : {"tat", "hold", "press", "em", "burst"}) {
      auto const value = raw(fleet.io, fleet.a, {"HGET", key, field});
      INFO(field << " = " << value.text);
      CHECK((value.is_nil() || std::isfinite(std::stod(value.text))));
    }
    // A hold and a rate set afterwards are the SDK's own again, and read as set.
    test_support::run(fleet.io, pace_a.hold_until(t0 + 5s, t0));
    test_support::run(fleet.io, pace_a.set_rate(1200, 20));
    auto const after = test_support::run(fleet.io, pace_b.read());
    CHECK(after.held_until == t0 + 5s);
    CHECK(after.limit_per_minute == 1200);
    check_redis_answered_all(pace_a, pace_b, log_a, log_b);
  }
}

TEST_CASE("poisoned keys: a ticket key holding another type is replaced by the next store with its expiry, and no "
          "lookup falls back") {
  log_lines log_a;
  log_lines log_b;
  auto started = test_support::two_caches::start_or_skip({.near_cache = false, .fallback = log_a.options()},
                                                         {.near_cache = false, .fallback = log_b.options()});
  if (!started) {
    return;
  }
  auto& [redis, fleet, cache_a, cache_b] = *started;
  auto const now = std::chrono::system_clock::now();
  auto const expires_at = std::chrono::time_point_cast<std::chrono::milliseconds>(now + 30min);
  std::vector<poison> const poisons{
      {"a hash without expiry", {"HSET", "t", "1"}},
      {"a hash that outlives the ticket", {"HSET", "t", "1"}},
      {"a list", {"RPUSH", "x"}},
      {"a string that is no envelope", {"SET", "garbage"}},
  };
  int round = 0;
  for (auto const& p : poisons) {
    INFO("the ticket key holds " << p.name);
    ++round;
    auto const poisoned = test_support::viewer_on("device-poisoned-" + std::to_string(round));
    auto const other = test_support::viewer_on("device-other-" + std::to_string(round));
    auto const key = wandura::fleet_keys::ticket("org_demo", poisoned);
    write_poison(fleet, p, key);
    if (round == 2) {
      raw(fleet.io, fleet.a, {"EXPIRE", key, "86400"}); // a day: longer than any ticket the store would keep
    }
    CHECK_FALSE(test_support::run(fleet.io, cache_b.get(poisoned, now)));
    wandura::cached_ticket const ticket{R"({"ticket_id":"tkt_)" + std::to_string(round) + R"("})", expires_at};
    test_support::run(fleet.io, cache_a.put(poisoned, ticket, now));
    test_support::run(fleet.io, cache_a.put(other, ticket, now));
    auto const found = test_support::run(fleet.io, cache_b.get(poisoned, now));
    REQUIRE(found);
    CHECK(*found == ticket);
    CHECK(test_support::run(fleet.io, cache_b.get(other, now)));
    CHECK(raw(fleet.io, fleet.a, {"TYPE", key}).text == "string");
    auto const ttl = raw(fleet.io, fleet.a, {"PTTL", key}).integer;
    CHECK(ttl > 0);
    CHECK(ttl <= 25min / 1ms);
  }
  check_redis_answered_all(cache_a, cache_b, log_a, log_b);
}

TEST_CASE("poisoned keys: an error reply about one call's key falls back for that call alone, with one WARN line a "
          "minute that names the key's kind, not the key") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  log_lines log;
  wandura::detail::fallback_guard guard("viewer_limit", fleet.a.server_name(), log.options(), "viewer bucket");
  // A script that stops on a key of another type, as a script without the repairs did (Redis 7:
  // "WRONGTYPE ... script: <sha>, on @user_script:1.").
  wandura::detail::redis_script const script("return redis.call('HINCRBY', KEYS[1], 'n', 1)",
                                             wandura::detail::redis_access::write);
  std::string const bad = wandura::fleet_keys::viewer("org_demo", {3, 3}, "secret-viewer-ref");
  std::string const good = wandura::fleet_keys::viewer("org_demo", {3, 3}, "good");
  raw(fleet.io, fleet.a, {"SET", bad, "x"});
  auto const is_integer = [](wandura::redis_reply const& r) { return r.type == wandura::redis_reply::kind::integer; };
  auto const run_on = [&](std::string const& key) {
    std::array<std::string_view, 1> const keys{key};
    return test_support::run(
        fleet.io, wandura::detail::run_or_fall_back(script, fleet.a, guard, keys, {}, +is_integer, "viewer limit"));
  };
  for (int i = 0; i < 5; ++i) {
    CHECK_FALSE(run_on(bad));           // this call answers locally
    auto const answered = run_on(good); // the next asks Redis, and Redis answers
    REQUIRE(answered);
    CHECK(answered->integer == i + 1);
  }
  CHECK(guard.fallbacks() == 5);
  CHECK_FALSE(guard.degraded());
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].starts_with("WARN fleet viewer_limit: redis " + fleet.a.server_name() +
                                 " answered a call with an error about its viewer bucket key (WRONGTYPE "));
  CHECK(log.lines[0].find("unavailable") == std::string::npos);
  CHECK(log.lines[0].find("secret-viewer-ref") == std::string::npos);
}

TEST_CASE("poisoned keys: an error reply about the server inside a script (OOM) is still an outage") {
  auto redis = test_support::start_redis_or_skip({"--maxmemory", "1", "--maxmemory-policy", "noeviction"});
  if (!redis) {
    return;
  }
  two_processes fleet(redis->url());
  log_lines log;
  wandura::detail::fallback_guard guard("viewer_limit", fleet.a.server_name(), log.options(), "viewer bucket");
  wandura::detail::redis_script const script("return redis.call('HINCRBY', KEYS[1], 'n', 1)",
                                             wandura::detail::redis_access::write);
  std::string const key = wandura::fleet_keys::viewer("org_demo", {3, 3}, "good");
  std::array<std::string_view, 1> const keys{key};
  auto const is_integer = [](wandura::redis_reply const& r) { return r.type == wandura::redis_reply::kind::integer; };
  CHECK_FALSE(test_support::run(
      fleet.io, wandura::detail::run_or_fall_back(script, fleet.a, guard, keys, {}, +is_integer, "viewer limit")));
  CHECK(guard.degraded());
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].find(" unavailable (redis answered an error reply: OOM ") != std::string::npos);
}
