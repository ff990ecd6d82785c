// The shared pace's unit tests' fleet (shared_pace_test.cpp, shared_pace_booking_test.cpp): an in-memory shared
// pace that keeps one GCRA per counter as the Redis one does, and gates standing for the processes of a fleet on one
// hand-stepped clock.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/shared_pace.hpp"
#include "wandura/testing/manual_clock.hpp"

namespace shared_pace_testing {

using namespace std::chrono_literals;
using std::chrono::system_clock;
using wandura::admission;
using wandura::admission_verdict;
using wandura::counter_feedback;
using wandura::request_class;

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

inline counter_feedback refused(std::uint32_t limit_per_min, std::chrono::milliseconds retry_after) {
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

} // namespace shared_pace_testing
