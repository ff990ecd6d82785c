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
/// The bucket script's answer: granted or not, the wait when refused, what the bucket held afterwards, and how
/// many of the owed tickets the command carried it took.
struct bucket_reply {
  bool granted = false;
  std::int64_t wait_ms = 0;
  double tokens_left = 0;
  double owed_taken = 0;
};

std::optional<bucket_reply> read_bucket_reply(redis_reply const& reply) noexcept {
  if (reply.type != redis_reply::kind::array || reply.elements.size() != 4) {
    return std::nullopt;
  }
  for (auto const& e : reply.elements) {
    if (e.type != redis_reply::kind::integer) {
      return std::nullopt;
    }
  }
  return bucket_reply{reply.elements[0].integer == 1, reply.elements[1].integer,
                      static_cast<double>(reply.elements[2].integer) / 1000.0,
                      static_cast<double>(reply.elements[3].integer) / 1000.0};
}

bool is_bucket_reply(redis_reply const& reply) {
  return read_bucket_reply(reply).has_value();
}

/// The script's key and arguments for one viewer, `n` (> 0 takes, < 0 gives back) and the owed tickets it carries;
/// shared with a take's compensation, so that copying it (the script may be sent twice) copies two pointers, not
/// the strings.
struct bucket_command {
  std::string key;
  std::array<std::string, 5> text; ///< now_ms, rate_per_ms, capacity, n, owed
  [[nodiscard]] std::array<std::string_view, 1> keys() const noexcept { return {key}; }
  [[nodiscard]] std::array<std::string_view, 5> args() const noexcept {
    return {text[0], text[1], text[2], text[3], text[4]};
  }
};
} // namespace

struct shared_viewer_limit::impl {
  impl(redis_client& r, std::string o, viewer_limit_options opts)
      : redis(r), org(std::move(o)), rate_per_ms(detail::per_ms(opts.tickets_per_minute)),
        capacity(opts.burst > 0 ? opts.burst : opts.tickets_per_minute), key_rate{opts.tickets_per_minute, capacity},
        local_rate_per_ms(rate_per_ms * opts.local_share), local_burst(capacity * opts.local_share),
        local_share(opts.local_share), local_capacity(opts.local_capacity),
        guard("viewer_limit", r.server_name(), std::move(opts.fallback), "viewer bucket"),
        script(detail::lua::viewer_take, detail::redis_access::write) {}

  /// What this process knows of one viewer locally.
  struct local_viewer {
    /// The local bucket (this process's share of the rate and burst): what the fallback answers from.
    detail::token_bucket bucket;
    /// The viewer's bucket in Redis as last said, at the full rate and burst, without this process's local grants
    /// since (`spent`: with them). What the viewer owes Redis is how much more `unspent` holds than `spent`:
    /// Redis's own refill to the burst absorbs local grants as it would have absorbed them in Redis, so a viewer
    /// whose bucket is full again owes nothing. At the full rate, never a share of it: a process that served the
    /// viewer alone owes nothing its refill covered, and where several did, each counts all of the refill for its
    /// own grants (some tickets go uncounted; none is counted twice).
    detail::token_bucket unspent;
    detail::token_bucket spent;
    /// Owed tickets Redis took (the script's count) that have not come back since: a give-back of locally granted
    /// tickets returns these to Redis.
    double paid = 0;
    /// Takes in flight that carry owed tickets, the tickets they carry, and those given back to Redis while they
    /// did (not paid again when a take's answer says Redis took them). Reset when the last of those takes ends, so
    /// no rounding residue is kept.
    int carrying = 0;
    double carried = 0;
    double returned = 0;
  };

  /// The local state of `viewer_ref`, made (its buckets full) when it has none and there is room within
  /// `local_capacity` (full buckets dropped first); null when there is none: the viewer is not tracked.
  local_viewer* track(std::string const& viewer_ref, double now_ms) {
    if (auto const it = viewers.find(viewer_ref); it != viewers.end()) {
      return &it->second;
    }
    if (viewers.size() >= local_capacity) {
      drop_full(now_ms);
    }
    if (viewers.size() >= local_capacity) {
      return nullptr;
    }
    detail::token_bucket const full{capacity, now_ms, true};
    return &viewers
                .emplace(viewer_ref,
                         local_viewer{.bucket = {local_burst, now_ms, true}, .unspent = full, .spent = full})
                .first->second;
  }

