// The degrade-never-block bookkeeping every shared-state class uses (src/fleet/fallback_guard.hpp).
#include "fleet/fallback_guard.hpp"

#include <optional>
#include <string>
#include <vector>

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/fleet/fleet_error.hpp"

using namespace std::chrono_literals;
using wandura::detail::fallback_guard;
using wandura::detail::redis_access;
using wandura::detail::redis_turn;

namespace {

/// `guard`'s turn at `now`, which must be one that asks Redis.
redis_turn turn_at(fallback_guard& guard, std::chrono::steady_clock::time_point now,
                   redis_access access = redis_access::write) {
  auto turn = guard.ask_redis(now, access);
  REQUIRE(turn);
  return turn;
}

} // namespace

TEST_CASE("fallback guard: one WARN line per outage, every local answer counted, Redis probed after the interval") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("ticket_cache", "127.0.0.1:6379", options, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  turn_at(guard, t0).failed(wandura::errc::attempt_timeout, t0);
  CHECK(guard.degraded());
  for (int i = 1; i <= 9; ++i) {
    CHECK_FALSE(guard.ask_redis(t0 + i * 10ms, redis_access::write)); // within the probe interval: local, counted
  }
  CHECK(guard.fallbacks() == 10);
  turn_at(guard, t0 + 500ms).failed(wandura::errc::connect_failed, t0 + 500ms); // the probe
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("WARN fleet ticket_cache: redis 127.0.0.1:6379 unavailable ("));

  turn_at(guard, t0 + 1000ms).answered();
  CHECK_FALSE(guard.degraded());
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "INFO fleet ticket_cache: redis 127.0.0.1:6379 is back after 11 local answers");
  turn_at(guard, t0 + 1000ms).answered();
  CHECK(lines.size() == 2);

  turn_at(guard, t0 + 2s).failed(wandura::errc::connection_reset, t0 + 2s); // a new outage: a new WARN line
  CHECK(lines.size() == 3);
  CHECK(guard.fallbacks() == 12);
}

TEST_CASE("fallback guard: without a logger it still counts") {
  wandura::detail::fallback_guard guard("viewer_limit", "h:1", {}, "key");
  auto const now = std::chrono::steady_clock::now();
  turn_at(guard, now).failed(wandura::errc::attempt_timeout, now);
  CHECK(guard.fallbacks() == 1);
  CHECK(guard.degraded());
}

TEST_CASE("fallback guard: shut_down answers locally for good, without a line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("viewer_limit", "127.0.0.1:6379", options, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  turn_at(guard, t0).failed(asio::error::shut_down, t0); // the fleet was shut down: no outage, no WARN line
  CHECK(guard.degraded());
  CHECK(guard.fallbacks() == 1);
  CHECK_FALSE(guard.ask_redis(t0 + 10ms, redis_access::write));
  CHECK_FALSE(guard.ask_redis(t0 + 1h, redis_access::write)); // never probed again, whatever the interval
  CHECK(guard.fallbacks() == 3);
  CHECK(lines.empty());
}

TEST_CASE("fallback guard: the WARN line quotes Redis's error reply as one bounded line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("ticket_cache", "127.0.0.1:6379", options, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  turn_at(guard, t0).failed(wandura::fleet_errc::server_error, t0,
                            "NOAUTH Authentication required.\r\nINFO forged line");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "WARN fleet ticket_cache: redis 127.0.0.1:6379 unavailable (redis answered an error reply: NOAUTH "
                    "Authentication required.\\x0d\\x0aINFO forged line); answering from local state until it is back");
  turn_at(guard, t0 + 500ms).answered();
  turn_at(guard, t0 + 1s).failed(wandura::fleet_errc::server_error, t0 + 1s, std::string(1000, 'E'));
  REQUIRE(lines.size() == 3);
  CHECK(lines[2].size() < 400); // the first 200 bytes and "..."
  CHECK(lines[2].find(std::string(200, 'E') + "...)") != std::string::npos);
}

TEST_CASE("fallback guard: the arguments Redis echoes after an unknown command stay out of the WARN line") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); }};
  wandura::detail::fallback_guard guard("viewer_limit", "127.0.0.1:6379", options, "key");
  auto const now = std::chrono::steady_clock::now();
  turn_at(guard, now)
      .failed(wandura::fleet_errc::server_error, now,
              "ERR unknown command 'EVALSHA', with args beginning with: 'a008' '1' "
              "'wandura:{acme}:viewer:30pm-b30:viewer-x' ");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "WARN fleet viewer_limit: redis 127.0.0.1:6379 unavailable (redis answered an error reply: ERR "
                    "unknown command 'EVALSHA'); answering from local state until it is back");
}

