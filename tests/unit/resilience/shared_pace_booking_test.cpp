// Bookings of the shared pace (shared_pace.hpp: a grant `go` with a later `wait_until`): several gates on one
// hand-stepped clock and one in-memory shared pace that books as `redis_counter_pace` does. Turns kept fair, no
// release inside a fleet-wide hold or above the fleet's refill and burst, and a booking never stuck.
#include "wandura/resilience/shared_pace.hpp"

#include <algorithm>
#include <chrono>

#include <catch2/catch.hpp>

#include "shared_pace_harness.hpp"

using namespace std::chrono_literals;
using namespace shared_pace_testing;

namespace {

/// Admissions of `gate` in the open interval (from, to).
std::size_t admitted_between(fleet_harness const& h, std::size_t gate, wandura::clock::time_point from,
                             wandura::clock::time_point to) {
  return static_cast<std::size_t>(std::count_if(h.completed.begin(), h.completed.end(), [&](auto const& d) {
    return d.gate == gate && d.result.admitted() && d.at > from && d.at < to;
  }));
}

} // namespace

TEST_CASE("shared pace: a hold another gate publishes while a grant is booked holds the booked release too") {
  for (auto const book : {0ms, 500ms}) {
    for (auto const offset : {0ms, 30ms, 60ms, 90ms}) {
      INFO("booking up to " << book / 1ms << " ms ahead, the hold " << offset / 1ms << " ms into a read interval");
      fleet_harness h(2, true, book);
      // Gate A paces at 20/s a counter the fleet paces at 10/s (another process published the lower limit), with
      // a full queue and a request coming every 20 ms (so it reads the fleet's view every `shared_pace_refresh`):
      // it asks before each unit is there, and books it.
      h.gates[0]->observe("playback", refused(1200, 0ms));
      h.pace->set_limit("playback", wandura::rate_limit{.limit = 600, .window = 60s});
      for (int i = 0; i < 40; ++i) {
        h.spawn(0);
      }
      auto const step = [&](int ms) {
        for (int i = 0; i < ms; ++i) {
          if ((h.now().time_since_epoch() / 1ms) % 20 == 0) {
            h.spawn(0);
          }
          h.run_for(1ms, 1ms);
        }
      };
      step(1000 + static_cast<int>(offset.count()));
      REQUIRE(h.admitted(0, h.now()) >= 5);
      // Gate B sees a 429 held 2 s and publishes it.
      h.gates[1]->observe("playback", refused(600, 2s));
      auto const held_at = h.now();
      step(2500);
      CHECK(h.gates[0]->held_until("playback") >= held_at + 1990ms);
      // Nothing goes inside the fleet's hold once A could have learnt of it (its next read, up to 100 ms on): not
      // the unit booked before the hold was published either.
      CHECK(admitted_between(h, 0, held_at, held_at + 2s) == 0);
      CHECK(h.admitted(0, held_at + 2500ms) > h.admitted(0, held_at + 2s));
    }
  }
}

TEST_CASE("shared pace: gates that book take turns on a slow counter with the smallest burst too") {
  // 60/min with the fleet's burst at its floor of two units: only one unit is ever bookable ahead.
  for (std::size_t n : {2U, 3U}) {
    fleet_harness h(n, true, 500ms, 2);
    auto const start = h.now();
    for (std::size_t g = 0; g < n; ++g) {
      h.gates[g]->observe("playback", refused(60, 1s));
      for (int i = 0; i < 80; ++i) {
        h.spawn(g);
      }
    }
    h.run_for(61s, 5ms);
    std::size_t total = 0;
    std::size_t fewest = 1000;
    for (std::size_t g = 0; g < n; ++g) {
      auto const got = h.admitted(g, start + 61s);
      INFO("gate " << g << " of " << n << ": " << got);
      total += got;
      fewest = std::min(fewest, got);
    }
    INFO(n << " gates: " << total << " in all, the fewest " << fewest);
    // Held 1 s, then 1/s for 60 s plus the burst of 2: 62. Each gets at least a third of its share (a unit a
    // second is few: who asks first after a refusal is spread at random).
    CHECK(total >= 60);
    CHECK(total <= 62);
    CHECK(fewest >= total / (3 * n));
  }
}

TEST_CASE("shared pace: more gates than the fleet can book ahead for each get a fair share, never above the refill") {
  // A 10/s counter with a burst of 5 and bookings 500 ms ahead has room for about ten grants open at once; twelve
  // gates each keep one open.
  std::size_t const n = 12;
  fleet_harness h(n, true, 500ms);
  auto const start = h.now();
  for (std::size_t g = 0; g < n; ++g) {
    h.gates[g]->observe("playback", refused(600, 1s));
    for (int i = 0; i < 60; ++i) {
      h.spawn(g);
    }
  }
  auto const end = start + 21s;
  h.run_for(21s, 5ms);
  std::size_t total = 0;
  std::size_t fewest = 1000;
  std::size_t most = 0;
  for (std::size_t g = 0; g < n; ++g) {
    auto const got = h.admitted(g, end);
    total += got;
    fewest = std::min(fewest, got);
    most = std::max(most, got);
  }
  INFO(total << " in all, each " << fewest << " to " << most);
  // Held 1 s, then 10/s for 20 s plus the burst of 5: 205, about 17 each.
  CHECK(total >= 200);
  CHECK(total <= 205);
  // Second by second the fleet never goes above its refill plus burst.
  for (int s = 2; s <= 21; ++s) {
    std::size_t by = 0;
    for (std::size_t g = 0; g < n; ++g) {
      by += h.admitted(g, start + std::chrono::seconds(s));
    }
    INFO("by " << s << " s: " << by);
    CHECK(by <= static_cast<std::size_t>(10 * (s - 1) + 5));
  }
  // Who gets a unit that comes free is a race between the gates whose booking has just been used and those refused
  // and asking again: none gets less than half its share.
  CHECK(fewest >= 9);
}

