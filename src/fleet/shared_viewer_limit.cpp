#include "wandura/fleet/shared_viewer_limit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

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
/// The bucket script's answer: granted or not, the wait when refused, and what the bucket held afterwards.
struct bucket_reply {
  bool granted = false;
  std::int64_t wait_ms = 0;
  double tokens_left = 0;
};

std::optional<bucket_reply> read_bucket_reply(redis_reply const& reply) noexcept {
  if (reply.type != redis_reply::kind::array || reply.elements.size() != 3) {
    return std::nullopt;
  }
  for (auto const& e : reply.elements) {
    if (e.type != redis_reply::kind::integer) {
      return std::nullopt;
    }
  }
  return bucket_reply{reply.elements[0].integer == 1, reply.elements[1].integer,
                      static_cast<double>(reply.elements[2].integer) / 1000.0};
}

bool is_bucket_reply(redis_reply const& reply) {
  return read_bucket_reply(reply).has_value();
}

/// The script's key and arguments for one viewer and `n` (> 0 takes, < 0 gives back); shared with a take's
/// compensation, so that copying it (the script may be sent twice) copies two pointers, not the strings.
struct bucket_command {
  std::string key;
  std::array<std::string, 4> text; ///< now_ms, rate_per_ms, capacity, n
  [[nodiscard]] std::array<std::string_view, 1> keys() const noexcept { return {key}; }
  [[nodiscard]] std::array<std::string_view, 4> args() const noexcept { return {text[0], text[1], text[2], text[3]}; }
};
} // namespace

struct shared_viewer_limit::impl {
  impl(redis_client& r, std::string o, viewer_limit_options opts)
      : redis(r), org(std::move(o)), rate_per_ms(opts.tickets_per_minute / 60000.0),
        capacity(opts.burst > 0 ? opts.burst : opts.tickets_per_minute), key_rate{opts.tickets_per_minute, capacity},
        local_rate_per_ms(rate_per_ms * opts.local_share), local_burst(capacity * opts.local_share),
        local_share(opts.local_share), local_capacity(opts.local_capacity),
        guard("viewer_limit", r.server_name(), std::move(opts.fallback), "viewer bucket"),
        script(detail::lua::viewer_take, detail::redis_access::write) {}

  /// The local bucket of `viewer_ref`, made (not yet `exists`) when it has none and there is room within
  /// `local_capacity` (full buckets dropped first); null when there is none: the viewer is not tracked.
  detail::token_bucket* track(std::string const& viewer_ref, double now_ms) {
    if (auto const it = buckets.find(viewer_ref); it != buckets.end()) {
      return &it->second;
    }
    if (buckets.size() >= local_capacity) {
      drop_full(now_ms);
    }
    if (buckets.size() >= local_capacity) {
      return nullptr;
    }
    return &buckets.emplace(viewer_ref, detail::token_bucket{}).first->second;
  }

  detail::bucket_answer take_locally(std::string const& viewer_ref, double now_ms, double n) {
    auto* const bucket = track(viewer_ref, now_ms);
    if (bucket == nullptr) {
      return {true, 0}; // untracked rather than blocked: the limit protects the counter, not the viewer
    }
    auto const answer = detail::bucket_take(*bucket, now_ms, local_rate_per_ms, local_burst, n, capacity);
    next_sweep_ms = std::min(next_sweep_ms, full_at(*bucket)); // a new bucket's; a take never makes one full sooner
    return answer;
  }

  /// Makes the local bucket of `viewer_ref` this process's share of what Redis said the viewer's bucket held at
  /// `now_ms`, so that a fallback goes on from the fleet's count, not from a full bucket: each process would
  /// otherwise give every viewer a whole fresh allowance the moment Redis stalls. Within `local_capacity`, as
  /// `take_locally`.
  void mirror(std::string const& viewer_ref, double now_ms, double tokens_left) {
    auto* const bucket = track(viewer_ref, now_ms);
    if (bucket == nullptr || (bucket->exists && bucket->at_ms > now_ms)) {
      return; // untracked, or a later answer (or a later local take) was mirrored already
    }
    *bucket = {std::clamp(tokens_left * local_share, 0.0, local_burst), now_ms, true};
    next_sweep_ms = std::min(next_sweep_ms, full_at(*bucket));
  }