TEST_CASE("fallback guard: an error raised inside a script about its key concerns that call, while a server state, a "
          "reply before the script ran or no reply concerns Redis") {
  using wandura::detail::concerns_one_call;
  auto const server_error = make_error_code(wandura::fleet_errc::server_error);
  // Redis 7's texts, as redis-server 7.0 answers them.
  CHECK(concerns_one_call(server_error, "WRONGTYPE Operation against a key holding the wrong kind of value script: "
                                        "085ed46c93fa4970fb6709a3783f5a32f80f7384, on @user_script:1."));
  CHECK(concerns_one_call(server_error, "ERR value is not an integer or out of range script: "
                                        "03f22c7bc341f1f9746d24807b9fe6e0be910158, on @user_script:1."));
  CHECK(concerns_one_call(server_error, "ERR user_script:1: attempt to perform arithmetic on a nil value script: "
                                        "e8f647a6e338d050a115f7d097171925636246d4, on @user_script:1."));
  // Redis 6 wraps what the command answered.
  CHECK(concerns_one_call(server_error, "ERR Error running script (call to f_085e): @user_script:1: WRONGTYPE "
                                        "Operation against a key holding the wrong kind of value"));
  CHECK_FALSE(concerns_one_call(server_error, "ERR Error running script (call to f_085e): @user_script:1: "
                                              "@user_script: 1: -OOM command not allowed when used memory > "
                                              "'maxmemory'."));
  CHECK_FALSE(concerns_one_call(server_error, "OOM command not allowed when used memory > 'maxmemory'. script: "
                                              "085e, on @user_script:1."));
  CHECK_FALSE(concerns_one_call(server_error, "READONLY You can't write against a read only replica. script: 085e, "
                                              "on @user_script:1."));
  CHECK_FALSE(concerns_one_call(server_error, "NOPERM this user has no permissions to access one of the keys used as "
                                              "arguments script: 085e, on @user_script:1."));
  CHECK_FALSE(concerns_one_call(server_error, "ERR The user executing the script can't publish to the channel "
                                              "mentioned in the command script: 085e, on @user_script:12."));
  CHECK_FALSE(concerns_one_call(server_error, "LOADING Redis is loading the dataset in memory"));
  CHECK_FALSE(concerns_one_call(server_error, "BUSY Redis is busy running a script."));
  CHECK_FALSE(concerns_one_call(server_error, "NOSCRIPT No matching script. Please use EVAL."));
  CHECK_FALSE(concerns_one_call(server_error, "ERR unknown command 'EVALSHA', with args beginning with: "));
  CHECK_FALSE(concerns_one_call(wandura::errc::attempt_timeout, ""));
  CHECK_FALSE(concerns_one_call(wandura::fleet_errc::unexpected_reply, ""));
}

TEST_CASE("fallback guard: a failure of one call counts a fallback, keeps asking Redis, and logs at most once a "
          "minute with the count of calls left unsaid") {
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("viewer_limit", "127.0.0.1:6379", options, "viewer bucket");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  auto const server_error = make_error_code(wandura::fleet_errc::server_error);
  std::string_view const wrongtype =
      "WRONGTYPE Operation against a key holding the wrong kind of value script: 085e, on @user_script:1.";

  turn_at(guard, t0).call_failed(server_error, t0, wrongtype);
  CHECK_FALSE(guard.degraded());
  CHECK(guard.ask_redis(t0 + 1ms, redis_access::write)); // no probe interval: the next call asks Redis
  CHECK(guard.fallbacks() == 1);
  CHECK(guard.failures() == 1);
  CHECK(guard.last_failure() == server_error);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "WARN fleet viewer_limit: redis 127.0.0.1:6379 answered a call with an error about its viewer "
                    "bucket key (WRONGTYPE Operation against a key holding the wrong kind of value); that call "
                    "answered from local state, the next ones ask redis");
  for (int i = 1; i <= 3; ++i) {
    turn_at(guard, t0 + i * 10s).call_failed(server_error, t0 + i * 10s, wrongtype); // within the minute: not logged
  }
  CHECK(lines.size() == 1);
  turn_at(guard, t0 + 1min).call_failed(server_error, t0 + 1min, wrongtype);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].ends_with("the next ones ask redis (3 more such calls since the last line)"));
  CHECK(guard.fallbacks() == 5);
  turn_at(guard, t0 + 1min).answered(); // no outage began: no INFO line
  CHECK(lines.size() == 2);
}