TEST_CASE("shared pace: a booking whose check of the fleet's view stalls or fails costs at most the grant timeout") {
  for (bool const stall : {true, false}) {
    INFO((stall ? "the reads stall" : "the reads fail"));
    fleet_harness h(1, true, 500ms);
    // The gate paces at 20/s, the fleet at 10/s: each unit is booked ahead, and checked at its instant.
    h.gates[0]->observe("playback", refused(1200, 0ms));
    h.pace->set_limit("playback", wandura::rate_limit{.limit = 600, .window = 60s});
    for (int i = 0; i < 60; ++i) {
      h.spawn(0, 10s);
    }
    h.run_for(1s, 1ms);
    auto const before = h.admitted(0, h.now());
    REQUIRE(h.pace->bookings > 0);
    REQUIRE(h.playback(0).fleet_failures == 0);
    (stall ? h.pace->stalled_reads : h.pace->failing) = true;
    auto const from = h.now();
    h.run_for(2s, 1ms);
    // Each check given up on after 50 ms (or failed at once) sets the fleet aside for 1 s: the gate paces alone at
    // its 20/s then (40 in 2 s, plus its room of up to 10), with the units it booked, and does not stop.
    auto const during = h.admitted(0, h.now()) - before;
    INFO(before << " before, " << during << " in the 2 s after");
    CHECK(during >= 30);
    CHECK(during <= 50);
    CHECK(h.playback(0).fleet_failures >= 1);
    CHECK(h.playback(0).fleet_failures <= 3);
    CHECK(h.playback(0).deadline_exceeded == 0);
    // The first release after the failure is not held longer than the timeout past the booked unit's instant.
    auto const next = std::find_if(h.completed.begin(), h.completed.end(),
                                   [&](auto const& d) { return d.result.admitted() && d.at > from; });
    REQUIRE(next != h.completed.end());
    CHECK(next->at <= from + 100ms + 50ms + 1ms);
  }
}

TEST_CASE("shared pace: a gate destroyed while a booking waits for its instant or its check cancels its queue once") {
  for (bool const checking : {false, true}) {
    INFO((checking ? "destroyed during the check" : "destroyed before the booked instant"));
    fleet_harness h(1, true, 500ms);
    h.gates[0]->observe("playback", refused(1200, 0ms));
    h.pace->set_limit("playback", wandura::rate_limit{.limit = 600, .window = 60s});
    for (int i = 0; i < 20; ++i) {
      h.spawn(0);
    }
    h.run_for(700ms, 1ms); // the burst of 5, then units booked one by one
    REQUIRE(h.pace->bookings > 0);
    h.pace->stalled_reads = checking;
    h.run_for(checking ? 120ms : 0ms, 1ms);
    auto const admitted = h.admitted(0, h.now());
    h.gates.clear();
    h.settle();
    h.run_for(2s, 5ms); // timers, the stalled read and the booked instant come and go
    REQUIRE(h.completed.size() == 20);
    auto const cancelled = std::count_if(h.completed.begin(), h.completed.end(), [](auto const& d) {
      return d.result.verdict == admission_verdict::cancelled;
    });
    CHECK(static_cast<std::size_t>(cancelled) == 20 - admitted);
  }
}

TEST_CASE("shared pace: at the end of a fleet-wide hold the gates release the fleet's burst, their bookings included") {
  std::size_t const n = 4;
  fleet_harness h(n, true, 500ms);
  // Each gate paces at 20/s a counter the fleet paces at 10/s: all four keep a booking open.
  for (std::size_t g = 0; g < n; ++g) {
    h.gates[g]->observe("playback", refused(1200, 0ms));
    for (int i = 0; i < 60; ++i) {
      h.spawn(g);
    }
  }
  h.pace->set_limit("playback", wandura::rate_limit{.limit = 600, .window = 60s});
  auto const step = [&](int ms) {
    for (int i = 0; i < ms; ++i) {
      if ((h.now().time_since_epoch() / 1ms) % 20 == 0) {
        h.spawn(static_cast<std::size_t>((h.now().time_since_epoch() / 20ms) % 4));
      }
      h.run_for(1ms, 1ms);
    }
  };
  step(2000);
  REQUIRE(h.pace->bookings >= 4);
  h.gates[0]->observe("playback", refused(1200, 2s)); // a 429 held 2 s, published to the fleet
  auto const held_at = h.now();
  step(3000);
  std::size_t in_hold = 0;
  std::size_t after = 0;
  for (std::size_t g = 0; g < n; ++g) {
    in_hold += admitted_between(h, g, held_at + 1ms, held_at + 2s);
    after += admitted_between(h, g, held_at + 2s - 1ns, held_at + 3s);
  }
  INFO(in_hold << " inside the hold, " << after << " in the second after it");
  CHECK(in_hold == 0);
  // The fleet's burst of 5 and 10 for the second (14 without bookings): the units booked before the hold, used at
  // its end, come out of the burst.
  CHECK(after <= 16);
}