  /// The tickets `v` owes Redis at `now_ms`.
  [[nodiscard]] double owed(local_viewer& v, double now_ms) const noexcept {
    detail::bucket_refill(v.unspent, now_ms, rate_per_ms, capacity);
    detail::bucket_refill(v.spent, now_ms, rate_per_ms, capacity);
    return std::max(0.0, v.unspent.tokens - v.spent.tokens);
  }

  /// The tickets `viewer_ref` owes Redis at `now_ms` (0 for a viewer not tracked).
  double owed_by(std::string const& viewer_ref, double now_ms) {
    auto const it = viewers.find(viewer_ref);
    return it == viewers.end() ? 0 : owed(it->second, now_ms);
  }

  /// `n` owed tickets of `viewer_ref` (`owed_by` at the same `now_ms`) are carried by a take: no longer owed
  /// locally. `settle_carried` ends that when the take ends.
  void carry(std::string const& viewer_ref, double n) noexcept {
    auto const it = viewers.find(viewer_ref);
    if (n > 0 && it != viewers.end()) {
      it->second.unspent.tokens -= n;
      ++it->second.carrying;
      it->second.carried += n;
    }
  }

  /// How a take that carried owed tickets ended.
  enum class carry_end {
    not_sent, ///< Redis did not run it (not sent, refused, an error reply): owed again
    unknown,  ///< sent, no answer (timed out, broke, cancelled): forgiven, never counted twice; if Redis ran it
              ///< after all, they are counted there (`settle_late` from its compensation)
    answered, ///< Redis took `taken` of them and forgave the rest (its bucket had no more)
  };

  /// What a take's compensation needs to know of how the take ended here.
  struct take_end {
    bool settled = false;        ///< the take ended here unanswered (`settle_carried`)
    double given_back = 0;       ///< then: of its owed tickets, those given back to Redis while it carried them
    double late_owed_taken = -1; ///< its late reply came first: the owed tickets Redis took (else -1)
  };

  /// Ends the carry of `n` owed tickets of `viewer_ref` by a take that ended so (`ended`: shared with the take's
  /// compensation).
  void settle_carried(std::string const& viewer_ref, double now_ms, double n, carry_end end, double taken,
                      take_end& ended) {
    ended.settled = end == carry_end::unknown;
    auto const it = viewers.find(viewer_ref);
    if (!(n > 0) || it == viewers.end()) {
      return;
    }
    auto& v = it->second;
    double const given_back = std::min(v.returned, n); // to Redis already, while carried
    v.returned -= given_back;
    v.carried -= n;
    if (--v.carrying <= 0) {
      v = local_viewer{.bucket = v.bucket, .unspent = v.unspent, .spent = v.spent, .paid = v.paid};
    }
    if (end == carry_end::not_sent) {
      detail::bucket_give_back(v.unspent, now_ms, rate_per_ms, capacity, n);
      detail::bucket_give_back(v.spent, now_ms, rate_per_ms, capacity,
                               given_back); // given back to Redis, which never took them
    } else if (end == carry_end::answered) {
      v.paid += std::max(0.0, taken - given_back);
    } else {
      ended.given_back = given_back;
      if (ended.late_owed_taken >= 0) { // its late reply came first
        v.paid += std::max(0.0, ended.late_owed_taken - given_back);
      }
    }
  }

  /// The late reply of a take that ended unanswered: Redis took `owed_taken` of the owed tickets it carried (they
  /// were forgiven here: counted there, and a give-back of locally granted tickets may return them there).
  void settle_late(std::string const& viewer_ref, double owed_taken, take_end& ended) {
    auto const it = viewers.find(viewer_ref);
    if (it == viewers.end()) {
      return;
    }
    if (ended.settled) {
      it->second.paid += std::max(0.0, owed_taken - ended.given_back);
    } else {
      ended.late_owed_taken = owed_taken; // `settle_carried` takes out those given back meanwhile
    }
  }

  /// Decides a take of `n` from the local bucket; granted, the tickets are `owed` to Redis, or not (when Redis may
  /// have counted them: the take was sent and not answered).
  detail::bucket_answer take_locally(std::string const& viewer_ref, double now_ms, double n, bool owe) {
    auto* const v = track(viewer_ref, now_ms);
    if (v == nullptr) {
      return {true, 0}; // untracked rather than blocked: the limit protects the counter, not the viewer
    }
    auto const answer = detail::bucket_take(v->bucket, now_ms, local_rate_per_ms, local_burst, n, capacity);
    if (answer.granted && owe) {
      detail::bucket_refill(v->spent, now_ms, rate_per_ms, capacity);
      v->spent.tokens -= n; // owed to Redis from now on
    }
    next_sweep_ms = std::min(next_sweep_ms, full_at(*v)); // a new bucket's; a take never makes one full sooner
    return answer;
  }