TEST_CASE("fallback guard: a refused write is not ended by a read Redis answers, only by a write answered") {
  // A read-only replica, OOM under noeviction, an ACL: reads answered, writes refused. The log flipped WARN, INFO,
  // WARN at every probe interval while it lasted.
  std::vector<std::string> lines;
  wandura::fallback_options options{.log = [&](std::string_view line) { lines.emplace_back(line); },
                                    .probe_interval = 500ms};
  wandura::detail::fallback_guard guard("ticket_cache", "127.0.0.1:6379", options, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;

  std::vector<redis_turn> reads; // sent before the outage began, answered late, one per interval
  for (int i = 1; i <= 8; ++i) {
    reads.push_back(turn_at(guard, t0, redis_access::read));
  }
  turn_at(guard, t0).failed(wandura::fleet_errc::server_error, t0, "READONLY You can't write");
  for (int i = 1; i <= 8; ++i) { // eight probe intervals of alternating reads and writes
    auto const at = t0 + i * 500ms;
    reads[static_cast<std::size_t>(i - 1)].answered();    // a read answered late: nothing ends
    CHECK_FALSE(guard.ask_redis(at, redis_access::read)); // a read cannot end it: it does not probe
    turn_at(guard, at).failed(wandura::fleet_errc::server_error, at, "READONLY You can't write"); // the write probes
    CHECK(guard.degraded());
  }
  CHECK(lines.size() == 1); // one WARN, no INFO
  turn_at(guard, t0 + 5s).answered();
  CHECK_FALSE(guard.degraded());
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].starts_with("INFO fleet ticket_cache: redis 127.0.0.1:6379 is back after "));
}

TEST_CASE("fallback guard: an outage a read opened is ended by a read or a write answered") {
  wandura::detail::fallback_guard guard("ticket_cache", "h:1", {.log = {}, .probe_interval = 500ms}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  turn_at(guard, t0, redis_access::read).failed(wandura::errc::attempt_timeout, t0);
  turn_at(guard, t0 + 500ms).answered(); // a write may probe it
  CHECK_FALSE(guard.degraded());
  // Three operations in flight: a read fails, a write is refused too, a read is answered.
  auto read = turn_at(guard, t0 + 1s, redis_access::read);
  auto write = turn_at(guard, t0 + 1s, redis_access::write);
  auto late_read = turn_at(guard, t0 + 1s, redis_access::read);
  read.failed(wandura::errc::attempt_timeout, t0 + 1s);
  write.failed(wandura::fleet_errc::server_error, t0 + 1s, "OOM");
  late_read.answered();
  CHECK(guard.degraded()); // only a write answered ends it now
}

TEST_CASE("fallback guard: an answer without a turn ends an outage as a turn of its kind would, before the probe "
          "interval and without counting a fallback") {
  std::vector<std::string> lines;
  wandura::detail::fallback_guard guard(
      "ticket_cache", "h:1", {.log = [&](std::string_view l) { lines.emplace_back(l); }, .probe_interval = 10s}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  turn_at(guard, t0, redis_access::write).failed(wandura::fleet_errc::server_error, t0, "READONLY no");
  guard.answered_without_turn(redis_access::read); // reads answered say nothing of refused writes
  CHECK(guard.degraded());
  auto const fallbacks = guard.fallbacks();
  guard.answered_without_turn(redis_access::write);
  CHECK_FALSE(guard.degraded());
  CHECK(guard.fallbacks() == fallbacks);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].starts_with("INFO fleet ticket_cache: redis h:1 is back after "));
  turn_at(guard, t0 + 1s, redis_access::read).failed(wandura::errc::attempt_timeout, t0 + 1s);
  guard.answered_without_turn(redis_access::read); // a read's outage: ended by a read
  CHECK_FALSE(guard.degraded());
  CHECK(lines.size() == 4);
}

