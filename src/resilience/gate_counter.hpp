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
#include <tuple>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/strand.hpp>

#include "context_shutdown.hpp"
#include "wandura/resilience/admission_gate.hpp"

namespace wandura::detail {

/// A request queued at the gate. `complete` posts the awaiting coroutine's handler; it is called once, by whoever
/// removed the waiter from the queue under the counter's lock (a release, its deadline, its cancellation, close).
struct gate_waiter {
  request_class cls = request_class::play;
  std::uint32_t cost = 1;
  clock::time_point enqueued;
  clock::time_point deadline;
  /// When its call first asked (`admission_gate::admit`); nullopt: as it is queued.
  std::optional<clock::time_point> first_asked;
  /// Its place in its class's queue: `first_asked`, at most when it was queued.
  clock::time_point place;
  std::function<void(admission)> complete;
  /// The execution context `complete` posts to (its handler's executor's).
  asio::execution_context* context = nullptr;
  /// Where the request's coroutine runs: the counter's timers run there while it waits.
  asio::any_io_executor executor;
  bool done = false;
  std::list<std::shared_ptr<gate_waiter>>::iterator in_queue;
  std::multimap<clock::time_point, gate_waiter*>::iterator in_deadlines;
};

class gate_counter : public std::enable_shared_from_this<gate_counter>, public parked_handlers {
public:
  gate_counter(std::string name, refill_kind refill, std::shared_ptr<wandura::clock> clock,
               std::shared_ptr<admission_gate_options const> options);

  [[nodiscard]] std::string const& name() const noexcept { return name_; }

  /// The uncongested fast path reads only this: true while the counter is calm and no read of the fleet's view is
  /// due.
  [[nodiscard]] bool quiet() const noexcept { return flags_.load(std::memory_order_acquire) == 0; }
  [[nodiscard]] bool congested() const noexcept {
    return (flags_.load(std::memory_order_acquire) & congested_flag) != 0;
  }
  /// `congested()` as of `now`: a counter whose calm period has passed with nobody queued is calmed first (as the
  /// next request would calm it), so that readers between requests (`admission_gate::congested`, `held_until`,
  /// `stats`) do not see a congestion that has ended. One atomic load while uncongested; the lock otherwise.
  [[nodiscard]] bool congested_at(clock::time_point now);
  /// True (once) when a read of the fleet's view is due; the caller then starts it with `start_refresh`.
  [[nodiscard]] bool take_refresh() noexcept {
    return (flags_.fetch_and(~refresh_flag, std::memory_order_acq_rel) & refresh_flag) != 0;
  }
  /// Reads the fleet's view of the counter on `executor`, without waiting for it; the next read is due
  /// `shared_pace_refresh` after it completes.
  void start_refresh(asio::any_io_executor const& executor);
  [[nodiscard]] bool under_reserve(clock::time_point now) const noexcept;
  /// The end of the current 429 hold-off (no release before it); `time_point::min()` when uncongested (calmed as
  /// `congested_at` calms).
  [[nodiscard]] clock::time_point held_until();

  /// Decides a request at once when it can be (admitted with room and nobody ahead, shed, past its deadline, or the
  /// counter calmed down); nullopt when it must queue. `now`: the caller's reading of the clock, else read here.
  [[nodiscard]] std::optional<admission> decide_now(request_class cls, std::uint32_t cost, clock::time_point deadline,
                                                    std::optional<clock::time_point> now = std::nullopt);

  /// Queues `waiter` (its `complete` and `context` set) and releases what can go; `executor` runs the release
  /// timers. Registers the counter with `waiter.context`'s `context_shutdown` the first time it parks a handler
  /// of that context.
  void enqueue(std::shared_ptr<gate_waiter> const& waiter, asio::any_io_executor const& executor);
  /// Frees the queued requests of `context` unrun (their coroutines are destroyed with it); when the counter's
  /// timers ran there, moves them to the executor of a request still queued from another context. Any thread
  /// (`context_shutdown`).
  void abandon(asio::execution_context& context) noexcept override;

