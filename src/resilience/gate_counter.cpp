#include "gate_counter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>

namespace wandura::detail {
namespace {

using std::chrono::duration_cast;
using seconds_d = std::chrono::duration<double>;

constexpr std::chrono::hours max_hold{1};

double to_seconds(clock::duration d) noexcept {
  return duration_cast<seconds_d>(d).count();
}

clock::duration from_seconds(double s) noexcept {
  constexpr double max_s = 3600.0 * 24;
  return duration_cast<clock::duration>(seconds_d(std::clamp(s, 0.0, max_s)));
}

std::int64_t whole_second(clock::time_point t) noexcept {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

} // namespace

gate_counter::gate_counter(std::string name, refill_kind refill, std::shared_ptr<wandura::clock> clock,
                           std::shared_ptr<admission_gate_options const> options)
    : name_(std::move(name)), clock_(std::move(clock)), options_(std::move(options)),
      flags_(options_->shared_pace ? refresh_flag : 0U), refill_(refill) {}

bool gate_counter::congested_at(clock::time_point now) {
  if (!congested()) {
    return false;
  }
  lock_type lock(mutex_);
  (void)maybe_calm(now);
  return congested();
}

clock::time_point gate_counter::held_until() {
  if (!congested()) {
    return clock::time_point::min();
  }
  lock_type lock(mutex_);
  return maybe_calm(clock_->now()) ? clock::time_point::min() : hold_until_;
}

bool gate_counter::under_reserve(clock::time_point now) const noexcept {
  return congested() && now.time_since_epoch().count() < reserve_until_.load(std::memory_order_acquire);
}

double gate_counter::refill_per_s() const noexcept {
  return limit_ > 0 ? static_cast<double>(limit_) / static_cast<double>(window_.count()) : 0.0;
}

/// Largest room a continuous counter accumulates while congested: `burst` of the pacing rate, at least one unit.
double gate_counter::burst_cap() const noexcept {
  if (refill_ == refill_kind::fixed_window && next_window_) {
    return std::max(rate_ * static_cast<double>(window_.count()), 1.0);
  }
  auto const burst_s = std::chrono::duration<double>(options_->burst).count();
  return std::max(rate_ * burst_s, 1.0);
}

void gate_counter::enter_congestion(clock::time_point now, bool refused) {
  if (congested()) {
    return;
  }
  double const refill = refill_per_s();
  rate_ = refill > 0 ? refill : options_->unknown_limit_rate;
  rate_guessed_ = refill <= 0;
  slow_start_ = rate_guessed_;
  // After a 429 the server has no room: it returns at the refill rate. After a shed the server still grants plays,
  // so a burst of plays may go at once.
  room_ = refused ? 0.0 : burst_cap();
  room_at_ = now;
  last_decrease_ = now;
  flags_.fetch_or(congested_flag, std::memory_order_acq_rel);
}

void gate_counter::on_refused(clock::time_point now, counter_feedback const& feedback) {
  // Pacing is what a 429 starts (paces()): a counter congested by sheds alone was not pacing plays, and its first
  // 429 has nothing to cut.
  bool const starts_pacing = !refused_;
  enter_congestion(now, true);
  refused_ = true;
  if (starts_pacing && rate_guessed_) {
    // Pacing starts from the guess, whatever sheds did to the rate before: nothing to cut yet (`slow_start_`).
    rate_ = options_->unknown_limit_rate;
    slow_start_ = true;
    last_decrease_ = now;
  }
  bring_room_up_to(now);
  room_ = std::min(room_, 0.0); // no room now; a debt from an oversized request stays
  // Without a Retry-After there is no hold-off: room returns at the refill rate, which the pacing follows.
  auto const hold =
      feedback.retry_after ? std::min<clock::duration>(*feedback.retry_after, max_hold) : clock::duration::zero();
  hold_until_ = std::max(hold_until_, now + hold);
  if (refill_ == refill_kind::fixed_window && feedback.retry_after) {
    next_window_ = now + hold; // a fixed window's Retry-After is the rest of the window
    room_ = 0;
  }
  // One cut per hold-off: the 429s that arrive before the last cut's hold-off ends are of requests in flight as it
  // was made, and tell the same thing once; one after it is of a request released at the cut rate, which the server
  // still refused. Measured against that hold-off, not this 429's own: a longer Retry-After from a server refusing
  // again must still cut.
  bool const cut = !starts_pacing && now >= cut_hold_end_ && now - last_decrease_ >= std::chrono::seconds(1);
  if (cut) {
    // Of the refill, or while the limit is unknown of the rate assumed for it: a fixed floor either way (one
    // relative to the current rate would let a run of 429s cut the rate towards zero).
    double const refill = refill_per_s();
    double const floor = (refill > 0 ? refill : options_->unknown_limit_rate) * options_->min_rate_fraction;
    rate_ = std::max(rate_ * options_->decrease, floor);
    slow_start_ = false;
    last_decrease_ = now;
    ++decreases_;
  }
  if (starts_pacing || cut) { // the next cut is at least a second later, and after this hold-off
    cut_hold_end_ = hold_until_;
    last_decrease_ = now;
  }
  cap_at_refill(); // a probe past the refill (`on_granted`) has found its end, cut or not
  last_pressure_ = now;
}

void gate_counter::on_shed(clock::time_point now, counter_feedback const& feedback) {
  enter_congestion(now, false);
  // A shed item's retry_after is the time until the counter is back above its reserve (docs/protocol.md §1 details).
  auto const back_in = feedback.retry_after ? std::min<clock::duration>(*feedback.retry_after, max_hold)
                                            : clock::duration(std::chrono::seconds(1));
  auto const until = now + back_in;
  auto const ticks = until.time_since_epoch().count();
  if (ticks > reserve_until_.load(std::memory_order_relaxed)) {
    reserve_until_.store(ticks, std::memory_order_release);
  }
  cap_at_refill(); // under its reserve: no room for a probe to find
  last_pressure_ = now;
}

bool gate_counter::probing(clock::time_point now) const noexcept {
  // Not for a fixed window (its allowance is the rate times the window: a probe there would release a multiple of
  // it at each window's start), nor while the fleet's grants pace the counter (they keep to the published limit: a
  // probe would only grow a rate nothing uses, which floods once the fleet is set aside).
  double const refill = refill_per_s();
  return refill > 0 && paces() && refill_ == refill_kind::continuous && !uses_fleet(now) &&
         rate_ >= refill * (1 - 1e-9) && now - last_pressure_ >= options_->calm_period &&
         (!plays_.empty() || !prefetches_.empty());
}

void gate_counter::cap_at_refill() noexcept {
  if (double const refill = refill_per_s(); refill > 0 && rate_ > refill) {
    rate_ = refill;
  }
}

void gate_counter::on_granted(std::uint32_t units, clock::time_point now) {
  if (!paces()) {
    return; // only shed so far: plays are not paced, and the rate is the refill (or the guess) until they are
  }
  // Growth per second of grants at the current rate:
  // - additive, `increase` of the refill, up to the refill: the AIMD that lets several senders settle on shares;
  // - while the limit is unknown, `increase` of the rate itself; and in slow start (paced at the guess, nothing
  //   refused since) the whole rate, doubling it: a 429 without the rate-limit headers (a proxy that drops them)
  //   must not leave a counter paced at the 1/s guess when the server has room for far more;
  // - probing (`probing`): `increase` of the rate, past the refill. Paced at the learnt refill for `calm_period`
  //   without a refusal or a shed, with requests still queued, the counter may have more room than it learnt (its
  //   limit raised: only a 429 or `GET /v1/config` would say so, and pacing under it draws no 429): the rate grows
  //   until a 429 cuts it back to the refill, or its limit (from the 429's headers) replaces it.
  double const refill = refill_per_s();
  bool const past_refill = probing(now);
  double step = options_->increase * (refill > 0 && !past_refill ? refill : rate_);
  if (slow_start_ && options_->increase > 0) {
    step = rate_;
  }
  rate_ += step * static_cast<double>(units) / std::max(rate_, 1e-3);
  if (!past_refill) {
    cap_at_refill();
  }
}

void gate_counter::bring_room_up_to(clock::time_point now) {
  if (now <= room_at_) {
    return;
  }
  if (refill_ == refill_kind::fixed_window && next_window_) {
    if (now >= *next_window_) {
      auto const window = duration_cast<clock::duration>(window_);
      while (*next_window_ <= now) {
        *next_window_ += window;
      }
      room_ = burst_cap(); // the window's whole allowance at its start
    }
  } else if (double const cap = burst_cap(); room_ < cap) {
    room_ = std::min(room_ + rate_ * to_seconds(now - room_at_), cap);
  }
  room_at_ = now;
}

void gate_counter::limit_learnt(bool changed) noexcept {
  double const refill = refill_per_s();
  if (refill <= 0) {
    return;
  }
  // A congestion that began before the limit was known (a shed without rate-limit headers) paces at a guess; the
  // limit replaces it, or the guess (1/s by default) would starve plays long after the limit is known. A new limit
  // under the rate caps it; the same limit told again leaves a probe past it (`on_granted`) to the next 429.
  slow_start_ = false;
  if (std::exchange(rate_guessed_, false) || (changed && rate_ > refill)) {
    rate_ = refill;
  }
}

bool gate_counter::paces() const noexcept {
  // Only once the server refused for rate: after sheds alone it still grants plays, from room the gate cannot see
  // (the server's bucket, up to a minute's limit), so pacing plays then only makes them wait (measured at 4000/min:
  // play p95 13 s and 16 plays past their deadline when sheds paced plays at the refill, p99 4.2 s and none without).
  return refused_;
}

bool gate_counter::has_room(std::uint32_t cost) const noexcept {
  if (!paces()) {
    return true; // only shed so far: plays are still granted
  }
  // A request larger than the cap goes when the room is full, leaving a debt the next ones wait for.
  return room_ >= std::min(static_cast<double>(cost), burst_cap()) - 1e-9;
}

void gate_counter::take(std::uint32_t cost, clock::time_point now) {
  if (paces()) {
    room_ -= static_cast<double>(cost);
  }
  ++released_;
  auto const second = whole_second(now);
  if (second != second_) {
    released_previous_second_ = second == second_ + 1 ? released_this_second_ : 0;
    released_this_second_ = 0;
    second_ = second;
  }
  ++released_this_second_;
}

clock::time_point gate_counter::release_time(std::uint32_t cost, clock::time_point now) const {
  if (now < hold_until_) {
    return hold_until_;
  }
  if (refill_ == refill_kind::fixed_window && next_window_) {
    return *next_window_;
  }
  double const missing = std::min(static_cast<double>(cost), burst_cap()) - room_;
  // Rounded up to the next microsecond so that the room is there when the timer fires.
  return now + from_seconds(missing / std::max(rate_, 1e-6)) + std::chrono::microseconds(1);
}

bool gate_counter::maybe_calm(clock::time_point now) {
  if (!congested() || !plays_.empty() || !prefetches_.empty() || now < hold_until_ ||
      now - last_pressure_ < options_->calm_period) {
    return false;
  }
  flags_.fetch_and(~congested_flag, std::memory_order_acq_rel);
  reserve_until_.store(0, std::memory_order_release);
  refused_ = false;
  fleet_credit_ = 0;
  fleet_booked_ = 0;
  return true;
}

gate_waiter* gate_counter::head() const noexcept {
  if (!plays_.empty()) {
    return plays_.front().get();
  }
  return prefetches_.empty() ? nullptr : prefetches_.front().get();
}

std::optional<admission> gate_counter::decide_now(request_class cls, std::uint32_t cost, clock::time_point deadline,
                                                  std::optional<clock::time_point> given) {
  lock_type lock(mutex_);
  auto const now = given ? *given : clock_->now();
  if (closed_) {
    return admission{admission_verdict::cancelled, {}};
  }
  if (!congested() || maybe_calm(now)) {
    return admission{};
  }
  if (cls == request_class::prefetch && under_reserve(now)) {
    ++shed_;
    return admission{admission_verdict::shed, {}};
  }
  if (deadline <= now || hold_until_ >= deadline) { // past it, or the known hold-off outlasts it: no point waiting
    ++deadline_exceeded_;
    return admission{admission_verdict::deadline_exceeded, {}};
  }
  bring_room_up_to(now);
  bool const nobody_ahead = plays_.empty() && (cls == request_class::play || prefetches_.empty());
  // With a shared pace, only units the fleet already granted go at once; else the request queues for a grant.
  bool const paid = !uses_fleet(now) || fleet_credit_ + 1e-9 >= static_cast<double>(cost);
  if (nobody_ahead && now >= hold_until_ && has_room(cost) && paid) {
    if (uses_fleet(now)) {
      fleet_credit_ -= static_cast<double>(cost);
    }
    take(cost, now);
    return admission{};
  }
  return std::nullopt;
}

void gate_counter::enqueue(std::shared_ptr<gate_waiter> const& waiter, asio::any_io_executor const& executor) {
  after_unlock out;
  bool register_context = false;
  {
    lock_type lock(mutex_);
    auto const now = clock_->now();
    if (closed_ || !congested()) { // closed, or calmed down since `decide_now`
      auto const verdict = closed_ ? admission_verdict::cancelled : admission_verdict::admitted;
      out.completions.emplace_back(std::move(waiter->complete), admission{verdict, {}});
      waiter->done = true;
    } else {
      waiter->enqueued = now;
      if (auto counted = queued_from(waiter->context); counted == queued_on_.end()) {
        queued_on_.emplace_back(waiter->context, 1);
      } else {
        ++counted->second;
      }
      auto& queue = waiter->cls == request_class::play ? plays_ : prefetches_;
      // First come first served by when each call first asked: a retry goes before the requests that came after
      // its call's first. Found from the back: a first attempt (the most) goes there at once.
      waiter->place = waiter->first_asked ? std::min(*waiter->first_asked, now) : now;
      auto at = queue.end();
      while (at != queue.begin() && (*std::prev(at))->place > waiter->place) {
        --at;
      }
      waiter->in_queue = queue.insert(at, waiter);
      waiter->in_deadlines = deadlines_.emplace(waiter->deadline, waiter.get());
      waiter->executor = executor;
      executor_ = executor;
      register_context = waiter->context != nullptr && std::exchange(parked_on_, waiter->context) != waiter->context;
      pump(now, out);
    }
  }
  if (register_context) { // before anything else can run the handler: its completion is only posted
    try {
      context_shutdown::add(*waiter->context, weak_from_this());
    } catch (...) { // out of memory: only a teardown without running the context would leak
      lock_type lock(mutex_);
      parked_on_ = nullptr;
    }
  }
  run(out);
}

void gate_counter::abandon(asio::execution_context& context) noexcept {
  std::list<std::shared_ptr<gate_waiter>> freed; // spliced, not copied: nothing here allocates
  after_unlock out;
  {
    lock_type lock(mutex_);
    if (parked_on_ == &context) {
      parked_on_ = nullptr;
    }
    // Its timers will never fire: forgotten, so that `pump` arms others.
    std::erase_if(alarms_, [&](auto const& pending) { return pending.second.context == &context; });
    std::erase_if(queued_on_, [&](auto const& entry) { return entry.first == &context; });
    for (auto* queue : {&plays_, &prefetches_}) {
      for (auto it = queue->begin(); it != queue->end();) {
        auto next = std::next(it);
        if ((*it)->context == &context) {
          (*it)->done = true;
          deadlines_.erase((*it)->in_deadlines);
          freed.splice(freed.end(), *queue, it);
        }
        it = next;
      }
    }
    // Requests still queued from other contexts are released by timers on one of theirs from now on.
    move_timers_off(&context);
    if (executor_ && (!plays_.empty() || !prefetches_.empty())) {
      try {
        pump(clock_->now(), out);
      } catch (...) { // out of memory: they wait for the next request's pump
      }
    }
  }
  // Outside the lock: destroying a handler destroys its coroutine's frames, which may own the gate. The handler is
  // destroyed explicitly: its coroutine's cancellation slot holds the waiter too.
  for (auto const& waiter : freed) {
    waiter->complete = nullptr;
  }
  try {
    run(out);
  } catch (...) { // as above
  }
}

void gate_counter::cancel(gate_waiter& waiter) {
  after_unlock out;
  {
    lock_type lock(mutex_);
    if (waiter.done) {
      return;
    }
    auto const now = clock_->now();
    finish(waiter, admission_verdict::cancelled, now, out);
    pump(now, out); // a cancelled play may have been all that held the prefetches back
  }
  run(out);
}

void gate_counter::observe(counter_feedback const& feedback, std::optional<clock::time_point> given) {
  bool const refused = feedback.refused > 0 || (feedback.status == 429 && feedback.shed == 0);
  after_unlock out;
  {
    lock_type lock(mutex_);
    auto const now = given ? *given : clock_->now();
    bring_room_up_to(now);
    auto const refill_before = refill_per_s();
    if (feedback.limit && *feedback.limit > 0) {
      limit_ = *feedback.limit;
    }
    if (feedback.window && feedback.window->count() > 0) {
      window_ = *feedback.window;
    }
    publish_limit(out);
    if (refused) {
      on_refused(now, feedback);
      publish_hold(now, out);
    }
    if (feedback.shed > 0) {
      on_shed(now, feedback);
    }
    if (feedback.granted > 0 && congested()) {
      on_granted(feedback.granted, now);
    }
    limit_learnt(refill_per_s() != refill_before);
    pump(now, out);
  }
  run(out);
}

void gate_counter::set_limit(rate_limit limit) {
  if (limit.limit == 0 || limit.window.count() <= 0) {
    return;
  }
  after_unlock out;
  {
    lock_type lock(mutex_);
    auto const refill_before = refill_per_s();
    limit_ = limit.limit;
    window_ = limit.window;
    refill_ = limit.refill;
    limit_learnt(refill_per_s() != refill_before);
    publish_limit(out);
    if (congested()) {
      pump(clock_->now(), out);
    }
  }
  run(out);
}

void gate_counter::close() {
  after_unlock out;
  {
    lock_type lock(mutex_);
    closed_ = true;
    auto const now = clock_->now();
    while (auto* w = head()) {
      finish(*w, admission_verdict::cancelled, now, out);
    }
    disarm(out);
  }
  run(out);
}

void gate_counter::finish(gate_waiter& waiter, admission_verdict verdict, clock::time_point now, after_unlock& out) {
  waiter.done = true;
  auto const waited = now - waiter.enqueued;
  switch (verdict) {
  case admission_verdict::admitted: ++waited_; break; // `released_` counted by take()
  case admission_verdict::shed: ++shed_; break;
  case admission_verdict::deadline_exceeded: ++deadline_exceeded_; break;
  case admission_verdict::cancelled: ++cancelled_; break;
  }
  record_wait(waited);
  auto const queued_ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited);
  out.completions.emplace_back(std::move(waiter.complete), admission{verdict, waited});
  deadlines_.erase(waiter.in_deadlines);
  auto& queue = waiter.cls == request_class::play ? plays_ : prefetches_;
  auto keep = std::move(*waiter.in_queue); // the list node owns the waiter: erase it last
  queue.erase(waiter.in_queue);
  if (auto counted = queued_from(waiter.context); counted != queued_on_.end() && --counted->second == 0) {
    queued_on_.erase(counted);
    left_context(waiter.context, out);
  }
  if (options_->on_long_wait && queued_ms >= options_->long_wait) {
    out.long_waits.push_back({name_, keep->cls, verdict, queued_ms, plays_.size() + prefetches_.size()});
  }
}

void gate_counter::left_context(asio::execution_context* context, after_unlock& out) {
  for (auto it = alarms_.begin(); it != alarms_.end();) {
    if (it->second.context == context) {
      out.disarmed.push_back(std::move(it->second.timer));
      it = alarms_.erase(it);
    } else {
      ++it;
    }
  }
  move_timers_off(context);
}

void gate_counter::move_timers_off(asio::execution_context const* context) {
  if (executor_ && &context_of(executor_) == context) {
    auto const* next = head();
    executor_ = next != nullptr ? next->executor : asio::any_io_executor();
  }
}

auto gate_counter::queued_from(asio::execution_context const* context) -> queued_counts::iterator {
  return std::find_if(queued_on_.begin(), queued_on_.end(), [&](auto const& entry) { return entry.first == context; });
}

void gate_counter::record_wait(clock::duration waited) {
  double const s = to_seconds(waited);
  auto const bucket = std::lower_bound(wait_buckets_s.begin(), wait_buckets_s.end(), s) - wait_buckets_s.begin();
  ++wait_hist_[static_cast<std::size_t>(bucket)];
  ++wait_count_;
  wait_sum_s_ += s;
}

void gate_counter::pump(clock::time_point now, after_unlock& out) {
  if (closed_) {
    return;
  }
  bring_room_up_to(now);
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    finish(*deadlines_.begin()->second, admission_verdict::deadline_exceeded, now, out);
  }
  if (under_reserve(now)) {
    while (!prefetches_.empty()) {
      finish(*prefetches_.front(), admission_verdict::shed, now, out);
    }
  }
  if (grant_in_flight_ && now >= grant_deadline_) {
    fleet_failed(now); // the fleet did not answer in time: pace alone for a while
  }
  bool waits_for_fleet = false;
  if (now >= hold_until_) {
    while (auto* w = head()) {
      if (!has_room(w->cost)) {
        break;
      }
      if (!fleet_paid(w->cost, now, out)) {
        waits_for_fleet = true;
        break;
      }
      take(w->cost, now);
      finish(*w, admission_verdict::admitted, now, out);
    }
  }
  (void)maybe_calm(now);
  auto next = clock::time_point::max();
  if (!deadlines_.empty()) {
    next = deadlines_.begin()->first;
  }
  if (auto* w = head()) {
    next = std::min(next, waits_for_fleet ? fleet_wake() : release_time(w->cost, now));
  }
  if (next != clock::time_point::max()) {
    arm(next, out);
  } else if (head() == nullptr) {
    disarm(out); // nobody waits: no timer may keep the context busy until a hold-off ends
  }
}