  /// Gives `n` tickets back to the local bucket of a viewer it tracks.
  void give_back_locally(std::string const& viewer_ref, double now_ms, double n) {
    auto const it = buckets.find(viewer_ref);
    if (it != buckets.end()) {
      detail::bucket_take(it->second, now_ms, local_rate_per_ms, local_burst, -n, capacity);
      next_sweep_ms = std::min(next_sweep_ms, full_at(it->second)); // fuller sooner
    }
  }

  /// When the local bucket `b` is full again at its refill rate (ms since the epoch).
  [[nodiscard]] double full_at(detail::token_bucket const& b) const noexcept {
    return b.at_ms + (local_burst - b.tokens) / local_rate_per_ms;
  }

  /// The bucket script's key and arguments for `viewer_ref` at `now_ms`, taking `n` (< 0 gives back).
  [[nodiscard]] bucket_command command(std::string_view viewer_ref, double now_ms, double n) const {
    return {fleet_keys::viewer(org, key_rate, viewer_ref),
            {detail::number_text(now_ms), detail::number_text(rate_per_ms), detail::number_text(capacity),
             detail::number_text(n)}};
  }

  /// Drops the buckets that are full by `now_ms` (a full bucket is the same as none). A walk of every bucket, so
  /// made only once one can be full: until `next_sweep_ms` (the soonest any is full again, kept as buckets are made
  /// and given back to) a viewer beyond `local_capacity` is granted untracked at once, so that an outage with many
  /// viewers costs one walk per refill, not one per new viewer.
  void drop_full(double now_ms) {
    if (now_ms < next_sweep_ms) {
      return;
    }
    double soonest = std::numeric_limits<double>::infinity();
    for (auto it = buckets.begin(); it != buckets.end();) {
      double const full = full_at(it->second);
      if (full <= now_ms) {
        it = buckets.erase(it);
      } else {
        soonest = std::min(soonest, full);
        ++it;
      }
    }
    next_sweep_ms = soonest;
  }

  redis_client& redis;
  std::string org;
  double rate_per_ms;
  double capacity;
  /// What the viewer keys are named after: limits of other rates or bursts have buckets of their own in Redis, as
  /// they have in process (each limiter's `buckets`).
  viewer_rate key_rate;
  // The local buckets (the fallback's): this process's share of the rate and the burst (`local_share`).
  double local_rate_per_ms;
  double local_burst;
  double local_share;
  std::size_t local_capacity;
  detail::fallback_guard guard;
  detail::redis_script script;
  std::unordered_map<std::string, detail::token_bucket> buckets;
  double next_sweep_ms = 0; ///< No bucket is full before then (`drop_full`).
  viewer_limit_stats stats;
};

shared_viewer_limit::shared_viewer_limit(redis_client& redis, std::string_view org, viewer_limit_options options) {
  fleet_keys::check_org(org);
  if (!(options.tickets_per_minute > 0) || !std::isfinite(options.tickets_per_minute) || !(options.burst >= 0) ||
      !std::isfinite(options.burst)) {
    throw error(errc::invalid_argument,
                "viewer limit: tickets_per_minute must be finite and > 0, burst finite and >= 0");
  }
  if (!(options.local_share > 0) || options.local_share > 1) {
    throw error(errc::invalid_argument, "viewer limit: local_share must be in (0, 1]");
  }
  impl_ = std::make_shared<impl>(redis, std::string(org), std::move(options));
}

shared_viewer_limit::~shared_viewer_limit() = default;

