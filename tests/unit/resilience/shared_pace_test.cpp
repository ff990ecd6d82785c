// The admission gate with a shared pace (shared_pace.hpp, admission_gate_options::shared_pace): gates of several
// processes, here several gates on one hand-stepped clock, pace a counter as one through an in-memory shared pace
// that keeps one GCRA per counter, as the Redis one does.
#include "wandura/resilience/shared_pace.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/resilience/admission_gate.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;
using std::chrono::system_clock;
using wandura::admission;
using wandura::admission_verdict;
using wandura::counter_feedback;
using wandura::request_class;

namespace {

/// The fleet's state in memory: per counter a GCRA (one unit every window/limit, `burst` units at once), a hold
/// and the latest refusal; units that conform within `book` are booked, as `redis_counter_pace` books within its
/// burst (0: refused until they are there). `failing` makes every acquire and read throw; `stalled` makes them
/// never answer (they sleep on the clock until the test ends); `stalled_reads` only the reads.
class memory_pace final : public wandura::shared_pace {
public:
  /// @param clock by pointer: the stalled operations sleep on it, and must not keep it alive.
  explicit memory_pace(wandura::testing::manual_clock* clock, double burst = 5,
                       std::chrono::milliseconds book = std::chrono::milliseconds::zero())
      : clock_(clock), burst_(burst), book_(book) {}

  asio::awaitable<wandura::shared_pace_grant> acquire(std::string_view counter, std::uint32_t cost,
                                                      system_clock::time_point now) override {
    co_await misbehave();
    std::lock_guard lock(mutex_);
    ++acquires;
    auto& c = counters_[std::string(counter)];
    if (c.hold > now) {
      co_return wandura::shared_pace_grant{false, c.hold};
    }
    if (c.limit == 0) {
      co_return wandura::shared_pace_grant{true, now};
    }
    auto const emission = std::chrono::duration_cast<system_clock::duration>(c.window) / c.limit;
    auto const tat = std::max(c.tat, now);
    auto const new_tat = tat + emission * cost;
    auto const allow_at = new_tat - std::chrono::duration_cast<system_clock::duration>(emission * burst_);
    auto const book = std::chrono::duration_cast<system_clock::duration>(book_);
    if (allow_at > now + book) {
      co_return wandura::shared_pace_grant{false, allow_at - book};
    }
    c.tat = new_tat;
    granted_units += static_cast<int>(cost);
    if (allow_at > now) {
      ++bookings;
    }
    co_return wandura::shared_pace_grant{true, std::max(allow_at, now)};
  }

  void hold_until(std::string_view counter, system_clock::time_point until,
                  system_clock::time_point now) noexcept override {
    std::lock_guard lock(mutex_);
    ++holds;
    auto& c = counters_[std::string(counter)];
    // As the script does: units booked for instants inside the hold come out of the burst at its end.
    auto const from = std::max(now, c.hold);
    c.hold = std::max(c.hold, until);
    if (c.limit > 0) {
      auto const emission = std::chrono::duration_cast<system_clock::duration>(c.window) / c.limit;
      auto const to = std::min(c.tat - std::chrono::duration_cast<system_clock::duration>(emission * burst_), c.hold);
      if (to > from) {
        c.tat = std::max(c.tat, c.hold + (to - from));
      }
    }
    c.pressure = std::max(c.pressure, now);
  }

  void set_limit(std::string_view counter, wandura::rate_limit const& limit) noexcept override {
    std::lock_guard lock(mutex_);
    ++limits;
    auto& c = counters_[std::string(counter)];
    c.limit = limit.limit;
    c.window = limit.window;
  }

  asio::awaitable<wandura::shared_pace_view> read(std::string_view counter, system_clock::time_point) override {
    co_await misbehave(stalled_reads);
    std::lock_guard lock(mutex_);
    ++reads;
    auto const& c = counters_[std::string(counter)];
    wandura::shared_pace_view view{c.hold, c.pressure, {}, c.window};
    if (c.limit > 0) {
      view.limit = c.limit;
    }
    co_return view;
  }