void gate_counter::arm(clock::time_point when, after_unlock& out) {
  if ((!alarms_.empty() && alarms_.begin()->first <= when) || !executor_) {
    return; // an earlier timer is pending: it pumps and re-arms
  }
  auto timer = std::make_shared<release_timer>(executor_);
  alarms_.emplace(when, armed{&context_of(executor_), timer});
  out.alarms.emplace_back(when, std::move(timer));
}

void gate_counter::disarm(after_unlock& out) {
  for (auto& [when, pending] : alarms_) {
    out.disarmed.push_back(std::move(pending.timer));
  }
  alarms_.clear();
}

void gate_counter::run(after_unlock& out) {
  for (auto& [complete, result] : out.completions) {
    complete(result);
  }
  for (auto const& e : out.long_waits) {
    try {
      options_->on_long_wait(e);
    } catch (...) { // a throwing hook must not lose the other completions
    }
  }
  for (auto const& [when, timer] : out.alarms) {
    start_alarm(weak_from_this(), when, timer);
  }
  for (auto& timer : out.disarmed) {
    // On the timer's strand, as its start: whichever runs first, the timer never sleeps once disarmed.
    asio::post(timer->strand, [timer] {
      timer->cancelled = true;
      timer->signal.emit(asio::cancellation_type::terminal);
    });
  }
  if (auto* pace = fleet()) {
    if (out.hold) {
      pace->hold_until(name_, out.hold->first, out.hold->second);
    }
    if (out.limit) {
      pace->set_limit(name_, *out.limit);
    }
  }
  if (out.grant) {
    auto const& [units, seq, executor] = *out.grant;
    start_grant(weak_from_this(), units, seq, executor);
  }
  if (out.booking_check) {
    start_booking_check(weak_from_this(), out.booking_check->first, out.booking_check->second);
  }
}

