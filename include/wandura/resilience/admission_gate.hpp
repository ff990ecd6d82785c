// The per-counter admission gate of a client (issue 12; docs/protocol.md §1 rate-limit counters, §2 shedding, §3 "after
// a 429, hold every request to that counter"): every request of a client, first attempts and retries alike, passes the
// gate of the rate-limit counter it spends before it is sent, and every response is reported back to it.
//
// - Uncongested (no 429 and no shed prefetch seen for `calm_period`), `admit` is one atomic load: no lock, no
//   allocation, no timer.
// - Congested by a refusal for rate (a 429, or an item refused), requests queue, plays before prefetches and first
//   come first served within a class (a retry keeps its call's place), and leave the queue at the rate room returns on
//   the server: the counter's refill (limit/window per second for continuous counters such as `playback`; the whole
//   window's allowance at each window start for fixed-window counters such as `config`), learnt from
//   `X-RateLimit-Limit`/`X-RateLimit-Window` or from `GET /v1/config`. A 429's `Retry-After` holds the counter, and
//   when it ends the queue drains at the refill rate, never all at once.
// - It keeps learning, additive increase / multiplicative decrease: a 429 while pacing cuts the pacing rate (at most
//   once per hold-off), grants grow it back up to the counter's refill. Several gates in front of one server
//   counter (several clients or processes) each see their own 429s and settle on a share of the refill.
// - It probes: paced at the refill for `calm_period` without a refusal or a shed while requests are still queued,
//   the counter may have more room than it learnt (its limit raised, which pacing under it never draws a 429 to
//   tell), so grants grow the rate past the refill, by `increase` of the rate per second of grants, until a 429
//   cuts it back to the refill (or tells a new limit), or a shed caps it there. Not for fixed-window counters (a
//   window's allowance is known to the unit), nor while a `shared_pace`'s grants pace the counter (the fleet keeps
//   to the published limit; a raised one is found through `GET /v1/config`). A counter refused while its limit is
//   unknown (a 429 without the rate-limit headers, as a proxy may leave it) paces at `unknown_limit_rate` in slow
//   start: each second of grants doubles the rate, until a 429 cuts it or the limit is learnt.
// - Given a `shared_pace` (shared_pace.hpp), the processes of a fleet pace as one: each publishes its hold-offs and
//   learnt limits, takes a fleet-wide grant for every request it releases while congested, and learns within
//   `shared_pace_refresh` of a hold or a 429 another process saw. Slow or failing, the shared pace is left aside and
//   the gate paces alone.
// - While the counter is known to be under the server's 20 % reserve (a shed prefetch told so, with the time until
//   it is back above), prefetches are not sent: they come back `shed`, as the server would have answered. Plays are
//   not paced then: the server still grants them from room the gate cannot see (its bucket holds up to a minute's
//   limit), until it refuses one for rate.
//
// Waiting at the gate is not a retry: it costs no retry budget. Nothing waits on a thread: a queued request is a
// suspended coroutine, woken by a timer on the gate's clock or by a response that returned room.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "wandura/resilience/clock.hpp"
#include "wandura/resilience/shared_pace.hpp"