  std::atomic<bool> failing{false};
  std::atomic<bool> stalled{false};
  std::atomic<bool> stalled_reads{false};
  std::atomic<int> acquires{0};
  std::atomic<int> granted_units{0};
  std::atomic<int> bookings{0};
  std::atomic<int> holds{0};
  std::atomic<int> limits{0};
  std::atomic<int> reads{0};

private:
  struct state {
    system_clock::time_point tat{};
    system_clock::time_point hold{};
    system_clock::time_point pressure{};
    std::uint32_t limit = 0;
    std::chrono::seconds window{60};
  };

  asio::awaitable<void> misbehave(bool stall = false) {
    if (failing) {
      throw std::runtime_error("shared pace unavailable");
    }
    if (stalled || stall) {
      (void)co_await clock_->sleep_until(wandura::clock::time_point::max());
      throw std::runtime_error("shared pace stalled");
    }
  }

  wandura::testing::manual_clock* clock_;
  double burst_;
  std::chrono::milliseconds book_;
  std::mutex mutex_;
  std::map<std::string, state> counters_;
};

counter_feedback refused(std::uint32_t limit_per_min, std::chrono::milliseconds retry_after) {
  counter_feedback f;
  f.status = 429;
  f.refused = 1;
  f.retry_after = retry_after;
  f.limit = limit_per_min;
  f.window = 60s;
  return f;
}

/// Gates standing for the processes of a fleet, on one manual clock and one io_context; every admission recorded.
/// Members in this order: the gates go first, then the clock (its pending sleeps aborted onto a live io_context),
/// then the io_context.
struct fleet_harness {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  std::shared_ptr<memory_pace> pace;
  std::vector<std::unique_ptr<wandura::admission_gate>> gates;

  struct done {
    std::size_t gate = 0;
    admission result;
    wandura::clock::time_point at;
  };
  std::vector<done> completed;

  explicit fleet_harness(std::size_t n, bool shared = true,
                         std::chrono::milliseconds book = std::chrono::milliseconds::zero(), double burst = 5)
      : pace(std::make_shared<memory_pace>(clock.get(), burst, book)) {
    for (std::size_t i = 0; i < n; ++i) {
      wandura::admission_gate_options options;
      if (shared) {
        options.shared_pace = pace;
      }
      gates.push_back(std::make_unique<wandura::admission_gate>(clock, options));
    }
  }
  ~fleet_harness() {
    gates.clear();
    settle();
  }

  wandura::clock::time_point now() const { return clock->now(); }

  void spawn(std::size_t gate, wandura::clock::duration deadline_in = 60s,
             asio::cancellation_signal* cancel = nullptr) {
    auto op = gates[gate]->admit("playback", request_class::play, 1, now() + deadline_in);
    auto record = [this, gate](std::exception_ptr e, admission a) {
      REQUIRE_FALSE(e);
      completed.push_back({gate, a, clock->now()});
    };
    if (cancel != nullptr) {
      asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(cancel->slot(), record));
    } else {
      asio::co_spawn(io, std::move(op), record);
    }
  }
  void settle() {
    io.restart();
    io.poll();
  }
  void run_for(wandura::clock::duration total, wandura::clock::duration step = 10ms) {
    for (auto t = wandura::clock::duration::zero(); t < total; t += step) {
      clock->advance(step);
      settle();
    }
  }
  std::size_t admitted(std::size_t gate, wandura::clock::time_point by) const {
    return static_cast<std::size_t>(std::count_if(completed.begin(), completed.end(), [&](done const& d) {
      return d.gate == gate && d.result.admitted() && d.at <= by;
    }));
  }
  wandura::admission_counter_stats playback(std::size_t gate) const {
    for (auto& s : gates[gate]->stats()) {
      if (s.counter == "playback") {
        return s;
      }
    }
    FAIL("no playback counter");
    return {};
  }
};