asio::awaitable<viewer_limit_decision> shared_viewer_limit::try_acquire(std::string viewer_ref, int tickets,
                                                                        system_clock::time_point now) {
  if (tickets < 0) {
    throw error(errc::invalid_argument, "viewer limit: tickets must be >= 0");
  }
  if (tickets == 0) {
    co_return viewer_limit_decision{true, std::chrono::milliseconds(0)}; // nothing to count: no round trip
  }
  if (viewer_ref.empty()) {
    throw error(errc::invalid_argument, "viewer limit: viewer_ref must not be empty");
  }
  auto const self = impl_; // the operation may outlive this limiter
  double const now_ms = detail::to_epoch_ms(now);
  auto const command = std::make_shared<bucket_command const>(self->command(viewer_ref, now_ms, tickets));
  // A take that Redis runs after this call stopped waiting (it answered locally, or was cancelled) gives back
  // what it took: the decision was made without it.
  redis_compensation give_back = [self, command](redis_reply const& late) -> std::vector<std::string> {
    auto const answer = read_bucket_reply(late);
    if (!answer || !answer->granted) {
      return {}; // refused, or failed: nothing was taken
    }
    std::array<std::string, 4> undo = command->text;
    undo[3] = "-" + undo[3];
    return self->script.eval_command(std::span(&command->key, 1), undo);
  };
  auto const keys = command->keys();
  auto const args = command->args();
  auto pending = detail::run_or_fall_back(self->script, self->redis, self->guard, keys, args, &is_bucket_reply,
                                          "viewer limit", std::move(give_back)); // named: GCC 12 and co_await
  auto const reply = co_await std::move(pending);
  viewer_limit_decision decision;
  if (reply) {
    auto const answer = *read_bucket_reply(*reply);
    self->mirror(viewer_ref, now_ms, answer.tokens_left);
    decision = {answer.granted, std::chrono::milliseconds(answer.wait_ms), viewer_limit::account::primary};
  } else {
    auto const local = self->take_locally(viewer_ref, now_ms, tickets);
    // At most 10^12 ms (~31 years), as the script's: a tiny rate or share cannot overflow the conversion.
    decision = {local.granted, std::chrono::milliseconds(static_cast<std::int64_t>(std::min(local.wait_ms, 1e12))),
                viewer_limit::account::fallback};
  }
  ++(decision.granted ? self->stats.granted : self->stats.refused);
  co_return decision;
}

asio::awaitable<void> shared_viewer_limit::release(std::string viewer_ref, int tickets,
                                                   viewer_limit::account taken_from, system_clock::time_point now) {
  if (tickets < 0) {
    throw error(errc::invalid_argument, "viewer limit: tickets must be >= 0");
  }
  if (tickets == 0) {
    co_return;
  }
  if (viewer_ref.empty()) {
    throw error(errc::invalid_argument, "viewer limit: viewer_ref must not be empty");
  }
  auto const self = impl_; // the operation may outlive this limiter
  double const now_ms = detail::to_epoch_ms(now);
  if (taken_from == viewer_limit::account::fallback) {
    self->give_back_locally(viewer_ref, now_ms, tickets); // Redis never counted them
    co_return;
  }
  // Taken in Redis: given back there, whether or not the guard would ask Redis now (the local bucket never had
  // them). Not a fallback when it fails: nothing is answered from local state; the tickets stay spent in Redis
  // until the bucket refills. A give-back that runs late is what was wanted.
  auto const command = self->command(viewer_ref, now_ms, -tickets);
  auto const keys = command.keys();
  auto const args = command.args();
  auto pending = self->script.run(self->redis, keys, args); // named: GCC 12 and co_await temporaries
  auto const [ec, reply] = co_await std::move(pending);
  if (ec == asio::error::operation_aborted) {
    throw error(ec, "viewer limit: give-back cancelled");
  }
  if (auto const answer = ec ? std::nullopt : read_bucket_reply(reply)) {
    self->mirror(viewer_ref, now_ms, answer->tokens_left); // what Redis holds now that they are back
  }
}

viewer_limit_stats shared_viewer_limit::stats() const noexcept {
  viewer_limit_stats out = impl_->stats;
  out.fallbacks = impl_->guard.fallbacks();
  out.degraded = impl_->guard.degraded();
  return out;
}

} // namespace wandura
