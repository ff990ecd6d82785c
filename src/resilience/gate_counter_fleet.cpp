// The part of a gate counter that paces with the other processes of a fleet through a `shared_pace`
// (admission_gate_options::shared_pace; docs/adr/0006, "The fleet's pace"): grants asked for before a queued
// request is released, hold-offs and limits published, the fleet's view read now and then. Without a shared pace
// none of this runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>

#include "gate_counter.hpp"
#include "saturating_time.hpp"

namespace wandura::detail {
namespace {

using std::chrono::system_clock;

constexpr std::chrono::hours max_hold{1};

} // namespace

system_clock::time_point gate_counter::to_system(clock::time_point t) const noexcept {
  return clock_->system_now() + std::chrono::duration_cast<system_clock::duration>(t - clock_->now());
}

clock::time_point gate_counter::to_steady(system_clock::time_point t, clock::time_point now) const {
  auto const ahead = std::chrono::duration_cast<clock::duration>(t - clock_->system_now());
  return now + std::clamp<clock::duration>(ahead, clock::duration::zero(), max_hold);
}

bool gate_counter::uses_fleet(clock::time_point now) const noexcept {
  // Only once the server refused for rate (here, or in another process as the fleet's view tells): sheds alone say
  // the counter still has room above zero, which the server's own bucket grants and the fleet's pace cannot see, so
  // pacing the fleet then would only hold plays the server would have granted.
  return fleet() != nullptr && refused_ && now >= fleet_aside_until_;
}

bool gate_counter::fleet_paid(std::uint32_t cost, clock::time_point now, after_unlock& out) {
  if (!uses_fleet(now)) {
    return true;
  }
  double const need = static_cast<double>(cost);
  if (fleet_credit_ + 1e-9 >= need) {
    fleet_credit_ -= need;
    return true;
  }
  // One question to the fleet at a time, for the head of the queue: whoever is the head when it comes back uses
  // the units, so the order of the queue (plays first, then arrival) is kept. None while a grant is booked: with one
  // grant open per process, the processes of a fleet take turns in the order they asked.
  if (grant_in_flight_ || now < fleet_wait_until_ || !executor_) {
    return false;
  }
  grant_in_flight_ = true;
  ++grant_seq_;
  grant_deadline_ = detail::saturating_add(now, options_->shared_pace_timeout);
  if (fleet_booked_ > 0) {
    // The booking's instant has come. Another process may have published a hold since it was made (a grant asked
    // now would be refused): the fleet's view is read first, and the units used only outside a hold.
    out.booking_check.emplace(grant_seq_, executor_);
  } else {
    auto const units = static_cast<std::uint32_t>(std::max(std::ceil(need - fleet_credit_ - 1e-9), 1.0));
    out.grant.emplace(units, grant_seq_, executor_);
  }
  return false;
}

clock::time_point gate_counter::fleet_wake() const noexcept {
  return grant_in_flight_ ? grant_deadline_ : fleet_wait_until_;
}

void gate_counter::fleet_answered(std::uint64_t seq, std::uint32_t units, std::optional<shared_pace_grant> const& grant,
                                  after_unlock& out) {
  if (!grant_in_flight_ || seq != grant_seq_) {
    return; // given up on after `shared_pace_timeout`: the units it may have taken are lost to this process
  }
  grant_in_flight_ = false;
  auto const now = clock_->now();
  if (!grant) {
    fleet_failed(now);
  } else if (auto const at = to_steady(grant->wait_until, now); grant->go && at > now) {
    // Booked: the units are this process's from `at` on; they are used a quarter of a unit's refill after it
    // (fleet_wake wakes the queue then). Released at the very instant the fleet's room conforms, requests reach the
    // server when its own bucket may be a hair short (the jitter of the way there), and the server holds such a
    // play (half a second): measured, two clients over a 2/s counter then served 10-12 plays where 19 go. The
    // delay is the same for every booking, so it is margin kept for good, not rate lost.
    fleet_booked_ += static_cast<double>(units);
    fleet_wait_until_ = at + booking_margin();
    ++fleet_grants_;
  } else if (grant->go) {
    fleet_credit_ += static_cast<double>(units);
    ++fleet_grants_;
  } else {
    ++fleet_waits_;
    // Every refused process is told the same instant; each asks again up to one unit's refill after it, at a
    // random point, so that the first to ask is not always the same one. The fleet's burst (at least two units)
    // absorbs the delay: no refill is lost.
    fleet_wait_until_ = std::max(to_steady(grant->wait_until, now) + ask_spread(), now + std::chrono::milliseconds(1));
  }
  pump(now, out);
}

clock::duration gate_counter::unit_fraction(double fraction) const noexcept {
  double const rate = refill_per_s() > 0 ? refill_per_s() : std::max(rate_, 1e-3);
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(std::min(fraction / rate, 1.0)));
}