/// Two gates both congested by a 429 on a counter of 10/s, 100 plays queued at each; what each admitted in 10 s.
struct two_gates {
  std::size_t a = 0;
  std::size_t b = 0;
  int bookings = 0;
};
two_gates two_gates_for_ten_seconds(bool shared, std::chrono::milliseconds book = std::chrono::milliseconds::zero()) {
  fleet_harness h(2, shared, book);
  auto const start = h.now();
  for (std::size_t g = 0; g < 2; ++g) {
    h.gates[g]->observe("playback", refused(600, 1s));
    for (int i = 0; i < 100; ++i) {
      h.spawn(g);
    }
  }
  h.settle();
  h.run_for(10s);
  return {h.admitted(0, start + 10s), h.admitted(1, start + 10s), h.pace->bookings};
}

} // namespace

TEST_CASE("shared pace: two gates sharing one pace release at the counter's refill together, not twice it") {
  auto const [alone_a, alone_b, alone_bookings] = two_gates_for_ten_seconds(false);
  auto const [shared_a, shared_b, bookings] = two_gates_for_ten_seconds(true);
  CHECK(bookings == 0);
  INFO("alone: " << alone_a << " + " << alone_b << ", shared: " << shared_a << " + " << shared_b);
  // Held 1 s, then 10/s for 9 s: 90, plus the fleet's burst of 5. Each gate alone releases about that much.
  CHECK(alone_a + alone_b >= 180);
  CHECK(shared_a + shared_b >= 90);
  CHECK(shared_a + shared_b <= 100);
  // Neither process starves the other. Who asks first after a refusal is spread at random (seeded per counter), so
  // the split varies from run to run (50/44 to 67/27 seen in 40 runs): each gets at least a fifth.
  CHECK(shared_a >= 19);
  CHECK(shared_b >= 19);
}

TEST_CASE("shared pace: gates that book their grants take turns, each releasing half of the fleet's refill") {
  // The shared pace books units up to 500 ms ahead (as redis_counter_pace books within its burst). Each gate keeps
  // one grant open, so the two alternate instead of racing for each unit: a gate whose own bucket paces it at the
  // refill asks just after each unit comes, and without bookings that gate took up to all of them (0 of 59 for the
  // other over a real Redis).
  auto const [a, b, bookings] = two_gates_for_ten_seconds(true, 500ms);
  INFO("booked: " << a << " + " << b << " in " << bookings << " bookings");
  CHECK(bookings > 0);
  CHECK(a + b >= 90);
  CHECK(a + b <= 100);
  CHECK(a >= 45);
  CHECK(b >= 45);
}

TEST_CASE("shared pace: a booked grant releases at its instant, not before, and no grant is asked for meanwhile") {
  fleet_harness h(1, true, 500ms);
  auto const start = h.now();
  // Held 1 s. The gate's own bucket refills at 20/s, the fleet's at 10/s (as if another process had published a
  // lower limit), so the gate asks before each unit is there: the fleet's burst of 5, then bookings.
  h.gates[0]->observe("playback", refused(1200, 1s));
  h.pace->set_limit("playback", wandura::rate_limit{.limit = 600, .window = 60s});
  for (int i = 0; i < 30; ++i) {
    h.spawn(0);
  }
  h.run_for(4s, 1ms);
  // The burst at the hold's end (the first ask after it is spread by up to one unit's refill), then one unit every
  // 100 ms, each released at the instant it was booked for.
  auto const first = std::min_element(h.completed.begin(), h.completed.end(), [](auto const& x, auto const& y) {
                       return x.at < y.at;
                     })->at;
  CHECK(first >= start + 1s);
  CHECK(first <= start + 1100ms);
  CHECK(h.admitted(0, first) == 5);
  for (int k = 1; k <= 20; ++k) {
    INFO("unit " << k << " after the burst");
    CHECK(h.admitted(0, first + k * 100ms - 1ms) <= static_cast<std::size_t>(4 + k));
    CHECK(h.admitted(0, first + k * 100ms + 1ms) >= static_cast<std::size_t>(5 + k));
  }
  CHECK(h.pace->bookings >= 20);
  // Every ask after the hold was granted: booked, never refused and asked again.
  CHECK(h.playback(0).fleet_waits <= 1); // at most the one ask that met the hold
  CHECK(h.pace->acquires == static_cast<int>(h.playback(0).fleet_grants + h.playback(0).fleet_waits));
}