  /// Removes `waiter` if still queued and completes it with `cancelled`.
  void cancel(gate_waiter& waiter);

  /// `now`: the caller's reading of the clock, else read here.
  void observe(counter_feedback const& feedback, std::optional<clock::time_point> now = std::nullopt);
  void set_limit(rate_limit limit);

  /// Completes every queued request with `cancelled`; later timers do nothing.
  void close();

  /// The counter's statistics, calmed first as `congested_at` calms.
  [[nodiscard]] admission_counter_stats stats();

private:
  struct fleet_question;
  friend struct admission_gate_probe;
  /// One release timer, sleeping on its own strand of the context it runs on. Disarmed (when nobody waits any more
  /// or the counter closes), it is cancelled on that strand: a timer left sleeping through a long hold-off would keep
  /// the context's `run()` from returning after every request has gone (a client destroyed or shut down).
  struct release_timer {
    explicit release_timer(asio::any_io_executor const& executor) : strand(asio::make_strand(executor)) {}
    asio::strand<asio::any_io_executor> strand;
    asio::cancellation_signal signal; ///< On `strand` only, as `cancelled`.
    bool cancelled = false;
  };
  struct armed {
    asio::execution_context* context = nullptr;
    std::shared_ptr<release_timer> timer;
  };
  /// Work gathered under the lock and done after it is released: completions post, hooks run user code, timers
  /// start coroutines.
  struct after_unlock {
    std::vector<std::pair<std::function<void(admission)>, admission>> completions;
    std::vector<admission_wait_event> long_waits;
    std::vector<std::pair<clock::time_point, std::shared_ptr<release_timer>>> alarms;
    std::vector<std::shared_ptr<release_timer>> disarmed; ///< Timers to cancel: nobody waits for them any more.
    /// A fleet-wide grant to ask for: units, sequence number, where to run it.
    std::optional<std::tuple<std::uint32_t, std::uint64_t, asio::any_io_executor>> grant;
    /// A booking whose instant has come, to check against the fleet's view: sequence number, where to run it.
    std::optional<std::pair<std::uint64_t, asio::any_io_executor>> booking_check;
    /// A hold-off to publish: until, now (wall clock).
    std::optional<std::pair<std::chrono::system_clock::time_point, std::chrono::system_clock::time_point>> hold;
    std::optional<rate_limit> limit; ///< A limit to publish.
  };
  using lock_type = std::unique_lock<std::mutex>;

  [[nodiscard]] double refill_per_s() const noexcept;
  [[nodiscard]] double burst_cap() const noexcept;
  void enter_congestion(clock::time_point now, bool refused);
  void on_refused(clock::time_point now, counter_feedback const& feedback);
  void on_shed(clock::time_point now, counter_feedback const& feedback);
  void on_granted(std::uint32_t units, clock::time_point now);
  /// Paced at the refill of a continuous counter's known limit (not by a fleet's grants), with requests queued, and
  /// no refusal or shed for `calm_period`: the rate may grow past the refill (`on_granted`).
  [[nodiscard]] bool probing(clock::time_point now) const noexcept;
  /// A rate past the refill (a probe) comes down to it.
  void cap_at_refill() noexcept;
  void bring_room_up_to(clock::time_point now);
  /// Whether releases are paced: the limit is known, or a 429 refused a request since the counter congested. A
  /// counter that has only shed prefetches, limit unknown, drops prefetches but lets plays through.
  [[nodiscard]] bool paces() const noexcept;
  /// After the limit was told (`changed`: to another refill): a rate guessed while the limit was unknown becomes the
  /// refill; a rate above a changed refill comes down to it; slow start ends.
  void limit_learnt(bool changed) noexcept;
  [[nodiscard]] bool has_room(std::uint32_t cost) const noexcept;
  void take(std::uint32_t cost, clock::time_point now);
  [[nodiscard]] clock::time_point release_time(std::uint32_t cost, clock::time_point now) const;
  [[nodiscard]] bool maybe_calm(clock::time_point now);
  [[nodiscard]] gate_waiter* head() const noexcept;
  void finish(gate_waiter& waiter, admission_verdict verdict, clock::time_point now, after_unlock& out);
  /// The last request queued from `context` has left: its timers are cancelled (they are not waited for) and, when
  /// they ran there, the timers run on the executor of a request still queued from now on; `pump` re-arms there.
  void left_context(asio::execution_context* context, after_unlock& out);
  /// When the timers run on `context`, they run on the executor of the queue's head from now on (none when empty).
  void move_timers_off(asio::execution_context const* context);
  using queued_counts = std::vector<std::pair<asio::execution_context*, std::size_t>>;
  [[nodiscard]] queued_counts::iterator queued_from(asio::execution_context const* context);
  void record_wait(clock::duration waited);
  void pump(clock::time_point now, after_unlock& out);
  void arm(clock::time_point when, after_unlock& out);
  /// Forgets every pending timer and has it cancelled once unlocked.
  void disarm(after_unlock& out);
  void run(after_unlock& out);
  static void start_alarm(std::weak_ptr<gate_counter> weak_counter, clock::time_point when,
                          std::shared_ptr<release_timer> timer);

