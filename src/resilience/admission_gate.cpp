#include "wandura/resilience/admission_gate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "gate_counter.hpp"
#include "resilience/checked_options.hpp"
#include "wandura/error.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura {
namespace {

std::shared_ptr<wandura::clock> default_clock() {
  static auto const shared = std::make_shared<real_clock>();
  return shared;
}

/// The counters of docs/protocol.md §1, known from the start so that their lookups never take the adding lock.
constexpr std::array<std::string_view, 6> spec_counters{"playback", "catalog", "creatives",
                                                        "videos",   "video",   "config"};

/// The longest duration an option is taken as (admission_gate_options).
constexpr std::chrono::milliseconds longest_option = std::chrono::hours(24 * 365 * 100);

/// Whether `name` may be a counter's: 1-64 characters of [A-Za-z0-9._:-], as every counter of the protocol is. A
/// counter's name goes into metrics labels, log lines and the fleet's Redis keys, and may come from the server (the
/// limits of `GET /v1/config` are keyed by it): any other name is not tracked.
bool is_counter_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '-';
  });
}

std::optional<std::uint64_t> read_uint(std::optional<std::string_view> text) noexcept {
  if (!text) {
    return std::nullopt;
  }
  auto const v = trim_ows(*text);
  std::uint64_t value = 0;
  auto const [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return std::nullopt;
  }
  return value;
}

/// The path of `admit` for a counter that is congested or due to read the fleet's view: decided at once under the
/// counter's lock when it can be, else queued until the counter releases it, its deadline passes or it is cancelled.
asio::awaitable<admission> wait_congested(detail::gate_counter& counter, request_class cls, std::uint32_t cost,
                                          clock::time_point deadline, std::optional<clock::time_point> first_asked) {
  if (counter.take_refresh()) { // with a shared pace: the fleet's view is read in the background, not waited for
    counter.start_refresh(co_await asio::this_coro::executor);
  }
  if (!counter.congested()) {
    co_return admission{};
  }
  if (auto decided = counter.decide_now(cls, cost, deadline)) {
    co_return *decided;
  }
  auto state = counter.shared_from_this();
  auto waiter = std::make_shared<detail::gate_waiter>();
  waiter->cls = cls;
  waiter->cost = cost;
  waiter->deadline = deadline;
  waiter->first_asked = first_asked;
  auto const executor = co_await asio::this_coro::executor;
  auto initiation = [state, waiter, executor](auto handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto target = asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked);
    waiter->context = &detail::context_of(target);
    auto shared = std::make_shared<decltype(handler)>(std::move(handler));
    // Completion is posted to the coroutine's executor, never run inline; the slot is cleared there.
    waiter->complete = [shared, target, slot](admission result) mutable {
      asio::post(target, [shared, slot, result]() mutable {
        slot.clear();
        std::move (*shared)(result);
      });
    };
    if (slot.is_connected()) {
      slot.assign([state, waiter](asio::cancellation_type) { state->cancel(*waiter); });
    }
    state->enqueue(waiter, executor);
  };
  try {
    auto wait = asio::async_initiate<asio::use_awaitable_t<> const, void(admission)>(std::move(initiation),
                                                                                     asio::use_awaitable);
    admission const result = co_await std::move(wait);
    co_return result;
  } catch (std::system_error const& e) {
    // Awaiting after a cancellation was requested throws operation_aborted before anything is queued.
    if (e.code() != asio::error::operation_aborted) {
      throw;
    }
  }
  co_return admission{admission_verdict::cancelled, {}};
}

} // namespace

refill_kind default_refill(std::string_view counter) noexcept {
  for (std::string_view fixed : {"creatives", "videos", "video", "config"}) {
    if (counter == fixed) {
      return refill_kind::fixed_window;
    }
  }
  return refill_kind::continuous;
}

void read_rate_limit_headers(std::optional<std::string_view> limit, std::optional<std::string_view> window,
                             counter_feedback& out) noexcept {
  if (auto v = read_uint(limit); v && *v > 0 && *v <= UINT32_MAX) {
    out.limit = static_cast<std::uint32_t>(*v);
  }
  if (auto v = read_uint(window); v && *v > 0 && *v <= 86400) {
    out.window = std::chrono::seconds(static_cast<std::int64_t>(*v));
  }
}