TEST_CASE("shared pace: the fleet's refill is kept second by second, and no request goes before the hold ends") {
  fleet_harness h(2);
  auto const start = h.now();
  h.gates[0]->observe("playback", refused(600, 2s));
  h.gates[1]->observe("playback", refused(600, 2s));
  CHECK(h.pace->holds == 2);
  CHECK(h.pace->limits == 2);
  for (int i = 0; i < 60; ++i) {
    h.spawn(static_cast<std::size_t>(i % 2));
  }
  h.run_for(8s);
  auto both = [&](wandura::clock::duration since) {
    return h.admitted(0, start + since) + h.admitted(1, start + since);
  };
  CHECK(both(1990ms) == 0);
  for (int s = 3; s <= 7; ++s) {
    auto const got = static_cast<double>(both(std::chrono::seconds(s)));
    INFO("after " << s << " s: " << got);
    CHECK(got >= 10.0 * (s - 2) - 1);
    CHECK(got <= 10.0 * (s - 2) + 6);
  }
  CHECK(h.playback(0).fleet_grants + h.playback(1).fleet_grants == 60);
  CHECK(h.playback(0).fleet_failures == 0);
  auto const text = h.gates[0]->metrics_text();
  CHECK(text.find("wandura_gate_fleet_total{counter=\"playback\",outcome=\"granted\"} " +
                  std::to_string(h.playback(0).fleet_grants) + "\n") != std::string::npos);
}

TEST_CASE("shared pace: a hold published by one gate delays the requests of another that saw no 429") {
  fleet_harness h(2);
  auto const start = h.now();
  h.spawn(1); // gate B in use: admitted at once, and its first read of the fleet's view finds nothing
  h.settle();
  REQUIRE(h.completed.size() == 1);
  CHECK_FALSE(h.gates[1]->congested("playback"));

  h.gates[0]->observe("playback", refused(600, 3s)); // gate A: a 429, held 3 s
  CHECK(h.pace->holds == 1);
  h.run_for(150ms); // B's next read is due 100 ms after its last
  h.spawn(1);       // starts the read (admitted at once, or held with the rest if the read answers at once)
  h.settle();
  CHECK(h.gates[1]->congested("playback"));
  CHECK(h.playback(1).fleet_congestions == 1);
  CHECK(h.gates[1]->held_until("playback") >= start + 2990ms);
  CHECK(h.gates[1]->held_until("playback") <= start + 3010ms);

  h.spawn(1, 2s); // the fleet's hold outlasts its deadline: refused at once
  h.settle();
  REQUIRE_FALSE(h.completed.empty());
  CHECK(h.completed.back().result.verdict == admission_verdict::deadline_exceeded);
  CHECK(h.completed.back().at == start + 150ms);
  h.spawn(1); // queued behind the fleet's hold
  h.run_for(3s);
  REQUIRE(h.completed.size() == 4);
  auto const held_back = std::count_if(h.completed.begin(), h.completed.end(), [&](auto const& d) {
    return d.result.admitted() && d.at > start + 150ms && d.at < start + 3s;
  });
  CHECK(held_back == 0); // nothing B admitted after it learnt of the hold went before the hold's end
  CHECK(h.admitted(1, start + 3010ms) >= 2);
}