  /// Makes the local bucket of `viewer_ref` this process's share of what Redis said the viewer's bucket held at
  /// `now_ms`, less what it still owes, so that a fallback goes on from the fleet's count, not from a full bucket:
  /// each process would otherwise give every viewer a whole fresh allowance the moment Redis stalls. Within
  /// `local_capacity`, as `take_locally`.
  void mirror(std::string const& viewer_ref, double now_ms, double tokens_left) {
    auto* const v = track(viewer_ref, now_ms);
    if (v == nullptr || v->bucket.at_ms > now_ms) {
      return; // untracked, or a later answer (or a later local take) was mirrored already
    }
    double const still_owed = owed(*v, now_ms);
    double const left = std::clamp(tokens_left, 0.0, capacity);
    v->unspent = {left, now_ms, true};
    v->spent = {left - still_owed, now_ms, true};
    v->bucket = {std::clamp(left * local_share, 0.0, local_burst) - still_owed, now_ms, true};
    next_sweep_ms = std::min(next_sweep_ms, full_at(*v));
  }

  /// Gives `n` locally granted tickets of `viewer_ref` back: those still owed to its local buckets; then to Redis
  /// (returned: how many) those Redis took as owed and those takes carry to it now (if Redis then takes fewer,
  /// or none, the viewer gets them twice: never counted twice); the rest to its local bucket. Unknown viewers
  /// are ignored.
  double give_back_locally(std::string const& viewer_ref, double now_ms, double n) {
    auto const it = viewers.find(viewer_ref);
    if (it == viewers.end()) {
      return 0;
    }
    auto& v = it->second;
    double const still_owed = std::min(n, owed(v, now_ms));
    detail::bucket_give_back(v.spent, now_ms, rate_per_ms, capacity, still_owed);
    double const paid_back = std::min(n - still_owed, v.paid);
    v.paid -= paid_back;
    double const carried_back = std::clamp(v.carried - v.returned, 0.0, n - still_owed - paid_back);
    v.returned += carried_back;
    detail::bucket_give_back(v.bucket, now_ms, local_rate_per_ms, local_burst, n - paid_back - carried_back);
    next_sweep_ms = std::min(next_sweep_ms, full_at(v)); // fuller sooner
    return paid_back + carried_back;
  }

  /// When the local bucket of `v` is full again at its refill rate (ms since the epoch). `spent` is full by then
  /// too (it lost no more than the local bucket did and refills at least as fast, relative to its burst), and
  /// `unspent` never holds more than the burst: a viewer then owes nothing.
  [[nodiscard]] double full_at(local_viewer const& v) const noexcept {
    return v.bucket.at_ms + (local_burst - v.bucket.tokens) / local_rate_per_ms;
  }

  /// The bucket script's key and arguments for `viewer_ref` at `now_ms`, taking `n` (< 0 gives back) after the
  /// `owed` tickets.
  [[nodiscard]] bucket_command command(std::string_view viewer_ref, double now_ms, double n, double owed = 0) const {
    return {fleet_keys::viewer(org, key_rate, viewer_ref),
            {detail::number_text(now_ms), detail::number_text(rate_per_ms), detail::number_text(capacity),
             detail::number_text(n), detail::number_text(owed)}};
  }

