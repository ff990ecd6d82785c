#include "wandura/fleet/shared_counter_pace.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "fallback_guard.hpp"
#include "fleet_values.hpp"
#include "lua_scripts.hpp"
#include "rate_math.hpp"
#include "redis_script.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"

namespace wandura {

using std::chrono::system_clock;

namespace {

bool is_pair(redis_reply const& reply) {
  return detail::integer_pair(reply).has_value();
}
bool is_integer(redis_reply const& reply) {
  return reply.type == redis_reply::kind::integer;
}

/// A number the scripts stored and `pace_read` returned as text; 0 (absent) for text the SDK never writes, which
/// `pace_read` passes on when Lua reads it as a number and `from_chars` does not (" 5", "0x5"): like the scripts,
/// a value that is not the SDK's reads as absent, and is no reason to stop asking Redis.
double read_number(redis_reply const& reply) noexcept {
  double value = 0;
  auto const* end = reply.text.data() + reply.text.size();
  auto const [at, ec] = std::from_chars(reply.text.data(), end, value);
  if (ec != std::errc{} || at != end || !std::isfinite(value) || value < 0) {
    return 0;
  }
  return value;
}

/// `{hold, press, em}` as text: the shape `pace_read` always answers.
bool is_view(redis_reply const& reply) {
  return reply.type == redis_reply::kind::array && reply.elements.size() == 3 &&
         std::all_of(reply.elements.begin(), reply.elements.end(),
                     [](redis_reply const& e) { return e.type == redis_reply::kind::string; });
}

void check_rate(double limit_per_minute, double burst) {
  if (!(limit_per_minute > 0) || !std::isfinite(limit_per_minute) || !(burst >= 0) || !std::isfinite(burst)) {
    throw error(errc::invalid_argument, "counter pace: limit_per_minute must be finite and > 0, burst finite and >= 0");
  }
}

} // namespace

struct shared_counter_pace::impl {
  impl(redis_client& r, std::string_view org, counter_pace_options opts)
      : redis(r), key(fleet_keys::pace(org, opts.counter)), local_share(opts.local_share),
        guard("counter_pace " + opts.counter, r.server_name(), std::move(opts.fallback), "pace"),
        take_script(detail::lua::pace_take, detail::redis_access::write),
        hold_script(detail::lua::pace_hold, detail::redis_access::write),
        rate_script(detail::lua::pace_rate, detail::redis_access::write),
        read_script(detail::lua::pace_read, detail::redis_access::read) {
    set_local_rate(opts.limit_per_minute, opts.burst);
  }

  void set_local_rate(double limit_per_minute, double burst_units) {
    emission_ms = 60000.0 / limit_per_minute;
    burst = burst_units > 0 ? burst_units : limit_per_minute;
  }