TEST_CASE("fallback guard: one probe in flight, and the operations started meanwhile answer locally") {
  // Every operation started after the interval while the probe waited went to the paused Redis: 32 calls in flight
  // timed out 775 commands in 6 s and filled max_pending.
  wandura::detail::fallback_guard guard("viewer_limit", "h:1", {.log = {}, .probe_interval = 500ms}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  turn_at(guard, t0).failed(wandura::errc::attempt_timeout, t0);
  for (int interval = 1; interval <= 4; ++interval) {
    auto const at = t0 + interval * 510ms;
    auto probe = turn_at(guard, at);
    for (int i = 1; i <= 32; ++i) {
      CHECK_FALSE(guard.ask_redis(at + i * 100us, redis_access::write)); // while it waits: local
    }
    probe.failed(wandura::errc::attempt_timeout, at + 5ms);
    CHECK_FALSE(guard.ask_redis(at + 6ms, redis_access::write)); // the next interval began at the failure
  }
  // A cancelled probe releases its place; an answered one ends the outage.
  std::optional<redis_turn> cancelled(turn_at(guard, t0 + 3s));
  cancelled.reset();
  auto probe = turn_at(guard, t0 + 3s);
  CHECK_FALSE(guard.ask_redis(t0 + 3s, redis_access::write));
  probe.answered();
  CHECK_FALSE(guard.degraded());
  CHECK(guard.ask_redis(t0 + 3s, redis_access::write)); // no outage: every operation asks
  CHECK(guard.ask_redis(t0 + 3s, redis_access::write));
}

TEST_CASE("fallback guard: a turn that ends without an outcome releases the probe, and one that reported leaves the "
          "next probe's place") {
  // A probe cancelled, or ended by an exception at its co_await (Asio throws there when the operation was already
  // cancelled), that kept its place would leave its part answering locally for good.
  fallback_guard guard("viewer_limit", "h:1", {.log = {}, .probe_interval = 500ms}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  turn_at(guard, t0).failed(wandura::errc::attempt_timeout, t0);

  std::optional<redis_turn> probe(turn_at(guard, t0 + 500ms));
  CHECK_FALSE(guard.ask_redis(t0 + 500ms, redis_access::write)); // one probe in flight
  probe.reset();                                                 // it ends without an outcome
  probe.emplace(turn_at(guard, t0 + 500ms));                     // the next operation probes
  CHECK(guard.failures() == 1);                                  // the end reported nothing
  CHECK(guard.fallbacks() == 2);

  probe->failed(wandura::errc::attempt_timeout, t0 + 600ms);
  CHECK_FALSE(*probe);
  auto next = turn_at(guard, t0 + 1100ms); // the next interval's probe, while the first turn lives on
  probe.reset();                           // the first turn ends, its outcome reported: it releases nothing
  CHECK_FALSE(guard.ask_redis(t0 + 1100ms, redis_access::write));
  next.answered();
  CHECK_FALSE(guard.degraded());
}

TEST_CASE("fallback guard: a turn moved owes the outcome from its new owner, and one assigned over ends without one") {
  fallback_guard guard("ticket_cache", "h:1", {.log = {}, .probe_interval = 500ms}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  turn_at(guard, t0).failed(wandura::errc::attempt_timeout, t0);

  std::optional<redis_turn> moved_from(turn_at(guard, t0 + 500ms));
  redis_turn owner = std::move(*moved_from);
  CHECK(owner);
  CHECK_FALSE(*moved_from); // NOLINT(bugprone-use-after-move): what a moved-from turn is, is the point
  moved_from.reset();       // it owes nothing: the probe stays in flight
  CHECK_FALSE(guard.ask_redis(t0 + 500ms, redis_access::write));

  owner = guard.ask_redis(t0 + 500ms, redis_access::write); // a local answer assigned over the probe, not reported
  CHECK_FALSE(owner);
  owner = turn_at(guard, t0 + 500ms); // the place was released: the next operation probes
  owner.answered();
  CHECK_FALSE(guard.degraded());
}

TEST_CASE("fallback guard: an operation let through before the outage that ends during the probe leaves its place") {
  // Operations sent before the outage began are still in flight when a probe goes out; one of them cancelled, or
  // failing, freed the probe's place, and a second probe went to the paused Redis.
  fallback_guard guard("ticket_cache", "h:1", {.log = {}, .probe_interval = 500ms}, "key");
  auto const t0 = std::chrono::steady_clock::time_point{} + 1h;
  auto cancelled_late = turn_at(guard, t0);
  auto failed_late = turn_at(guard, t0);
  std::optional<redis_turn> call_failed_late(turn_at(guard, t0));
  turn_at(guard, t0).failed(wandura::errc::attempt_timeout, t0); // the outage begins

  auto probe = turn_at(guard, t0 + 500ms);
  { redis_turn ended = std::move(cancelled_late); } // ends without an outcome
  CHECK_FALSE(guard.ask_redis(t0 + 500ms, redis_access::write));
  call_failed_late->call_failed(wandura::errc::attempt_timeout, t0 + 500ms, "ERR bad key");
  CHECK_FALSE(guard.ask_redis(t0 + 500ms, redis_access::write));
  failed_late.failed(wandura::errc::attempt_timeout, t0 + 600ms); // prolongs the outage: the next probe waits
  CHECK_FALSE(guard.ask_redis(t0 + 1100ms, redis_access::write)); // the probe is still in flight
  probe.failed(wandura::errc::attempt_timeout, t0 + 1200ms);
  CHECK_FALSE(guard.ask_redis(t0 + 1600ms, redis_access::write)); // the interval runs from the last failure
  turn_at(guard, t0 + 1700ms).answered();
  CHECK_FALSE(guard.degraded());
}