void gate_counter::start_alarm(std::weak_ptr<gate_counter> weak_counter, clock::time_point when,
                               std::shared_ptr<release_timer> timer) {
  // The timer holds the counter weakly and the clock by pointer (alive while the counter is: the counter owns it):
  // a sleeping timer must not keep a destroyed gate's state, or a hand-stepped clock that owns the sleep, alive.
  auto wake = [](std::weak_ptr<gate_counter> weak, clock::time_point at,
                 std::shared_ptr<release_timer> self) -> asio::awaitable<void> {
    wandura::clock* clk = nullptr;
    if (auto counter = weak.lock()) {
      clk = counter->clock_.get();
    } else {
      co_return;
    }
    try {
      (void)co_await clk->sleep_until(at);
    } catch (std::system_error const&) { // cancelled with its io_context: the pump below is idempotent
    }
    if (self->cancelled) { // disarmed: forgotten by the counter already, and nobody waited for it
      co_return;
    }
    auto counter = weak.lock();
    if (!counter) {
      co_return;
    }
    after_unlock out;
    {
      lock_type lock(counter->mutex_);
      auto [first, last] = counter->alarms_.equal_range(at);
      auto const mine = std::find_if(first, last, [&](auto const& a) { return a.second.timer == self; });
      if (mine != last) { // else forgotten by `abandon` meanwhile
        counter->alarms_.erase(mine);
      }
      counter->pump(counter->clock_->now(), out);
    }
    counter->run(out);
  };
  // Started on the timer's strand, where it may be disarmed: the cancellation slot is bound and emitted there only.
  auto strand = timer->strand;
  asio::post(strand, [weak = std::move(weak_counter), when, timer = std::move(timer), wake]() mutable {
    if (timer->cancelled) {
      return;
    }
    auto slot = timer->signal.slot();
    auto executor = timer->strand;
    auto op = wake(std::move(weak), when, timer);
    // The handler keeps the signal alive until the coroutine's thread ends: its cancellation state lives in the slot.
    asio::co_spawn(executor, std::move(op), asio::bind_cancellation_slot(slot, [keep = timer](std::exception_ptr) {}));
  });
}

admission_counter_stats gate_counter::stats() {
  lock_type lock(mutex_);
  (void)maybe_calm(clock_->now());
  admission_counter_stats s;
  s.counter = name_;
  s.congested = congested();
  s.limit = limit_;
  s.window = window_;
  s.pacing_rate = congested() ? rate_ : 0.0;
  s.queued_play = plays_.size();
  s.queued_prefetch = prefetches_.size();
  s.released = released_;
  s.waited = waited_;
  s.shed = shed_;
  s.deadline_exceeded = deadline_exceeded_;
  s.cancelled = cancelled_;
  s.decreases = decreases_;
  s.fleet_grants = fleet_grants_;
  s.fleet_waits = fleet_waits_;
  s.fleet_failures = fleet_failures_;
  s.fleet_congestions = fleet_congestions_;
  auto const second = whole_second(clock_->now());
  s.released_last_second = second == second_ + 1 ? released_this_second_
                           : second == second_   ? released_previous_second_
                                                 : 0;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < s.wait_buckets.size(); ++i) {
    cumulative += wait_hist_[i];
    s.wait_buckets[i] = cumulative;
  }
  s.wait_count = wait_count_;
  s.wait_sum_s = wait_sum_s_;
  return s;
}

} // namespace wandura::detail