namespace wandura {

namespace detail {
class gate_counter;
struct admission_gate_probe; // test access to a counter's lock
} // namespace detail

/// What a request asks the counter for: a `play` item is what a viewer waits for; a `prefetch` may be dropped.
/// A batch with any play item is a `play` request.
enum class request_class { play, prefetch };

/// How a rate-limit counter gets its room back (docs/protocol.md §1 table).
enum class refill_kind {
  continuous,  ///< limit/window per second, all the time (`playback`, `catalog`).
  fixed_window ///< the whole limit at the start of each window (`creatives`, `videos`, `video`, `config`).
};

/// The docs/protocol.md §1 refill of a counter by name: `continuous` for `playback` and `catalog` (and any name
/// docs/protocol.md does not list), `fixed_window` for `creatives`, `videos`, `video` and `config`.
[[nodiscard]] refill_kind default_refill(std::string_view counter) noexcept;

/// A counter's limit, as `GET /v1/config` or the rate-limit headers of a 429 tell it.
struct rate_limit {
  std::uint32_t limit = 0;         ///< Units per window (tickets for `playback`, requests otherwise); > 0.
  std::chrono::seconds window{60}; ///< Window length; > 0 (the API's is 60 s).
  refill_kind refill = refill_kind::continuous;
};

/// What one response told about its counter; given to `admission_gate::observe` after every response.
struct counter_feedback {
  int status = 0;                                       ///< HTTP status of the response (0: no response arrived).
  std::optional<std::chrono::milliseconds> retry_after; ///< `Retry-After`, or an item's `retry_after`, parsed.
  std::optional<std::uint32_t> limit;                   ///< `X-RateLimit-Limit`.
  std::optional<std::chrono::seconds> window;           ///< `X-RateLimit-Window`.
  std::uint32_t granted = 0; ///< Units the counter counted (fresh tickets; 1 for a successful read).
  std::uint32_t shed = 0;    ///< Prefetch units refused with reason `prefetch_shed`.
  std::uint32_t refused = 0; ///< Units refused for rate (429 without `prefetch_shed`; 1 for a refused read).
};

/// Fills `limit` and `window` of `out` from the raw `X-RateLimit-Limit` and `X-RateLimit-Window` header values
/// (whole numbers, optional spaces around; a limit of 1 to 2^32 - 1, a window of 1 to 86400 s); an absent or
/// malformed value leaves its field empty. `Retry-After` is read with `parse_retry_after` (retry_after.hpp).
void read_rate_limit_headers(std::optional<std::string_view> limit, std::optional<std::string_view> window,
                             counter_feedback& out) noexcept;

/// How `admission_gate::admit` completed.
enum class admission_verdict {
  admitted,          ///< Send the request now.
  shed,              ///< A prefetch while the counter is under its reserve: do not send; answer its items `shed`.
  deadline_exceeded, ///< The deadline came while the request was queued; nothing was sent.
  cancelled          ///< Cancelled while queued (or the gate was destroyed); nothing was sent.
};

/// The result of `admission_gate::admit`.
struct admission {
  admission_verdict verdict = admission_verdict::admitted;
  clock::duration queued{}; ///< Time spent in the gate's queue (zero when admitted or shed at once).
  [[nodiscard]] bool admitted() const noexcept { return verdict == admission_verdict::admitted; }
};

/// One line saying why a request was not sent, for error messages and logs:
/// "queued behind the playback counter's limit for 4200 ms", "prefetch shed: the playback counter is under its
/// reserve", "cancelled after 120 ms queued behind the playback counter's limit"; empty when admitted.
[[nodiscard]] std::string describe(admission const& a, std::string_view counter);

/// A request that waited longer than `admission_gate_options::long_wait`, reported when it leaves the queue.
struct admission_wait_event {
  std::string_view counter; ///< Valid during the call only.
  request_class cls = request_class::play;
  admission_verdict verdict = admission_verdict::admitted;
  std::chrono::milliseconds queued{0};
  std::size_t queue_length = 0; ///< Requests still queued on the counter when it left.
};

/// Tuning of an `admission_gate`. The defaults suit the Wandura API. Each field's range is below; the gate's
/// constructor refuses a value outside it (NaN included) with `errc::invalid_argument`, and every duration must be
/// >= 0; a duration over 100 years is taken as 100 years (for ever, and within the clock's range).
struct admission_gate_options {
  /// Time without a 429 or a shed, with nothing queued, after which a counter is uncongested again.
  std::chrono::milliseconds calm_period{10000};
  /// Largest burst released while congested, as time of refill (continuous counters).
  std::chrono::milliseconds burst{500};
  /// Pacing rate cut on a 429 while pacing: rate *= decrease. 0 < decrease < 1.
  double decrease = 0.7;
  /// Growth of the pacing rate with grants: one second of grants at the current rate adds this fraction of the
  /// counter's refill (additive increase), up to the refill; of the rate itself while probing past the refill and
  /// while the limit is unknown (after slow start; see the file comment). Finite, >= 0 (0: the rate grows back only
  /// when the counter is calm, and never past the refill).
  double increase = 0.05;
  /// The pacing rate never drops below this fraction of the refill (of `unknown_limit_rate` while the counter's
  /// limit is unknown). 0 <= min_rate_fraction <= 1.
  double min_rate_fraction = 0.05;
  /// Pacing rate (units/s) of a counter whose limit is unknown when it is first congested. Finite, > 0.
  double unknown_limit_rate = 1.0;
  /// Waits at least this long are reported to `on_long_wait`.
  std::chrono::milliseconds long_wait{1000};
  /// Called (outside any lock, on the thread that released the request) for each long wait. Must not throw.
  std::function<void(admission_wait_event const&)> on_long_wait{};