  redis_client& redis;
  std::string key;
  double local_share;
  double emission_ms = 0;
  double burst = 0;
  detail::gcra local;
  detail::fallback_guard guard;
  detail::redis_script take_script;
  detail::redis_script hold_script;
  detail::redis_script rate_script;
  detail::redis_script read_script;
  double local_pressure_ms = 0; ///< The latest refusal this process published.
  bool rate_set = false;        ///< `set_rate` was called through this process.
  counter_pace_stats stats;
};

shared_counter_pace::shared_counter_pace(redis_client& redis, std::string_view org, counter_pace_options options) {
  fleet_keys::check_org(org);
  check_rate(options.limit_per_minute, options.burst);
  // Two checks, two messages: redis_counter_pace passes a caller's counter name and never a local_share.
  if (options.counter.empty() || options.counter.size() > 64) {
    throw error(errc::invalid_argument, "counter pace: the counter name must be 1-64 characters");
  }
  if (!(options.local_share > 0) || options.local_share > 1) {
    throw error(errc::invalid_argument, "counter pace: local_share must be in (0, 1]");
  }
  impl_ = std::make_shared<impl>(redis, org, std::move(options));
}

shared_counter_pace::~shared_counter_pace() = default;

asio::awaitable<pace_decision> shared_counter_pace::try_acquire(double cost, system_clock::time_point now,
                                                                std::chrono::milliseconds book_within) {
  auto const self = impl_; // the operation may outlive this pace
  if (!(cost > 0) || cost > self->burst || book_within.count() < 0) {
    throw error(errc::invalid_argument, "counter pace: cost must be > 0 and at most the burst, book_within >= 0");
  }
  double const now_ms = detail::to_epoch_ms(now);
  double const book_ms = static_cast<double>(book_within.count());
  std::array<std::string, 5> const text{detail::number_text(now_ms), detail::number_text(cost),
                                        detail::number_text(self->emission_ms), detail::number_text(self->burst),
                                        detail::number_text(book_ms)};
  std::array<std::string_view, 1> const keys{self->key};
  std::array<std::string_view, 5> const args{text[0], text[1], text[2], text[3], text[4]};
  auto const reply = co_await detail::run_or_fall_back(self->take_script, self->redis, self->guard, keys, args,
                                                       &is_pair, "counter pace");
  detail::gcra_answer answer;
  if (reply) {
    auto const pair = detail::integer_pair(*reply);
    answer = {pair->first == 1, static_cast<double>(pair->second)};
  } else {
    // This process's share of the rate and burst. A cost above its share of the burst (within the fleet's) goes when
    // the share is full and leaves a debt, as the gate's own bucket lets an oversized request go: else it never would.
    double const share = self->local_share;
    double const burst = std::max(self->burst * share, cost);
    answer = detail::gcra_take(self->local, now_ms, cost, self->emission_ms / share, burst, book_ms);
  }
  // A go for now comes back as `now` in whole milliseconds (Redis answers integers): it is `now` itself.
  pace_decision const decision{answer.go,
                               answer.go && answer.at_ms <= now_ms ? now : detail::from_epoch_ms(answer.at_ms)};
  ++(decision.go ? self->stats.admitted : self->stats.delayed);
  co_return decision;
}

asio::awaitable<void> shared_counter_pace::hold_until(system_clock::time_point until, system_clock::time_point now) {
  auto const self = impl_;                                    // the operation may outlive this pace
  double const until_ms = detail::to_written_epoch_ms(until); // others read it: never past their clock
  double const now_ms = detail::to_epoch_ms(now);
  double const share = self->local_share;
  detail::gcra_hold(self->local, now_ms, until_ms, self->emission_ms / share, self->burst * share);
  self->local_pressure_ms = std::max(self->local_pressure_ms, now_ms);
  std::array<std::string, 4> const text{detail::number_text(now_ms), detail::number_text(until_ms),
                                        detail::number_text(self->emission_ms), detail::number_text(self->burst)};
  std::array<std::string_view, 1> const keys{self->key};
  std::array<std::string_view, 4> const args{text[0], text[1], text[2], text[3]};
  co_await detail::run_or_fall_back(self->hold_script, self->redis, self->guard, keys, args, &is_integer,
                                    "counter pace: hold");
}

asio::awaitable<void> shared_counter_pace::set_rate(double limit_per_minute, double burst) {
  check_rate(limit_per_minute, burst);
  auto const self = impl_; // the operation may outlive this pace
  self->set_local_rate(limit_per_minute, burst);
  self->rate_set = true;
  std::array<std::string, 2> const text{detail::number_text(self->emission_ms), detail::number_text(self->burst)};
  std::array<std::string_view, 1> const keys{self->key};
  std::array<std::string_view, 2> const args{text[0], text[1]};
  co_await detail::run_or_fall_back(self->rate_script, self->redis, self->guard, keys, args, &is_integer,
                                    "counter pace: set rate");
}

asio::awaitable<counter_pace_view> shared_counter_pace::read() {
  auto const self = impl_; // the operation may outlive this pace
  std::array<std::string_view, 1> const keys{self->key};
  auto const reply = co_await detail::run_or_fall_back(self->read_script, self->redis, self->guard, keys, {}, &is_view,
                                                       "counter pace: read");
  if (!reply) {
    co_return counter_pace_view{detail::from_epoch_ms(self->local.hold_ms),
                                detail::from_epoch_ms(self->local_pressure_ms),
                                self->rate_set ? 60000.0 / self->emission_ms : 0.0};
  }
  double const hold_ms = read_number(reply->elements[0]);
  double const pressure_ms = read_number(reply->elements[1]);
  double const emission_ms = read_number(reply->elements[2]);
  co_return counter_pace_view{detail::from_epoch_ms(hold_ms), detail::from_epoch_ms(pressure_ms),
                              emission_ms > 0 ? 60000.0 / emission_ms : 0.0};
}

counter_pace_stats shared_counter_pace::stats() const noexcept {
  counter_pace_stats out = impl_->stats;
  out.fallbacks = impl_->guard.fallbacks();
  out.degraded = impl_->guard.degraded();
  return out;
}

} // namespace wandura