clock::duration gate_counter::booking_margin() const noexcept {
  return unit_fraction(0.25);
}

clock::duration gate_counter::ask_spread() noexcept {
  return unit_fraction(next_jitter());
}

void gate_counter::booking_checked(std::uint64_t seq, std::optional<shared_pace_view> const& view, after_unlock& out) {
  if (!grant_in_flight_ || seq != grant_seq_) {
    return; // given up on after `shared_pace_timeout`: checked again when the fleet is used again
  }
  grant_in_flight_ = false;
  auto const now = clock_->now();
  fleet_credit_ += std::exchange(fleet_booked_, 0.0);
  // The next grant is asked up to one unit's refill later, at a random point, as after a refusal: a unit that comes
  // free as this booking is used would otherwise always go to this process, never to one refused and asking again,
  // and with more processes than the fleet has bookings open the refused ones would wait long.
  fleet_wait_until_ = now + ask_spread();
  if (!view) {
    fleet_failed(now);
  } else {
    apply_view(*view, out); // a hold first: the units then wait for its end
  }
  pump(now, out);
}

double gate_counter::next_jitter() noexcept {
  if (jitter_ == 0) { // seeded on first use from where this counter lives and when
    jitter_ = (reinterpret_cast<std::uintptr_t>(this) ^
               static_cast<std::uint64_t>(clock_->now().time_since_epoch().count())) |
              1U;
  }
  jitter_ ^= jitter_ >> 12U; // xorshift64*
  jitter_ ^= jitter_ << 25U;
  jitter_ ^= jitter_ >> 27U;
  return static_cast<double>((jitter_ * 2685821657736338717ULL) >> 11U) * 0x1.0p-53;
}

void gate_counter::fleet_failed(clock::time_point now) {
  grant_in_flight_ = false;
  fleet_aside_until_ = detail::saturating_add(now, options_->shared_pace_retry);
  ++fleet_failures_;
}

void gate_counter::publish_hold(clock::time_point now, after_unlock& out) {
  if (fleet() == nullptr) {
    return;
  }
  // Every longer hold-off at once; the mere news of a refusal (a 429 without Retry-After, or one inside a hold
  // already published) at most once per refresh interval, so that a burst of 429s is one write.
  bool const longer = hold_until_ > now && hold_until_ > published_hold_;
  bool const stale = published_at_ == clock::time_point{} || now - published_at_ >= options_->shared_pace_refresh;
  if (!longer && !stale) {
    return;
  }
  published_hold_ = std::max(published_hold_, hold_until_);
  published_at_ = now;
  out.hold.emplace(to_system(std::max(hold_until_, now)), clock_->system_now());
}

void gate_counter::publish_limit(after_unlock& out) {
  if (fleet() == nullptr || limit_ == 0) {
    return;
  }
  if (limit_ == published_limit_.limit && window_ == published_limit_.window && refill_ == published_limit_.refill) {
    return;
  }
  published_limit_ = {limit_, window_, refill_};
  out.limit = published_limit_;
}

void gate_counter::apply_view(shared_pace_view const& view, after_unlock& out) {
  if (closed_) {
    return;
  }
  auto const now = clock_->now();
  auto const wall = clock_->system_now();
  if (view.limit && *view.limit > 0 && limit_ == 0) { // learnt from another process: not published again
    limit_ = *view.limit;
    window_ = view.window.count() > 0 ? view.window : window_;
    published_limit_ = {limit_, window_, refill_};
    limit_learnt(true);
  }
  bool const held = view.held_until > wall;
  auto const age = std::chrono::duration_cast<clock::duration>(
      std::max<system_clock::duration>(wall - view.pressure_at, system_clock::duration::zero()));
  bool const pressed = view.pressure_at != system_clock::time_point{} && age < options_->calm_period;
  if (!held && !pressed) {
    return;
  }
  // Another process saw a 429 (or this one did and reads it back): pace as if this one had, without a cut.
  bring_room_up_to(now);
  if (!congested()) {
    ++fleet_congestions_;
  }
  enter_congestion(now, true);
  bool const starts_pacing = !std::exchange(refused_, true);
  if (held) {
    hold_until_ = std::max(hold_until_, to_steady(view.held_until, now));
  }
  if (starts_pacing) { // as a 429 of this process's own would start it (on_refused): its first cut after this hold
    cut_hold_end_ = hold_until_;
    last_decrease_ = now;
  }
  if (pressed) {
    last_pressure_ = std::max(last_pressure_, now - age);
  }
  pump(now, out);
}