std::string describe(admission const& a, std::string_view counter) {
  auto const ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(a.queued).count());
  std::string const behind = "the " + std::string(counter) + " counter's limit";
  switch (a.verdict) {
  case admission_verdict::admitted: return {};
  case admission_verdict::shed: return "prefetch shed: the " + std::string(counter) + " counter is under its reserve";
  case admission_verdict::deadline_exceeded: return "queued behind " + behind + " for " + ms + " ms";
  case admission_verdict::cancelled: return "cancelled after " + ms + " ms queued behind " + behind;
  }
  return {};
}

namespace detail {

/// `options` (durations over `longest_option` taken as it), or `errc::invalid_argument` naming the first field outside
/// its range: a factor out of range would turn the rule around (a `decrease` of 1.5 raises the rate on every 429) or
/// stall a counter (a pacing rate of 0 releases nothing until each deadline).
admission_gate_options checked_admission_options(admission_gate_options options) {
  auto const refuse = [](std::string_view what) {
    throw error(errc::invalid_argument, "admission gate: " + std::string(what));
  };
  // Written so that NaN fails every check.
  if (!(options.decrease > 0.0 && options.decrease < 1.0)) {
    refuse("decrease must be > 0 and < 1");
  }
  if (!(options.increase >= 0.0 && std::isfinite(options.increase))) {
    refuse("increase must be finite and >= 0");
  }
  if (!(options.min_rate_fraction >= 0.0 && options.min_rate_fraction <= 1.0)) {
    refuse("min_rate_fraction must be >= 0 and <= 1");
  }
  if (!(options.unknown_limit_rate > 0.0 && std::isfinite(options.unknown_limit_rate))) {
    refuse("unknown_limit_rate must be finite and > 0");
  }
  using ms = std::chrono::milliseconds;
  for (auto const& [value, name] : {std::pair<ms, std::string_view>{options.calm_period, "calm_period"},
                                    {options.burst, "burst"},
                                    {options.long_wait, "long_wait"},
                                    {options.shared_pace_refresh, "shared_pace_refresh"},
                                    {options.shared_pace_timeout, "shared_pace_timeout"},
                                    {options.shared_pace_retry, "shared_pace_retry"}}) {
    if (value < ms::zero()) {
      refuse(std::string(name) + " must not be negative");
    }
  }
  // Compared with the clock's nanoseconds: beyond ~292 years they would overflow (a calm period of
  // milliseconds::max() read as calm at once). 100 years is for ever here.
  for (ms* value : {&options.calm_period, &options.burst, &options.long_wait, &options.shared_pace_refresh,
                    &options.shared_pace_timeout, &options.shared_pace_retry}) {
    *value = std::min(*value, longest_option);
  }
  return options;
}

} // namespace detail

admission_gate::admission_gate(std::shared_ptr<wandura::clock> time_source, admission_gate_options options)
    : clock_(time_source ? std::move(time_source) : default_clock()),
      options_(std::make_shared<admission_gate_options const>(detail::checked_admission_options(std::move(options)))) {
  for (auto name : spec_counters) {
    (void)find_or_add(name);
  }
}

admission_gate::~admission_gate() {
  for (std::size_t i = 0, n = size_.load(std::memory_order_acquire); i < n; ++i) {
    counters_[i]->close();
  }
}

detail::gate_counter* admission_gate::find(std::string_view counter) const noexcept {
  for (std::size_t i = 0, n = size_.load(std::memory_order_acquire); i < n; ++i) {
    if (counters_[i]->name() == counter) {
      return counters_[i].get();
    }
  }
  return nullptr;
}

detail::gate_counter* admission_gate::find_or_add(std::string_view counter) {
  if (auto* found = find(counter)) {
    return found;
  }
  std::lock_guard lock(add_mutex_);
  if (auto* found = find(counter)) { // added by another thread meanwhile
    return found;
  }
  auto const n = size_.load(std::memory_order_relaxed);
  if (n == max_counters || !is_counter_name(counter)) {
    return nullptr;
  }
  counters_[n] =
      std::make_shared<detail::gate_counter>(std::string(counter), default_refill(counter), clock_, options_);
  size_.store(n + 1, std::memory_order_release);
  return counters_[n].get();
}

