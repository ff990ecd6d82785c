#include "wandura/fleet/redis_counter_pace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>

#include "run_on.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"

namespace wandura {

using std::chrono::system_clock;

struct redis_counter_pace::impl {
  impl(std::shared_ptr<redis_client> r, redis_counter_pace_options o) : redis(std::move(r)), options(std::move(o)) {}

  /// One counter's pace and the burst it was given (what a cost is capped at). Used on the client's executor only.
  struct counter {
    std::unique_ptr<shared_counter_pace> pace;
    double burst = 0;
  };

  [[nodiscard]] double burst_of(double limit_per_minute, refill_kind refill, double window_limit) const {
    if (refill == refill_kind::fixed_window) {
      return std::max(window_limit, 2.0);
    }
    double const burst_s = std::chrono::duration<double>(options.burst).count();
    return std::max(limit_per_minute / 60.0 * burst_s, 2.0);
  }

  counter& get(std::string const& name) {
    auto it = counters.find(name);
    if (it == counters.end()) {
      double const rate = options.unknown_limit_per_minute;
      double const burst = burst_of(rate, default_refill(name), rate);
      counter_pace_options pace_options{name, rate, burst, 1.0, options.fallback};
      it = counters
               .emplace(name, counter{std::make_unique<shared_counter_pace>(*redis, options.org, pace_options), burst})
               .first;
    }
    return it->second;
  }

  /// Sums the counters of every pace into the snapshot `stats()` returns.
  void publish_stats() {
    counter_pace_stats sum;
    for (auto const& [name, c] : counters) {
      auto const s = c.pace->stats();
      sum.admitted += s.admitted;
      sum.delayed += s.delayed;
      sum.fallbacks += s.fallbacks;
      sum.degraded = sum.degraded || s.degraded;
    }
    std::lock_guard lock(stats_mutex);
    totals = sum;
  }

  std::shared_ptr<redis_client> const redis;
  redis_counter_pace_options const options;
  std::map<std::string, counter, std::less<>> counters; ///< On the client's executor only.
  mutable std::mutex stats_mutex;
  counter_pace_stats totals;
};

namespace {

/// Runs `op` on the Redis client's executor and completes on the awaiting coroutine's (run_on.hpp).
template <class T> asio::awaitable<T> on_redis_executor(redis_client& redis, asio::awaitable<T> op) {
  return detail::run_on(redis.get_executor(), std::move(op));
}

} // namespace

redis_counter_pace::redis_counter_pace(std::shared_ptr<redis_client> redis, redis_counter_pace_options options) {
  if (!redis) {
    throw error(errc::invalid_argument, "redis counter pace: the redis client must not be null");
  }
  fleet_keys::check_org(options.org);
  if (!(options.unknown_limit_per_minute > 0) || !std::isfinite(options.unknown_limit_per_minute) ||
      options.burst.count() < 0) {
    throw error(errc::invalid_argument,
                "redis counter pace: unknown_limit_per_minute must be finite and > 0, burst >= 0");
  }
  impl_ = std::make_shared<impl>(std::move(redis), std::move(options));
}

redis_counter_pace::~redis_counter_pace() = default;

asio::awaitable<shared_pace_grant> redis_counter_pace::acquire(std::string_view counter, std::uint32_t cost,
                                                               system_clock::time_point now) {
  auto op = [](std::shared_ptr<impl> self, std::string name, std::uint32_t units,
               system_clock::time_point at) -> asio::awaitable<shared_pace_grant> {
    auto& c = self->get(name);
    double const asked = std::min(static_cast<double>(std::max<std::uint32_t>(units, 1)), c.burst);
    // Booked up to one burst ahead: processes that each keep one grant open take turns in the order they asked.
    auto take = c.pace->try_acquire(asked, at, self->options.burst);
    auto const decision = co_await std::move(take);
    self->publish_stats();
    if (c.pace->stats().degraded) {
      // Answered from this process's local copy, which may not know the rate another process learnt (it would
      // pace at `unknown_limit_per_minute`): while Redis is away the gate's own pacing is the only pacing.
      co_return shared_pace_grant{true, {}};
    }
    co_return shared_pace_grant{decision.go, decision.wait_until};
  };
  auto run = on_redis_executor(*impl_->redis, op(impl_, std::string(counter), cost, now));
  co_return co_await std::move(run);
}

void redis_counter_pace::hold_until(std::string_view counter, system_clock::time_point until,
                                    system_clock::time_point now) noexcept {
  auto op = [](std::shared_ptr<impl> self, std::string name, system_clock::time_point end,
               system_clock::time_point at) -> asio::awaitable<void> {
    try {
      auto hold = self->get(name).pace->hold_until(end, at);
      co_await std::move(hold);
      self->publish_stats();
    } catch (std::exception const&) { // cancelled with the io_context; Redis failures are fallbacks, not errors
    }
  };
  try {
    asio::co_spawn(impl_->redis->get_executor(), op(impl_, std::string(counter), until, now), asio::detached);
  } catch (std::exception const&) { // out of memory: the hold stays this process's own
  }
}

void redis_counter_pace::set_limit(std::string_view counter, rate_limit const& limit) noexcept {
  if (limit.limit == 0 || limit.window.count() <= 0) {
    return;
  }
  auto op = [](std::shared_ptr<impl> self, std::string name, rate_limit lim) -> asio::awaitable<void> {
    try {
      double const per_minute = static_cast<double>(lim.limit) * 60.0 / static_cast<double>(lim.window.count());
      auto& c = self->get(name);
      c.burst = self->burst_of(per_minute, lim.refill, static_cast<double>(lim.limit));
      auto set = c.pace->set_rate(per_minute, c.burst);
      co_await std::move(set);
      self->publish_stats();
    } catch (std::exception const&) {
    }
  };
  try {
    asio::co_spawn(impl_->redis->get_executor(), op(impl_, std::string(counter), limit), asio::detached);
  } catch (std::exception const&) {
  }
}

asio::awaitable<shared_pace_view> redis_counter_pace::read(std::string_view counter, system_clock::time_point) {
  auto op = [](std::shared_ptr<impl> self, std::string name) -> asio::awaitable<shared_pace_view> {
    auto look = self->get(name).pace->read();
    auto const seen = co_await std::move(look);
    self->publish_stats();
    shared_pace_view view{seen.held_until, seen.pressure_at, {}, std::chrono::seconds(60)};
    if (seen.limit_per_minute >= 1) {
      view.limit = static_cast<std::uint32_t>(std::lround(std::min(seen.limit_per_minute, 4e9)));
    }
    co_return view;
  };
  auto run = on_redis_executor(*impl_->redis, op(impl_, std::string(counter)));
  co_return co_await std::move(run);
}

counter_pace_stats redis_counter_pace::stats() const {
  std::lock_guard lock(impl_->stats_mutex);
  return impl_->totals;
}

} // namespace wandura