/// What a question to the fleet needs from its counter, taken while the counter is still alive: the coroutine asking
/// keeps the counter only weakly.
struct gate_counter::fleet_question {
  std::shared_ptr<wandura::shared_pace> pace;
  std::string name;
  system_clock::time_point asked_at;

  static std::optional<fleet_question> of(std::weak_ptr<gate_counter> const& weak) {
    auto counter = weak.lock();
    if (!counter) {
      return std::nullopt;
    }
    return fleet_question{counter->options_->shared_pace, counter->name_, counter->clock_->system_now()};
  }

  /// The fleet's view of the counter, or nothing when the shared pace is unavailable (it threw).
  asio::awaitable<std::optional<shared_pace_view>> read_view() const {
    std::optional<shared_pace_view> view;
    try {
      std::string_view const counter_name = name;
      auto read = pace->read(counter_name, asked_at);
      view = co_await std::move(read);
    } catch (...) { // unavailable: the caller keeps what it knows
    }
    co_return view;
  }
};

void gate_counter::start_refresh(asio::any_io_executor const& executor) {
  auto refresh = [](std::weak_ptr<gate_counter> weak) -> asio::awaitable<void> {
    auto asked = fleet_question::of(weak);
    if (!asked) {
      co_return;
    }
    auto read = asked->read_view(); // unavailable: keep what is known, read again after the interval
    auto const view = co_await std::move(read);
    wandura::clock* clk = nullptr;
    clock::time_point next;
    if (auto counter = weak.lock()) {
      after_unlock out;
      {
        lock_type lock(counter->mutex_);
        if (view) {
          counter->apply_view(*view, out);
        }
        clk = counter->clock_.get();
        next = detail::saturating_add(clk->now(), counter->options_->shared_pace_refresh);
      }
      counter->run(out);
    } else {
      co_return;
    }
    // As the release timers do: the clock by pointer and the counter weakly, so a sleeping refresh keeps neither
    // alive; the next request after the wake-up starts the next read.
    try {
      (void)co_await clk->sleep_until(next);
    } catch (std::system_error const&) {
    }
    if (auto counter = weak.lock()) {
      counter->flags_.fetch_or(refresh_flag, std::memory_order_acq_rel);
    }
  };
  asio::co_spawn(executor, refresh(weak_from_this()), asio::detached);
}

void gate_counter::start_grant(std::weak_ptr<gate_counter> weak_counter, std::uint32_t units, std::uint64_t seq,
                               asio::any_io_executor const& executor) {
  auto grant = [](std::weak_ptr<gate_counter> weak, std::uint32_t cost, std::uint64_t id) -> asio::awaitable<void> {
    auto asked = fleet_question::of(weak);
    if (!asked) {
      co_return;
    }
    auto& [pace, name, asked_at] = *asked;
    std::optional<shared_pace_grant> answer;
    try {
      std::string_view const counter_name = name;
      auto acquire = pace->acquire(counter_name, cost, asked_at);
      answer = co_await std::move(acquire);
    } catch (...) { // unavailable: the counter paces alone for a while
    }
    if (auto counter = weak.lock()) {
      after_unlock out;
      {
        lock_type lock(counter->mutex_);
        counter->fleet_answered(id, cost, answer, out);
      }
      counter->run(out);
    }
  };
  asio::co_spawn(executor, grant(std::move(weak_counter), units, seq), asio::detached);
}

void gate_counter::start_booking_check(std::weak_ptr<gate_counter> weak_counter, std::uint64_t seq,
                                       asio::any_io_executor const& executor) {
  auto check = [](std::weak_ptr<gate_counter> weak, std::uint64_t id) -> asio::awaitable<void> {
    auto asked = fleet_question::of(weak);
    if (!asked) {
      co_return;
    }
    auto read = asked->read_view(); // unavailable: the counter paces alone for a while, with the units it booked
    auto const view = co_await std::move(read);
    if (auto counter = weak.lock()) {
      after_unlock out;
      {
        lock_type lock(counter->mutex_);
        counter->booking_checked(id, view, out);
      }
      counter->run(out);
    }
  };
  asio::co_spawn(executor, check(std::move(weak_counter), seq), asio::detached);
}

} // namespace wandura::detail
