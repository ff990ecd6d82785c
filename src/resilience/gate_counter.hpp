// One rate-limit counter of the admission gate: its learnt limit and pacing rate, the room it may release, its
// queues of waiting requests, and the timers that release them. Private to the gate (admission_gate.hpp describes
// the behaviour); every member function takes the counter's lock itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "wandura/resilience/admission_gate.hpp"

namespace wandura::detail {

/// A request queued at the gate. `complete` posts the awaiting coroutine's handler; it is called once, by whoever
/// removed the waiter from the queue under the counter's lock (a release, its deadline, its cancellation, close).
struct gate_waiter {
  request_class cls = request_class::play;
  std::uint32_t cost = 1;
  clock::time_point enqueued;
  clock::time_point deadline;
  std::function<void(admission)> complete;
  bool done = false;
  std::list<std::shared_ptr<gate_waiter>>::iterator in_queue;
  std::multimap<clock::time_point, gate_waiter*>::iterator in_deadlines;
};

class gate_counter : public std::enable_shared_from_this<gate_counter> {
public:
  gate_counter(std::string name, refill_kind refill, std::shared_ptr<wandura::clock> clock,
               std::shared_ptr<admission_gate_options const> options);

  [[nodiscard]] std::string const& name() const noexcept { return name_; }

  /// The uncongested fast path reads only this.
  [[nodiscard]] bool congested() const noexcept { return congested_.load(std::memory_order_acquire); }
  [[nodiscard]] bool under_reserve(clock::time_point now) const noexcept;
  /// The end of the current 429 hold-off (no release before it); `time_point::min()` when uncongested.
  [[nodiscard]] clock::time_point held_until() const;

  /// Decides a request at once when it can be (admitted with room and nobody ahead, shed, past its deadline, or the
  /// counter calmed down); nullopt when it must queue.
  [[nodiscard]] std::optional<admission> decide_now(request_class cls, std::uint32_t cost, clock::time_point deadline);

  /// Queues `waiter` (its `complete` set) and releases what can go; `executor` runs the release timers.
  void enqueue(std::shared_ptr<gate_waiter> const& waiter, asio::any_io_executor const& executor);

  /// Removes `waiter` if still queued and completes it with `cancelled`.
  void cancel(gate_waiter& waiter);

  void observe(counter_feedback const& feedback);
  void set_limit(rate_limit limit);

  /// Completes every queued request with `cancelled`; later timers do nothing.
  void close();

  [[nodiscard]] admission_counter_stats stats() const;

private:
  friend struct admission_gate_probe;
  /// Work gathered under the lock and done after it is released: completions post, hooks run user code, timers
  /// start coroutines.
  struct after_unlock {
    std::vector<std::pair<std::function<void(admission)>, admission>> completions;
    std::vector<admission_wait_event> long_waits;
    std::vector<std::pair<clock::time_point, asio::any_io_executor>> alarms;
  };
  using lock_type = std::unique_lock<std::mutex>;

  [[nodiscard]] double refill_per_s() const noexcept;
  [[nodiscard]] double burst_cap() const noexcept;
  void enter_congestion(clock::time_point now, bool refused);
  void on_refused(clock::time_point now, counter_feedback const& feedback);
  void on_shed(clock::time_point now, counter_feedback const& feedback);
  void on_granted(std::uint32_t units);
  void bring_room_up_to(clock::time_point now);
  /// Whether releases are paced: the limit is known, or a 429 refused a request since the counter congested. A
  /// counter that has only shed prefetches, limit unknown, drops prefetches but lets plays through.
  [[nodiscard]] bool paces() const noexcept;
  [[nodiscard]] bool has_room(std::uint32_t cost) const noexcept;
  void take(std::uint32_t cost, clock::time_point now);
  [[nodiscard]] clock::time_point release_time(std::uint32_t cost, clock::time_point now) const;
  [[nodiscard]] bool maybe_calm(clock::time_point now);
  [[nodiscard]] gate_waiter* head() const noexcept;
  void finish(gate_waiter& waiter, admission_verdict verdict, clock::time_point now, after_unlock& out);
  void record_wait(clock::duration waited);
  void pump(clock::time_point now, after_unlock& out);
  void arm(clock::time_point when, after_unlock& out);
  void run(after_unlock& out);
  static void start_alarm(std::weak_ptr<gate_counter> weak_counter, clock::time_point when,
                          asio::any_io_executor const& executor);

  std::string const name_;
  std::shared_ptr<wandura::clock> const clock_;
  std::shared_ptr<admission_gate_options const> const options_;
  std::atomic<bool> congested_{false};
  /// Steady-clock ticks until which prefetches are shed locally (read without the lock by `under_reserve`).
  std::atomic<clock::duration::rep> reserve_until_{0};

  mutable std::mutex mutex_;
  refill_kind refill_;
  std::uint32_t limit_ = 0;
  std::chrono::seconds window_{60};
  bool closed_ = false;
  bool refused_ = false; ///< A 429 refused a request since the counter congested.
  double rate_ = 0;                ///< Units per second released while congested.
  double room_ = 0;                ///< Units that may be released now; negative after a request larger than it.
  clock::time_point room_at_{};    ///< When `room_` was last brought up to date.
  clock::time_point hold_until_{}; ///< No release before (a 429's Retry-After).
  std::optional<clock::time_point> next_window_; ///< Start of the next fixed window, once a 429 told it.
  clock::time_point last_pressure_{};            ///< Last 429 or shed.
  clock::time_point last_decrease_{};
  std::list<std::shared_ptr<gate_waiter>> plays_;
  std::list<std::shared_ptr<gate_waiter>> prefetches_;
  std::multimap<clock::time_point, gate_waiter*> deadlines_;
  std::multiset<clock::time_point> alarms_; ///< Wake-ups of timers still pending.
  asio::any_io_executor executor_;          ///< Of the latest queued request; runs the timers.

  // Statistics (under the lock).
  std::uint64_t released_ = 0;
  std::uint64_t waited_ = 0;
  std::uint64_t shed_ = 0;
  std::uint64_t deadline_exceeded_ = 0;
  std::uint64_t cancelled_ = 0;
  std::uint64_t decreases_ = 0;
  std::array<std::uint64_t, wait_buckets_s.size() + 1> wait_hist_{}; ///< Per bucket, not cumulative; last: +Inf.
  std::uint64_t wait_count_ = 0;
  double wait_sum_s_ = 0;
  std::int64_t second_ = 0; ///< Whole second (of the steady clock) `released_this_second_` belongs to.
  std::uint64_t released_this_second_ = 0;
  std::uint64_t released_previous_second_ = 0;
};

} // namespace wandura::detail
