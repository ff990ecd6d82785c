#include "wandura/resilience/retry_engine.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <asio/error.hpp>
#include <asio/this_coro.hpp>

#include "wandura/resilience/classify.hpp"
#include "wandura/resilience/error_body.hpp"
#include "wandura/resilience/idempotency.hpp"
#include "wandura/resilience/retry_after.hpp"

namespace wandura {
namespace {

std::shared_ptr<wandura::clock> default_clock() {
  static auto const shared = std::make_shared<real_clock>();
  return shared;
}

/// A backoff in fractional ms as a clock duration, clamped to [0, 2 years] so that `now + d` cannot overflow.
clock::duration to_clock_duration(std::chrono::duration<double, std::milli> d) noexcept {
  constexpr double max_ms = 2.0 * 365 * 24 * 3600 * 1000;
  double ms = d.count();
  if (!(ms > 0.0)) {
    return clock::duration::zero();
  }
  ms = std::min(ms, max_ms);
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

std::optional<std::string_view> find_request_header(http_request const& request, std::string_view name) {
  for (auto const& h : request.headers) {
    if (iequals(h.name, name)) {
      return std::string_view(h.value);
    }
  }
  return std::nullopt;
}

bool is_cancelled(asio::cancellation_state const& state) noexcept {
  return state.cancelled() != asio::cancellation_type::none;
}

} // namespace

retry_engine::retry_engine(http_sender& sender, retry_options options)
    : sender_(sender), options_(std::move(options)),
      clock_(options_.time_source ? options_.time_source : default_clock()), budget_(clock_->now(), options_.budget) {}

retry_engine::~retry_engine() = default;

call_settings retry_engine::settings_for(call_options const& per_call) const {
  return merge_options(per_call, options_, clock_->now());
}

double retry_engine::draw() const {
  if (options_.random) {
    return options_.random();
  }
  // Per-thread generator: no shared state between threads; it is not an option, so coroutine migration between
  // threads does not matter.
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::generate_canonical<double, 53>(generator);
}

backoff_delay retry_engine::next_delay(retry_policy const& policy, int retry,
                                       std::optional<std::chrono::milliseconds> retry_after) const {
  return compute_backoff(policy, retry, retry_after, draw());
}

bool retry_engine::fits_deadline(call_settings const& settings, clock::duration delay) const noexcept {
  auto const now = clock_->now();
  if (now >= settings.deadline) {
    return false;
  }
  // A wait ending exactly at the deadline leaves no time for the attempt: it does not fit either.
  return delay < settings.deadline - now;
}

void retry_engine::notify_retry(retry_event const& event) {
  // A throwing hook or logger must not turn a retry into a crash or a lost call.
  if (options_.on_retry) {
    try {
      options_.on_retry(event);
    } catch (...) {
    }
  }
  if (options_.log) {
    try {
      options_.log(log_level::warn, format_retry_line(event));
    } catch (...) {
    }
  }
}

asio::awaitable<std::error_code> retry_engine::sleep_until(clock::time_point when) {
  try {
    co_return co_await clock_->sleep_until(when);
  } catch (std::system_error const& e) {
    // Awaiting after a cancellation was requested throws operation_aborted (Asio's throw_if_cancelled).
    co_return e.code();
  }
}

void retry_engine::hold_counter(std::string_view counter, std::chrono::milliseconds retry_after) {
  if (retry_after.count() <= 0) {
    return;
  }
  retry_after = std::min(retry_after, max_holdoff);
  holdoffs_.hold(counter, clock_->now() + std::chrono::duration_cast<clock::duration>(retry_after));
}

retry_engine_stats retry_engine::stats() const noexcept {
  retry_engine_stats s;
  s.calls = counters_.calls.load(std::memory_order_relaxed);
  s.attempts = counters_.attempts.load(std::memory_order_relaxed);
  s.retries = counters_.retries.load(std::memory_order_relaxed);
  s.budget_denied = counters_.budget_denied.load(std::memory_order_relaxed);
  s.deadline_stops = counters_.deadline_stops.load(std::memory_order_relaxed);
  s.holdoff_waits = counters_.holdoff_waits.load(std::memory_order_relaxed);
  return s;
}

asio::awaitable<call_result> retry_engine::call(http_request request, request_traits traits, call_settings settings) {
  call_result result;
  result.total_timeout = settings.total_timeout;
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  auto& clk = *clock_;

  auto finish = [&](stop_reason why) -> call_result&& {
    result.stopped = why;
    result.retries = result.attempts > 0 ? result.attempts - 1 : 0;
    if (why == stop_reason::deadline_exceeded) {
      counters_.deadline_stops.fetch_add(1, std::memory_order_relaxed);
    }
    if (why == stop_reason::cancelled) {
      result.error = asio::error::operation_aborted;
    }
    return std::move(result);
  };

  // Idempotency (SPEC §1, seed 004): one key per logical call, on every attempt, with the same body.
  request_safety safety = request_safety::read;
  if (traits.is_write || request.method == http_method::post) { // every POST is a write, whatever the traits say
    std::string key;
    auto const existing = find_request_header(request, idempotency_key_header);
    bool const caller_key = existing.has_value() || settings.idempotency_key.has_value();
    if (existing) {
      key.assign(*existing);
    } else if (settings.idempotency_key) {
      key = *settings.idempotency_key;
    }
    if (caller_key) {
      if (auto ec = validate_idempotency_key(key)) {
        result.error = ec;
        co_return finish(stop_reason::invalid_request);
      }
    } else if (settings.auto_idempotency_keys) {
      if (auto ec = make_idempotency_key(key)) {
        result.error = ec;
        co_return finish(stop_reason::invalid_request);
      }
    }
    if (!key.empty()) {
      if (!existing) {
        request.headers.push_back({std::string(idempotency_key_header), key});
      }
      result.idempotency_key = std::move(key);
      safety = request_safety::keyed_write;
    } else {
      safety = request_safety::unkeyed_write;
    }
  }

  // One clock read for the budget and the first attempt: nothing suspends between them.
  auto now = clk.now();
  if (settings.count_request) {
    budget_.note_request(now); // seed 000: requests counted per logical call
  }

  auto const attempt_limit = std::max(settings.attempt_timeout, traits.attempt_timeout_floor);
  int const max_retries = std::max(settings.policy.max_retries, 0);
  int const retries_before = std::max(settings.retries_done, 0); // made by earlier requests of the same call

  for (int attempt = 1;; ++attempt) {
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) {
      co_return finish(stop_reason::cancelled);
    }

    // After a 429 on this counter, every request to it waits until the server's Retry-After has passed.
    if (attempt > 1) {
      now = clk.now(); // after the backoff sleep
    }
    auto const held = holdoffs_.held_until(traits.counter);
    if (held > now) {
      if (held >= settings.deadline) {
        if (attempt == 1) {
          result.error = errc::rate_limited;
        }
        result.note = "counter '" + traits.counter + "' is held back after a 429 past the deadline";
        co_return finish(stop_reason::deadline_exceeded);
      }
      counters_.holdoff_waits.fetch_add(1, std::memory_order_relaxed);
      if (co_await sleep_until(held)) {
        co_return finish(stop_reason::cancelled);
      }
      now = clk.now();
    }
    if (now >= settings.deadline) {
      if (attempt == 1) {
        result.error = errc::deadline_exceeded;
      }
      co_return finish(stop_reason::deadline_exceeded);
    }

    // Each attempt's timeout is min(attempt timeout, time left); 0 means "no limit" on both sides.
    attempt_options options;
    bool deadline_bound = false;
    if (settings.deadline != clock::time_point::max()) {
      auto const left = std::max(std::chrono::floor<std::chrono::milliseconds>(settings.deadline - now),
                                 std::chrono::milliseconds(1));
      deadline_bound = attempt_limit.count() <= 0 || left < attempt_limit;
      options.timeout = deadline_bound ? left : attempt_limit;
    } else {
      options.timeout = std::max(attempt_limit, std::chrono::milliseconds(0));
    }
    if (options.timeout.count() > 0) {
      options.connect_timeout = std::min(options.connect_timeout, options.timeout);
    }

    result.attempts = attempt;
    counters_.attempts.fetch_add(1, std::memory_order_relaxed);
    attempt_result outcome;
    try {
      outcome = co_await sender_.send_attempt(request, options);
    } catch (std::system_error const& e) {
      outcome.error = e.code();
    } catch (std::bad_alloc const&) {
      throw;
    } catch (std::exception const&) {
      outcome.error = errc::transport_failed; // a misbehaving sender must not escape as an unknown exception
    }

    result.error = outcome.error;
    result.error_code.clear();
    result.reason.clear();
    result.replayed = false;
    std::optional<std::chrono::milliseconds> retry_after;
    if (outcome.error) {
      result.response = http_response{};
    } else {
      result.response = std::move(outcome.response);
      int const status = result.response.status;
      if (status < 200 || status >= 300) {
        auto body = parse_error_body(result.response.body);
        result.error_code = std::move(body.error_code);
        result.reason = std::move(body.reason);
      }
      result.replayed = result.response.idempotency_replayed();
      if (auto raw = result.response.retry_after()) {
        retry_after = parse_retry_after(*raw, result.response.date(), clk.system_now());
      }
      // A 429 that only shed prefetches is not the counter running out: the server still grants plays (seed 001
      // "Quá tải nhẹ nhàng"), so it must not hold the plays of every other call back.
      if (status == 429 && retry_after && result.reason != "prefetch_shed") {
        hold_counter(traits.counter, *retry_after); // the server's full value, not the policy's backoff cap
      }
    }

    auto const verdict = classify_attempt({outcome.error, result.response.status, result.error_code},
                                          settings.policy.classifier, safety);
    switch (verdict.verdict) {
    case attempt_verdict::success: co_return finish(stop_reason::success);
    case attempt_verdict::cancelled: co_return finish(stop_reason::cancelled);
    case attempt_verdict::final: result.note = std::string(verdict.note); co_return finish(stop_reason::not_retryable);
    case attempt_verdict::retry: break;
    }

    now = clk.now();
    if (now >= settings.deadline || (deadline_bound && outcome.error == condition::timeout)) {
      result.note = "the attempt used the time left";
      co_return finish(stop_reason::deadline_exceeded);
    }
    int const retry = retries_before + attempt; // the number of the retry this would be, 1-based, in the call
    if (retry > max_retries) {
      co_return finish(stop_reason::retries_exhausted);
    }
    auto const delay = next_delay(settings.policy, retry, retry_after);
    auto const wait = to_clock_duration(delay.delay);
    // The next attempt starts after the backoff and after the counter's hold-off (a Retry-After above the policy's
    // cap still holds the counter): both must end before the deadline, or the retry is not made at all.
    auto const held_to = holdoffs_.held_until(traits.counter); // time_point::min() when not held: no subtraction
    auto const start_in = held_to > now ? std::max(wait, held_to - now) : wait;
    if (!fits_deadline(settings, start_in)) {
      // Seed 004: stop when now + delay passes the total deadline, and report the last real error.
      result.note = "the next retry in " +
                    std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(start_in).count()) +
                    " ms would end past it";
      co_return finish(stop_reason::deadline_exceeded);
    }
    if (!budget_.try_retry(now)) {
      counters_.budget_denied.fetch_add(1, std::memory_order_relaxed);
      co_return finish(stop_reason::budget_exhausted);
    }
    counters_.retries.fetch_add(1, std::memory_order_relaxed);

    retry_event event;
    event.retry = retry;
    event.max_retries = max_retries;
    event.delay = std::chrono::round<std::chrono::milliseconds>(wait);
    event.source = delay.source;
    event.http_status = result.response.status;
    event.error = outcome.error;
    event.error_code = result.error_code;
    event.budget_left = budget_.snapshot(now).left;
    event.idempotency_key = result.idempotency_key;
    event.counter = traits.counter;
    notify_retry(event);

    if (co_await sleep_until(now + wait)) {
      co_return finish(stop_reason::cancelled);
    }
  }
}

} // namespace wandura