  /// The counters' pace and hold-offs shared with the other processes of a fleet (e.g. `redis_counter_pace`);
  /// null: this gate paces alone. When set, the gate publishes every 429's hold-off and every limit it learns,
  /// releases a queued request of a congested counter only once the fleet granted its units too (so that together
  /// the fleet releases at the counter's refill), and reads the fleet's view of a counter in use at most every
  /// `shared_pace_refresh`. The uncongested path stays one atomic load: the read is started by the first request
  /// after the interval, which does not wait for it.
  std::shared_ptr<wandura::shared_pace> shared_pace{};
  /// How often a counter in use reads the fleet's view (a hold or a 429 another process saw congests it here too).
  std::chrono::milliseconds shared_pace_refresh{100};
  /// The longest the gate waits for a fleet-wide grant before it releases by its own pace alone.
  std::chrono::milliseconds shared_pace_timeout{50};
  /// After a grant failed or timed out, how long the counter paces alone before asking the fleet again.
  std::chrono::milliseconds shared_pace_retry{1000};
};

/// Statistics of one counter of the gate, read from its state.
struct admission_counter_stats {
  std::string counter;
  bool congested = false;
  std::uint32_t limit = 0; ///< Units per window; 0 while unknown.
  std::chrono::seconds window{60};
  double pacing_rate = 0;          ///< Units per second the gate releases while congested.
  std::size_t queued_play = 0;     ///< Play requests waiting now.
  std::size_t queued_prefetch = 0; ///< Prefetch requests waiting now.
  std::uint64_t released = 0;      ///< Requests admitted while congested (at once or after waiting).
  std::uint64_t waited = 0;        ///< Of those, requests that had to queue.
  std::uint64_t shed = 0;          ///< Prefetches answered `shed` without sending.
  std::uint64_t deadline_exceeded = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t decreases = 0;    ///< Multiplicative decreases after a 429 while pacing.
  std::uint64_t fleet_grants = 0; ///< Fleet-wide grants taken from the shared pace (0 without one).
  std::uint64_t fleet_waits = 0;  ///< Grants the fleet refused for now (its room or a fleet-wide hold).
  /// Grants, and reads of the fleet's view before a booked grant is used, that failed or timed out: the counter
  /// paced alone meanwhile.
  std::uint64_t fleet_failures = 0;
  std::uint64_t fleet_congestions = 0;    ///< Times the counter was congested by what another process published.
  std::uint64_t released_last_second = 0; ///< Requests released in the last whole second.
  /// Queue wait of requests that left the queue, in seconds: cumulative bucket counts for `wait_buckets_s`.
  std::array<std::uint64_t, 10> wait_buckets{};
  std::uint64_t wait_count = 0;
  double wait_sum_s = 0;
};

/// Upper bounds (seconds) of `admission_counter_stats::wait_buckets`.
inline constexpr std::array<double, 10> wait_buckets_s{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/// The admission gate of one client: one state per rate-limit counter, shared by every call.
///
/// @par Thread safety
/// Every member function may be called from any thread and any number of coroutines at once. A counter's congested
/// state is guarded by its own mutex; the uncongested path of `admit` and `observe` reads one atomic flag. Queued
/// requests are completed by `asio::post` to their own coroutine's executor, never inline.
///
/// @par Lifetime
/// Destroying the gate completes every queued request with `cancelled`. Timers it armed keep a reference to the
/// counter's state and the clock and end on their own at their wake-up time (at most the earliest queued
/// deadline or the next release). Operations on the shared pace still running keep the `shared_pace` alive, not
/// the gate: their answers are dropped.
class admission_gate {
public:
  /// At most this many distinct counters are tracked, the protocol's six (`playback`, `catalog`, `creatives`,
  /// `videos`, `video`, `config`) among them from the start; requests to further names are never queued. Only names of
  /// 1-64 characters of [A-Za-z0-9._:-] are tracked (every counter of the protocol has such a name): a request to
  /// any other is never queued either, and its 429s, sheds and `set_limit` are not kept. Names tracked go into the
  /// metrics' `counter` label, log lines and a fleet's Redis keys as they are.
  static constexpr std::size_t max_counters = 32;

  /// @param time_source the clock every wait and rate is measured on (`real_clock` when null).
  /// @param options calm period, burst and pacing factors of the gate; copied.
  /// @throws wandura::error `errc::invalid_argument` for an option outside its range (`admission_gate_options`);
  ///         the message names the field.
  explicit admission_gate(std::shared_ptr<wandura::clock> time_source, admission_gate_options options = {});
  admission_gate(admission_gate const&) = delete;
  admission_gate& operator=(admission_gate const&) = delete;
  ~admission_gate();

  /// Waits until a request to `counter` may be sent.
  ///
  /// Completes with:
  /// - `admitted` at once while the counter is uncongested, or while congested when room is there and nobody of
  ///   the same or a higher class waits; otherwise when its turn comes at the pacing rate (with a `shared_pace`,
  ///   and when the fleet granted its units too: never later than `shared_pace_timeout` after its local turn
  ///   because of the shared pace being slow or failing);
  /// - `shed` at once (or while queued) for a `prefetch` while the counter is known to be under its reserve;
  /// - `deadline_exceeded` when `deadline` comes while queued, with `queued` the time it waited, or at once when
  ///   the counter's known 429 hold-off ends at `deadline` or later;
  /// - `cancelled` on cancellation while queued, or when the gate is destroyed.
  /// Never throws for those.
  ///
  /// @param counter the rate-limit counter the request spends (`playback`, `catalog`, ...); viewed, not copied: it
  ///        must stay valid until the returned awaitable completes.
  /// @param cls `play` if the request carries any play item, else `prefetch`.
  /// @param cost units the counter will count if all is granted: items for `playback`, 1 for reads. >= 1.
  /// @param deadline the time by which the request must have been sent: at `deadline` it is too late. Only queued
  ///        requests are judged on it.
  /// @param first_asked when the request's call first asked (its first attempt's; a retry passes it again): a
  ///        queued request goes behind those of its class that asked at that time or before, and before those that
  ///        asked after, so that a retry (after a 429, of the items a response refused) keeps its call's place
  ///        instead of going behind every request that came meanwhile. nullopt (and a time after now): now.
  /// @par Cancellation
  /// Any cancellation that reaches the wait (terminal, from the awaiting coroutine's slot) removes the request
  /// from the queue at once and completes with `cancelled`. It must be emitted on the awaiting coroutine's thread.
  /// @par Retries and idempotency
  /// Waiting here is not a retry and is not counted by the retry budget.
  [[nodiscard]] asio::awaitable<admission> admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                 clock::time_point deadline,
                                                 std::optional<clock::time_point> first_asked = std::nullopt);
  /// `admit` without suspending: the verdict when it can be given at once (the counter is uncongested; or it is
  /// congested and the request is admitted with room and nobody ahead, shed, or past its deadline), nullopt when
  /// the request would have to queue (then `co_await admit(...)`). Costs no coroutine frame: callers on a hot path
  /// try this first. `executor` runs the background read of the fleet's view when one is due (with a shared pace).
  /// Same parameters as `admit`; thread safety as `admit`. Never throws.
  [[nodiscard]] std::optional<admission> try_admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                   clock::time_point deadline,
                                                   asio::any_io_executor const& executor) noexcept;
  /// `try_admit` judged at `now`, a reading of the gate's clock the caller has just taken for its own use: a hot
  /// path then reads the clock once (a real clock read is a vDSO call, tens to hundreds of ns on a virtual machine).
  /// `now` must come from the clock the gate was made with, read after anything the caller awaited.
  [[nodiscard]] std::optional<admission> try_admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                   clock::time_point deadline, asio::any_io_executor const& executor,
                                                   clock::time_point now) noexcept;

  /// Reports one response on `counter` (after every attempt that got a response or failed). A 429 or a shed
  /// congests the counter; while congested, grants grow the pacing rate and 429s cut it. Cheap (one atomic load)
  /// for a success on an uncongested counter.
  void observe(std::string_view counter, counter_feedback const& feedback);
  /// `observe` at `now`, the caller's reading of the gate's clock (see the `try_admit` overload).
  void observe(std::string_view counter, counter_feedback const& feedback, clock::time_point now);

  /// Sets a counter's limit, e.g. from `GET /v1/config` (`limits.playback` tickets per 60 s, continuous). Also
  /// learnt from `X-RateLimit-Limit`/`X-RateLimit-Window` in `observe`.
  void set_limit(std::string_view counter, rate_limit limit);

  /// True while `counter` is known to be under its prefetch reserve: leave prefetch items out of a batch and
  /// answer them `shed`. One atomic load and a clock read; false when the counter is uncongested (as `congested`
  /// reads it).
  [[nodiscard]] bool under_reserve(std::string_view counter) const noexcept;
  /// `under_reserve` at `now`, the caller's reading of the gate's clock (see the `try_admit` overload).
  [[nodiscard]] bool under_reserve(std::string_view counter, clock::time_point now) const noexcept;

  /// The end of `counter`'s current 429 hold-off: no request to it is released before. `time_point::min()` while
  /// it is uncongested (one atomic load then; as `congested` reads it). A retry engine checks it against a call's
  /// deadline before planning a retry that could not start in time.
  [[nodiscard]] clock::time_point held_until(std::string_view counter) const;

  /// True while `counter` is congested (requests to it may queue). Read as of now: a counter that has seen no 429
  /// and no shed for `calm_period`, with its hold-off over and nobody queued, reads uncongested at once (the read
  /// calms it, as the next request would), not only once another request has passed. One atomic load while
  /// uncongested, the counter's lock otherwise.
  [[nodiscard]] bool congested(std::string_view counter) const noexcept;

  /// One entry per counter tracked, in first-seen order: the protocol's six from the start, then each other
  /// counter seen (or set by `set_limit`). Read as of now, as `congested` reads a counter.
  [[nodiscard]] std::vector<admission_counter_stats> stats() const;

  /// The statistics as Prometheus text lines (`wandura_gate_*` with a `counter` label), to append to a client's
  /// `metrics_text()`. Every value reads back as `stats()` read it: counts in every digit, the pacing rate and the
  /// wait sum as the shortest text that reads back as the same double.
  [[nodiscard]] std::string metrics_text() const;

private:
  friend struct detail::admission_gate_probe;
  [[nodiscard]] detail::gate_counter* find(std::string_view counter) const noexcept;
  [[nodiscard]] detail::gate_counter* find_or_add(std::string_view counter);
  /// The overloads of `try_admit` and `observe`; `now` read when needed if not given.
  [[nodiscard]] std::optional<admission> try_admit_at(std::string_view counter, request_class cls, std::uint32_t cost,
                                                      clock::time_point deadline, asio::any_io_executor const& executor,
                                                      std::optional<clock::time_point> now) noexcept;
  void observe_at(std::string_view counter, counter_feedback const& feedback, std::optional<clock::time_point> now);

  std::shared_ptr<wandura::clock> clock_;
  std::shared_ptr<admission_gate_options const> options_;
  /// Published entries are immutable (the pointer; the state has its own lock); `size_` is released after each.
  std::array<std::shared_ptr<detail::gate_counter>, max_counters> counters_{};
  std::atomic<std::size_t> size_{0};
  std::mutex add_mutex_; ///< Serialises adding counters; never taken by lookups.
};

} // namespace wandura