std::optional<admission> admission_gate::try_admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                   clock::time_point deadline,
                                                   asio::any_io_executor const& executor) noexcept {
  return try_admit_at(counter, cls, cost, deadline, executor, std::nullopt);
}

std::optional<admission> admission_gate::try_admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                   clock::time_point deadline, asio::any_io_executor const& executor,
                                                   clock::time_point now) noexcept {
  return try_admit_at(counter, cls, cost, deadline, executor, now);
}

std::optional<admission> admission_gate::try_admit_at(std::string_view counter, request_class cls, std::uint32_t cost,
                                                      clock::time_point deadline, asio::any_io_executor const& executor,
                                                      std::optional<clock::time_point> now) noexcept {
  auto* found = find(counter);
  if (found == nullptr || found->quiet()) {
    return admission{}; // the uncongested path: one atomic load
  }
  try {
    if (found->take_refresh()) { // with a shared pace: the fleet's view is read in the background
      found->start_refresh(executor);
    }
    if (!found->congested()) {
      return admission{};
    }
    return found->decide_now(cls, std::max<std::uint32_t>(cost, 1), deadline, now);
  } catch (...) { // out of memory starting the read or deciding: the queued path decides (and reports) instead
    return std::nullopt;
  }
}

asio::awaitable<admission> admission_gate::admit(std::string_view counter, request_class cls, std::uint32_t cost,
                                                 clock::time_point deadline,
                                                 std::optional<clock::time_point> first_asked) {
  auto* found = find(counter);
  if (found == nullptr || found->quiet()) {
    co_return admission{}; // the uncongested path: one atomic load, and a frame no bigger than the arguments
  }
  auto wait = wait_congested(*found, cls, std::max<std::uint32_t>(cost, 1), deadline, first_asked);
  co_return co_await std::move(wait);
}

void admission_gate::observe(std::string_view counter, counter_feedback const& feedback) {
  observe_at(counter, feedback, std::nullopt);
}

void admission_gate::observe(std::string_view counter, counter_feedback const& feedback, clock::time_point now) {
  observe_at(counter, feedback, now);
}

void admission_gate::observe_at(std::string_view counter, counter_feedback const& feedback,
                                std::optional<clock::time_point> now) {
  bool const pressure = feedback.status == 429 || feedback.shed > 0 || feedback.refused > 0;
  auto* found = pressure ? find_or_add(counter) : find(counter);
  if (found == nullptr || (!pressure && !found->congested())) {
    return; // a success on an uncongested counter: one atomic load
  }
  found->observe(feedback, now);
}

void admission_gate::set_limit(std::string_view counter, rate_limit limit) {
  if (auto* found = find_or_add(counter)) {
    found->set_limit(limit);
  }
}

bool admission_gate::under_reserve(std::string_view counter) const noexcept {
  auto* found = find(counter);
  if (found == nullptr || !found->congested()) {
    return false; // calm: one atomic load, no clock read
  }
  auto const now = clock_->now();
  return found->congested_at(now) && found->under_reserve(now);
}

bool admission_gate::under_reserve(std::string_view counter, clock::time_point now) const noexcept {
  auto* found = find(counter);
  return found != nullptr && found->congested_at(now) && found->under_reserve(now);
}

clock::time_point admission_gate::held_until(std::string_view counter) const {
  auto* found = find(counter);
  return found != nullptr ? found->held_until() : clock::time_point::min();
}

bool admission_gate::congested(std::string_view counter) const noexcept {
  auto* found = find(counter);
  return found != nullptr && found->congested_at(clock_->now());
}

std::vector<admission_counter_stats> admission_gate::stats() const {
  std::vector<admission_counter_stats> out;
  for (std::size_t i = 0, n = size_.load(std::memory_order_acquire); i < n; ++i) {
    out.push_back(counters_[i]->stats());
  }
  return out;
}

} // namespace wandura