TEST_CASE("shared pace: a gate learns of a 429 another gate saw within a few hundred ms, while in use") {
  fleet_harness h(2);
  h.spawn(1);
  h.settle();
  h.gates[0]->observe("playback", refused(600, 0ms)); // a 429 without a hold: congestion only
  auto const refused_at = h.now();
  // B sends a request every 20 ms; it learns at its first request after the next read is due.
  while (!h.gates[1]->congested("playback") && h.now() - refused_at < 1s) {
    h.spawn(1);
    h.run_for(20ms);
  }
  CHECK(h.gates[1]->congested("playback"));
  CHECK(h.now() - refused_at <= 250ms);
  CHECK(h.playback(1).limit == 600); // and the limit A learnt
}

TEST_CASE("shared pace: a failing shared pace leaves each gate pacing alone, at its own refill") {
  fleet_harness h(1);
  h.pace->failing = true;
  auto const start = h.now();
  h.gates[0]->observe("playback", refused(600, 1s));
  for (int i = 0; i < 50; ++i) {
    h.spawn(0);
  }
  h.run_for(4s);
  // As without a shared pace: held 1 s, then the 0.5 s burst and 10/s.
  auto const got = h.admitted(0, start + 4s);
  CHECK(got >= 30);
  CHECK(got <= 36);
  CHECK(h.playback(0).fleet_failures >= 1);
  CHECK(h.playback(0).fleet_failures <= 4); // one failure sets it aside for 1 s: not one per request
  CHECK(h.playback(0).fleet_grants == 0);
}

TEST_CASE("shared pace: a stalled shared pace costs a queued request at most the grant timeout") {
  fleet_harness h(1);
  h.pace->stalled = true;
  auto const start = h.now();
  h.gates[0]->observe("playback", refused(600, 1s));
  h.spawn(0);
  h.spawn(0, 1100ms); // its local turn is at the hold's end: it must not outwait its deadline for the fleet
  h.run_for(1500ms, 5ms);
  REQUIRE(h.completed.size() == 2);
  for (auto const& d : h.completed) {
    CHECK(d.result.admitted());
    CHECK(d.at >= start + 1s);
    CHECK(d.at <= start + 1s + 60ms); // the 50 ms grant timeout, then the local pace
  }
  CHECK(h.playback(0).fleet_failures == 1);
}

TEST_CASE("shared pace: a request cancelled or past its deadline while a grant is asked for leaves the queue") {
  fleet_harness h(1);
  h.pace->stalled = true;
  auto const start = h.now();
  h.gates[0]->observe("playback", refused(600, 0ms));
  h.spawn(0, 20ms); // the grant for it is in flight when its deadline comes
  asio::cancellation_signal cancel;
  h.spawn(0, 60s, &cancel);
  h.run_for(15ms, 5ms);
  cancel.emit(asio::cancellation_type::terminal);
  h.settle();
  h.run_for(15ms, 5ms);
  REQUIRE(h.completed.size() == 2);
  CHECK(h.completed[0].result.verdict == admission_verdict::cancelled);
  CHECK(h.completed[0].at == start + 15ms);
  CHECK(h.completed[1].result.verdict == admission_verdict::deadline_exceeded);
  CHECK(h.completed[1].at == start + 20ms);
  CHECK(h.playback(0).queued_play == 0);
}

TEST_CASE("shared pace: sheds alone never hold plays for the fleet, even with the limit known") {
  fleet_harness h(2);
  h.gates[0]->set_limit("playback", {600, 60s, wandura::refill_kind::continuous});
  counter_feedback shed;
  shed.status = 200;
  shed.granted = 1;
  shed.shed = 2;
  shed.retry_after = 3s;
  h.gates[0]->observe("playback", shed); // congested, under the reserve: the server still grants plays
  REQUIRE(h.gates[0]->congested("playback"));
  for (int i = 0; i < 40; ++i) {
    h.spawn(0);
  }
  h.run_for(1s);
  CHECK(h.admitted(0, h.now()) == 40); // as the gate alone would: no fleet grant asked for
  CHECK(h.pace->acquires == 0);
  CHECK(h.playback(0).fleet_grants == 0);
}

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