  /// Drops the viewers whose local bucket is full by `now_ms` (a full bucket is the same as none, but for owed
  /// tickets Redis took that a give-back would have returned: those stay taken until Redis's bucket refills). A walk of
  /// every bucket, so made only once one can be full: until `next_sweep_ms` (the soonest any is full again, kept as
  /// buckets are made and given back to) a viewer beyond `local_capacity` is granted untracked at once, so that an
  /// outage with many viewers costs one walk per refill, not one per new viewer.
  void drop_full(double now_ms) {
    if (now_ms < next_sweep_ms) {
      return;
    }
    double soonest = std::numeric_limits<double>::infinity();
    for (auto it = viewers.begin(); it != viewers.end();) {
      double const full = full_at(it->second);
      if (full <= now_ms && it->second.carrying == 0) { // a take in flight settles with it
        it = viewers.erase(it);
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
  /// they have in process (each limiter's `viewers`).
  viewer_rate key_rate;
  // The local buckets (the fallback's): this process's share of the rate and the burst (`local_share`).
  double local_rate_per_ms;
  double local_burst;
  double local_share;
  std::size_t local_capacity;
  detail::fallback_guard guard;
  detail::redis_script script;
  std::unordered_map<std::string, local_viewer> viewers;
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
  // The local bucket's rate must be one the arithmetic can divide by.
  if (!detail::share_counts(options.tickets_per_minute, options.local_share)) {
    throw error(errc::invalid_argument, "viewer limit: tickets_per_minute times local_share is too small to count");
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
  // The tickets this process granted the viewer locally that Redis has not counted go with the take, taken first,
  // once Redis answers again (a probe of an outage carries none: unanswered, they would be forgiven). All that may
  // throw is made before they are carried: from then on only the round trip ends the take.
  double const owed = self->guard.degraded() ? 0 : self->owed_by(viewer_ref, now_ms);
  auto const command = std::make_shared<bucket_command const>(self->command(viewer_ref, now_ms, tickets, owed));
  auto const ended = std::make_shared<impl::take_end>();
  // A take that Redis runs after this call stopped waiting (it answered locally, or was cancelled) gives back the
  // tickets it granted: the decision was made without it.
  // The owed tickets it took stay taken (this call forgave them here, so they are counted once) and may come back
  // there with a give-back.
  redis_compensation give_back = [self, command, ended,
                                  viewer = viewer_ref](redis_reply const& late) -> std::vector<std::string> {
    auto const answer = read_bucket_reply(late);
    if (!answer) {
      return {}; // failed: nothing was taken
    }
    self->settle_late(viewer, answer->owed_taken, *ended);
    if (!answer->granted) {
      return {};
    }
    std::array<std::string, 5> undo = command->text;
    undo[3] = "-" + undo[3];
    undo[4] = "0";
    return self->script.eval_command(std::span(&command->key, 1), undo);
  };
  auto const keys = command->keys();
  auto const args = command->args();
  auto ran = detail::script_ran::no;
  auto pending = detail::run_or_fall_back(self->script, self->redis, self->guard, keys, args, &is_bucket_reply,
                                          "viewer limit", std::move(give_back), &ran); // named: GCC 12, co_await
  self->carry(viewer_ref, owed);
  using carry_end = impl::carry_end;
  std::optional<redis_reply> reply;
  try {
    reply = co_await std::move(pending);
  } catch (...) { // cancelled
    self->settle_carried(viewer_ref, now_ms, owed,
                         ran == detail::script_ran::no ? carry_end::not_sent : carry_end::unknown, 0, *ended);
    throw;
  }
  viewer_limit_decision decision;
  if (reply) {
    auto const answer = *read_bucket_reply(*reply);
    self->mirror(viewer_ref, now_ms, answer.tokens_left);
    self->settle_carried(viewer_ref, now_ms, owed, carry_end::answered, answer.owed_taken, *ended);
    decision = {answer.granted, std::chrono::milliseconds(answer.wait_ms), viewer_limit::account::primary};
  } else {
    bool const not_run = ran == detail::script_ran::no;
    self->settle_carried(viewer_ref, now_ms, owed, not_run ? carry_end::not_sent : carry_end::unknown, 0, *ended);
    // Granted here after a take Redis may have run, the tickets are not owed: Redis may have counted them (if its
    // late reply comes, the compensation gives them back there, and they count nowhere: erring towards the viewer).
    auto const local = self->take_locally(viewer_ref, now_ms, tickets, not_run);
    // At most 10^12 ms (~31 years), as the script's: a tiny rate or share cannot overflow the conversion (nor a
    // NaN reach it: `!(x < cap)` takes the cap).
    double const wait_ms = local.wait_ms < 1e12 ? std::max(local.wait_ms, 0.0) : 1e12;
    decision = {local.granted, std::chrono::milliseconds(static_cast<std::int64_t>(wait_ms)),
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
  double to_redis = tickets;
  if (taken_from == viewer_limit::account::fallback) {
    // Redis counted them only if a take carried them as owed.
    to_redis = self->give_back_locally(viewer_ref, now_ms, tickets);
    if (!(to_redis > 0)) {
      co_return;
    }
  }
  // Taken in Redis: given back there, whether or not the guard would ask Redis now (the local bucket never had
  // them). Not a fallback when it fails: nothing is answered from local state; the tickets stay spent in Redis
  // until the bucket refills. A give-back that runs late is what was wanted.
  auto const command = self->command(viewer_ref, now_ms, -to_redis);
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