  // The fleet's shared pace (src/resilience/gate_counter_fleet.cpp).
  [[nodiscard]] wandura::shared_pace* fleet() const noexcept { return options_->shared_pace.get(); }
  /// Whether releases need a fleet-wide grant now: a shared pace, pacing, and not left aside after a failure.
  [[nodiscard]] bool uses_fleet(clock::time_point now) const noexcept;
  /// True when the fleet granted `cost` units; takes them. False: a grant is asked for (or awaited) first.
  [[nodiscard]] bool fleet_paid(std::uint32_t cost, clock::time_point now, after_unlock& out);
  /// When the head that waits for the fleet should be looked at again.
  [[nodiscard]] clock::time_point fleet_wake() const noexcept;
  void fleet_answered(std::uint64_t seq, std::uint32_t units, std::optional<shared_pace_grant> const& grant,
                      after_unlock& out);
  /// The fleet's view read at a booking's instant: a hold published since the booking applies first, then the
  /// booked units become credit.
  void booking_checked(std::uint64_t seq, std::optional<shared_pace_view> const& view, after_unlock& out);
  void fleet_failed(clock::time_point now);
  /// A fraction in [0, 1), different in every process: the spread of asks after the fleet refused.
  [[nodiscard]] double next_jitter() noexcept;
  /// `fraction` of one unit's refill (at the counter's limit, else its pacing rate), at most 1 s.
  [[nodiscard]] clock::duration unit_fraction(double fraction) const noexcept;
  /// How long after a booked instant its units are used: a quarter of a unit's refill (at most 1 s).
  [[nodiscard]] clock::duration booking_margin() const noexcept;
  /// Up to one unit's refill, at a random point (`next_jitter`): how long after it may a process ask again.
  [[nodiscard]] clock::duration ask_spread() noexcept;
  void publish_hold(clock::time_point now, after_unlock& out);
  void publish_limit(after_unlock& out);
  void apply_view(shared_pace_view const& view, after_unlock& out);
  [[nodiscard]] std::chrono::system_clock::time_point to_system(clock::time_point t) const noexcept;
  [[nodiscard]] clock::time_point to_steady(std::chrono::system_clock::time_point t, clock::time_point now) const;
  static void start_grant(std::weak_ptr<gate_counter> weak_counter, std::uint32_t units, std::uint64_t seq,
                          asio::any_io_executor const& executor);
  static void start_booking_check(std::weak_ptr<gate_counter> weak_counter, std::uint64_t seq,
                                  asio::any_io_executor const& executor);

  std::string const name_;
  std::shared_ptr<wandura::clock> const clock_;
  std::shared_ptr<admission_gate_options const> const options_;
  static constexpr unsigned congested_flag = 1;
  static constexpr unsigned refresh_flag = 2;
  /// `congested_flag` while congested; `refresh_flag` while a read of the fleet's view is due (never without a
  /// shared pace). Both clear: the uncongested fast path.
  std::atomic<unsigned> flags_{0};
  /// Steady-clock ticks until which prefetches are shed locally (read without the lock by `under_reserve`).
  std::atomic<clock::duration::rep> reserve_until_{0};

