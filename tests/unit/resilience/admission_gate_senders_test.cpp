// The admission gate as one of several senders in front of one server counter: three gates (three clients or
// processes) each see only their own 429s; together they must settle near the counter's refill, without floods of
// 429s after each hold-off and without stalls. Simulated on a hand-stepped clock: no sockets, zero real time.
#include "wandura/resilience/admission_gate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;

namespace {

/// The server's continuous counter (SPEC §1): capacity `limit`, refilled limit/60 per second; a request takes one
/// unit or is refused with the whole seconds until one is back as `Retry-After`.
struct server_counter {
  double limit = 0;
  double tokens = 0;
  wandura::clock::time_point at;

  [[nodiscard]] double refill_per_s() const { return limit / 60.0; }
  std::optional<std::chrono::seconds> take(wandura::clock::time_point now) {
    tokens = std::min(limit, tokens + refill_per_s() * std::chrono::duration<double>(now - at).count());
    at = now;
    if (tokens >= 1.0) {
      tokens -= 1.0;
      return std::nullopt;
    }
    return std::chrono::seconds(std::max<long>(1, std::lround(std::ceil((1.0 - tokens) / refill_per_s()))));
  }
};

/// Per second of the run: what the server granted and refused, over all senders.
struct server_log {
  wandura::clock::time_point start;
  std::map<long, int> granted;
  std::map<long, int> refused;
  long second(wandura::clock::time_point t) const {
    return static_cast<long>(std::chrono::floor<std::chrono::seconds>(t - start).count());
  }
};

struct sender {
  explicit sender(std::shared_ptr<wandura::clock> clock) : gate(std::move(clock)) {}
  wandura::admission_gate gate;
  int granted = 0;
  int refused = 0;
  int gave_up = 0;
};

/// One play request of a sender: waits at its gate, is sent, and after a 429 goes back to the gate (a retry),
/// until granted or its 15 s deadline passes.
asio::awaitable<void> play_request(sender& s, server_counter& server, server_log& log, wandura::clock& clock) {
  auto const deadline = clock.now() + 15s;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto const a = co_await s.gate.admit("playback", wandura::request_class::play, 1, deadline);
    if (!a.admitted()) {
      ++s.gave_up;
      co_return;
    }
    auto const now = clock.now();
    wandura::counter_feedback f;
    if (auto retry_after = server.take(now)) {
      ++s.refused;
      ++log.refused[log.second(now)];
      f.status = 429;
      f.refused = 1;
      f.retry_after = *retry_after;
      f.limit = static_cast<std::uint32_t>(server.limit);
      f.window = 60s;
      s.gate.observe("playback", f);
      continue;
    }
    ++s.granted;
    ++log.granted[log.second(now)];
    f.status = 200;
    f.granted = 1;
    s.gate.observe("playback", f);
    co_return;
  }
}

} // namespace

TEST_CASE("admission gate: three senders sharing one counter settle near its refill, without floods or stalls") {
  asio::io_context io;
  auto clock = std::make_shared<wandura::testing::manual_clock>();
  server_counter server{3000, 0, clock->now()}; // 50 tickets/s, empty at the start (a busy organisation)
  server_log log{clock->now(), {}, {}};
  std::array<std::unique_ptr<sender>, 3> senders;
  for (auto& s : senders) {
    s = std::make_unique<sender>(clock);
  }
  // Each sender asks for 30 plays a second: together 1.8 times the refill, for 60 s.
  constexpr double demand_per_s = 30;
  constexpr auto step = 10ms;
  std::array<double, 3> due{0.0, 0.3, 0.6}; // staggered so that the senders do not move in lockstep
  for (auto t = 0ms; t < 60s; t += step) {
    for (std::size_t i = 0; i < senders.size(); ++i) {
      due[i] += demand_per_s * std::chrono::duration<double>(step).count();
      for (; due[i] >= 1.0; due[i] -= 1.0) {
        asio::co_spawn(io, play_request(*senders[i], server, log, *clock), asio::detached);
      }
    }
    io.restart();
    io.poll();
    clock->advance(step);
  }

  // After the first hold-offs (10 s on): the refill is used (50 a second), no 3-second stretch falls far below it
  // (a stall: every sender holding at once), and 429s stay rare and never come in a flood (most of a queue
  // released when a hold-off ends).
  int granted = 0;
  int refused = 0;
  int min_3s = 1 << 30;
  int max_refused = 0;
  for (long sec = 10; sec < 60; ++sec) {
    granted += log.granted[sec];
    refused += log.refused[sec];
    max_refused = std::max(max_refused, log.refused[sec]);
    if (sec >= 12) {
      min_3s = std::min(min_3s, log.granted[sec - 2] + log.granted[sec - 1] + log.granted[sec]);
    }
  }
  INFO("granted " << granted << " refused " << refused << " min over 3 s " << min_3s << " max 429/s " << max_refused);
  CHECK(granted >= 50 * 50 * 0.95);
  CHECK(min_3s >= 3 * 50 * 0.8);
  CHECK(refused <= granted / 20);
  CHECK(max_refused <= 10);

  // Every sender keeps a fair part: none starved by the others.
  int all_granted = 0;
  for (auto const& s : senders) {
    all_granted += s->granted;
  }
  for (auto const& s : senders) {
    INFO("sender granted " << s->granted << " refused " << s->refused << " gave up " << s->gave_up);
    CHECK(s->granted >= all_granted / 5);
  }
}