  mutable std::mutex mutex_;
  refill_kind refill_;
  std::uint32_t limit_ = 0;
  std::chrono::seconds window_{60};
  bool closed_ = false;
  bool refused_ = false;           ///< A 429 refused a request since the counter congested.
  double rate_ = 0;                ///< Units per second released while congested.
  bool rate_guessed_ = false;      ///< `rate_` is `unknown_limit_rate`, set while the limit was unknown.
  bool slow_start_ = false;        ///< Paced at a guess, nothing cut since: grants double the rate (`on_granted`).
  double room_ = 0;                ///< Units that may be released now; negative after a request larger than it.
  clock::time_point room_at_{};    ///< When `room_` was last brought up to date.
  clock::time_point hold_until_{}; ///< No release before (a 429's Retry-After).
  std::optional<clock::time_point> next_window_; ///< Start of the next fixed window, once a 429 told it.
  clock::time_point last_pressure_{};            ///< Last 429 or shed.
  clock::time_point last_decrease_{};
  /// When the hold-off of the last cut (or of the 429 that started pacing) ends: a 429 before it does not cut.
  clock::time_point cut_hold_end_{};
  std::list<std::shared_ptr<gate_waiter>> plays_;
  std::list<std::shared_ptr<gate_waiter>> prefetches_;
  std::multimap<clock::time_point, gate_waiter*> deadlines_;
  /// Wake-ups of timers still pending, with the context each runs on.
  std::multimap<clock::time_point, armed> alarms_;
  /// Of the latest queued request, or of a request still queued once none is queued from the latest one's context
  /// (`left_context`); runs the timers.
  asio::any_io_executor executor_;
  /// How many requests are queued from each context (a few contexts at most): the timers run on a context with a
  /// request queued, never on one whose requests have all left (which may have stopped running since).
  queued_counts queued_on_;
  asio::execution_context* parked_on_ = nullptr; ///< The context last registered with (`context_shutdown`).

  // The fleet's shared pace (under the lock; unused without one).
  double fleet_credit_ = 0;               ///< Units the fleet granted that no release has used yet.
  double fleet_booked_ = 0;               ///< Units the fleet booked for `fleet_wait_until_`: credit once checked then.
  bool grant_in_flight_ = false;          ///< A grant is being asked for, or a booking checked.
  std::uint64_t grant_seq_ = 0;           ///< Of the latest grant asked for: a late answer is dropped.
  clock::time_point grant_deadline_{};    ///< When the grant in flight is given up on.
  clock::time_point fleet_wait_until_{};  ///< The fleet refused, or booked: no grant asked for before.
  clock::time_point fleet_aside_until_{}; ///< After a failure: pace alone until then.
  clock::time_point published_hold_{};    ///< The latest hold-off published.
  clock::time_point published_at_{};      ///< When it was published.
  rate_limit published_limit_{};          ///< The latest limit published (or read from the fleet).
  std::uint64_t jitter_ = 0;              ///< State of the xorshift that spreads asks after a refusal.

  // Statistics (under the lock).
  std::uint64_t released_ = 0;
  std::uint64_t waited_ = 0;
  std::uint64_t shed_ = 0;
  std::uint64_t deadline_exceeded_ = 0;
  std::uint64_t cancelled_ = 0;
  std::uint64_t decreases_ = 0;
  std::uint64_t fleet_grants_ = 0;
  std::uint64_t fleet_waits_ = 0;
  std::uint64_t fleet_failures_ = 0;
  std::uint64_t fleet_congestions_ = 0;
  std::array<std::uint64_t, wait_buckets_s.size() + 1> wait_hist_{}; ///< Per bucket, not cumulative; last: +Inf.
  std::uint64_t wait_count_ = 0;
  double wait_sum_s_ = 0;
  std::int64_t second_ = 0; ///< Whole second (of the steady clock) `released_this_second_` belongs to.
  std::uint64_t released_this_second_ = 0;
  std::uint64_t released_previous_second_ = 0;
};

} // namespace wandura::detail
