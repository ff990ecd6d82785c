#include "wandura/resilience/retry_engine.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/resilience/classify.hpp"
#include "wandura/resilience/idempotency.hpp"
#include "wandura/resilience/retry_after.hpp"

#include "request_target.hpp"
#include "resilience/checked_options.hpp"
#include "resilience/error_body.hpp"
#include "resilience/observed_attempt.hpp"

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

/// What a response of one unit says about its counter: a 2xx granted it, a 429 refused it.
void count_by_status(call_result const& response, counter_feedback& feedback) noexcept {
  int const status = response.response.status;
  if (status >= 200 && status < 300) {
    feedback.granted = 1;
  } else if (status == 429) {
    feedback.refused = 1;
  }
}

bool is_cancelled(asio::cancellation_state const& state) noexcept {
  return state.cancelled() != asio::cancellation_type::none;
}

/// Sleeps on `clk` until `when`: empty error, or `operation_aborted` when cancelled (also when a cancellation was
/// requested before the wait began: Asio's throw_if_cancelled then throws instead).
asio::awaitable<std::error_code> sleep_on(wandura::clock& clk, clock::time_point when) {
  try {
    co_return co_await clk.sleep_until(when);
  } catch (std::system_error const& e) {
    co_return e.code();
  }
}

/// Lets everything already queued on the executor run first: true when that cancelled this coroutine. After a sleep,
/// before the next attempt: the cancellation of a call whose last caller left as its retry fell due is posted behind
/// the sleep's completion, and must be seen before anything more is sent.
asio::awaitable<bool> yield_turn() {
  try {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  } catch (std::system_error const&) {
    co_return true; // cancelled before the turn began: Asio's throw_if_cancelled
  }
  co_return is_cancelled(co_await asio::this_coro::cancellation_state);
}

/// The last moment an attempt of the call may start: `min_time_left` before its deadline, at most half the call's
/// total time before (request_traits::min_time_left).
clock::time_point last_start(call_settings const& settings, request_traits const& traits) noexcept {
  if (settings.deadline == clock::time_point::max() || traits.min_time_left <= clock::duration::zero() ||
      settings.total_timeout <= clock::duration::zero()) {
    return settings.deadline;
  }
  // At most half the total: the deadline is the call's start plus the total (or max()), so this stays after it.
  return settings.deadline - std::min<clock::duration>(traits.min_time_left, settings.total_timeout / 2);
}

/// A duration as a note says it: whole milliseconds, "1565 ms".
std::string ms_text(clock::duration d) {
  return std::to_string(std::chrono::floor<std::chrono::milliseconds>(d).count()) + " ms";
}

/// Whether a wait of `delay` from `now` ends before `deadline`: one ending exactly at it leaves no time to send.
bool fits_deadline(clock::time_point deadline, clock::time_point now, clock::duration delay) noexcept {
  return now < deadline && delay < deadline - now;
}

/// Gives a write its `Idempotency-Key` (docs/protocol.md §1): the caller's (validated) or an automatic one, unless
/// automatic keys are off. `fresh` drops a key already on the request: a follow-up request has another body.
std::error_code attach_key(http_request& request, call_settings const& settings, bool fresh, std::string& key,
                           request_safety& safety) {
  auto const is_key = [](http_header const& h) { return iequals(h.name, idempotency_key_header); };
  if (fresh) {
    std::erase_if(request.headers, is_key);
  }
  auto const existing = std::find_if(request.headers.begin(), request.headers.end(), is_key);
  bool const has_header = existing != request.headers.end();
  if (has_header && std::find_if(std::next(existing), request.headers.end(), is_key) != request.headers.end()) {
    key.clear();
    return errc::invalid_idempotency_key; // two keys: which one names the logical call?
  }
  bool const caller_key = has_header || (!fresh && settings.idempotency_key.has_value());
  key.clear();
  if (has_header) {
    key = existing->value;
  } else if (caller_key) {
    key = *settings.idempotency_key;
  }
  if (caller_key) {
    if (auto ec = validate_idempotency_key(key)) {
      return ec;
    }
  } else if (settings.auto_idempotency_keys) {
    if (auto ec = make_idempotency_key(key)) {
      return ec;
    }
  }
  if (key.empty()) {
    safety = request_safety::unkeyed_write;
    return {};
  }
  if (!has_header) {
    request.headers.push_back({std::string(idempotency_key_header), key});
  }
  safety = request_safety::keyed_write;
  return {};
}

/// The limits of one attempt: timeout = min(attempt timeout, time left), 0 meaning "no limit" on both sides.
/// `deadline_bound` tells whether the time left was the smaller.
attempt_options attempt_limits(std::chrono::milliseconds attempt_limit, clock::time_point deadline,
                               clock::time_point now, bool& deadline_bound) {
  attempt_options options;
  deadline_bound = false;
  if (deadline != clock::time_point::max()) {
    auto const left =
        std::max(std::chrono::floor<std::chrono::milliseconds>(deadline - now), std::chrono::milliseconds(1));
    deadline_bound = attempt_limit.count() <= 0 || left < attempt_limit;
    options.timeout = deadline_bound ? left : attempt_limit;
  } else {
    options.timeout = std::max(attempt_limit, std::chrono::milliseconds(0));
  }
  if (options.timeout.count() > 0) {
    options.connect_timeout = std::min(options.connect_timeout, options.timeout);
  }
  return options;
}

} // namespace

void response_reader::read_counter_feedback(call_result const& response, counter_feedback& feedback) {
  count_by_status(response, feedback);
}

namespace detail {

// The budget class itself takes any value leniently (retry_budget.hpp); a client refuses what it could only have
// meant by mistake.
retry_options checked_retry_options(retry_options options) {
  check_retry_policy(options.policy);
  auto const& budget = options.budget;
  if (budget.min_retries < 0 || budget.percent < 0) {
    throw error(errc::invalid_argument, "retry budget: min_retries and percent must be >= 0");
  }
  if (budget.window < std::chrono::milliseconds(1)) {
    throw error(errc::invalid_argument, "retry budget: window must be at least 1 ms");
  }
  options.admission = checked_admission_options(std::move(options.admission));
  return options;
}

} // namespace detail

retry_engine::retry_engine(http_sender& sender, retry_options options)
    : sender_(sender), options_(detail::checked_retry_options(std::move(options))),
      clock_(options_.time_source ? options_.time_source : default_clock()), budget_(clock_->now(), options_.budget),
      gate_(clock_, options_.admission) {}

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

void retry_engine::notify_retry(retry_event const& event) {
  // A throwing hook or logger must not turn a retry into a crash or a lost call: counted (metrics), then ignored.
  if (options_.on_retry) {
    try {
      options_.on_retry(event);
    } catch (...) {
      counters_.hook_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (options_.log) {
    try {
      write_log(log_level::warn, format_retry_line(event));
    } catch (...) {
      counters_.hook_errors.fetch_add(1, std::memory_order_relaxed); // out of memory formatting the line
    }
  }
}

void retry_engine::write_log(log_level level, std::string_view message) noexcept {
  if (options_.log) {
    try {
      options_.log(level, message);
    } catch (...) {
      counters_.hook_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

clock::duration retry_engine::counter_wait_from(std::string_view counter, clock::time_point now) const {
  auto const held = gate_.held_until(counter); // time_point::min() when not held: no subtraction
  return held > now ? held - now : clock::duration::zero();
}

asio::awaitable<admission> retry_engine::wait_for_counter(std::string_view counter, request_class cls,
                                                          std::uint32_t cost, clock::time_point deadline,
                                                          clock::time_point first_asked) {
  admission const admitted = co_await gate_.admit(counter, cls, cost, deadline, first_asked);
  co_return admitted;
}

void retry_engine::note_response(std::string_view counter, call_result const& response,
                                 std::optional<std::chrono::milliseconds> retry_after, response_reader* reader,
                                 std::optional<clock::time_point> now) {
  if (!response.has_response()) {
    return; // no answer: nothing learnt about the counter
  }
  counter_feedback feedback;
  feedback.status = response.response.status;
  if (retry_after && retry_after->count() > 0) {
    // The server's full value, not the policy's `max_retry_after` (that caps a backoff, not the server's rate
    // limit), up to `max_holdoff`, so that one broken header cannot block a counter for a year.
    feedback.retry_after = std::min(*retry_after, max_holdoff);
  }
  if (reader != nullptr) {
    reader->read_counter_feedback(response, feedback);
  } else {
    count_by_status(response, feedback);
  }
  bool const pressure = feedback.status == 429 || feedback.shed > 0 || feedback.refused > 0;
  if (!pressure && !gate_.congested(counter)) {
    return; // a success on an uncongested counter teaches the gate nothing: no header lookups on the hot path
  }
  auto const& headers = response.response.headers;
  read_rate_limit_headers(headers.find("x-ratelimit-limit"), headers.find("x-ratelimit-window"), feedback);
  if (now) {
    gate_.observe(counter, feedback, *now);
  } else {
    gate_.observe(counter, feedback);
  }
}

retry_engine_stats retry_engine::stats() const noexcept {
  retry_engine_stats s;
  s.calls = counters_.calls.load(std::memory_order_relaxed);
  s.attempts = counters_.attempts.load(std::memory_order_relaxed);
  s.retries = counters_.retries.load(std::memory_order_relaxed);
  s.budget_denied = counters_.budget_denied.load(std::memory_order_relaxed);
  s.deadline_stops = counters_.deadline_stops.load(std::memory_order_relaxed);
  s.hook_errors = counters_.hook_errors.load(std::memory_order_relaxed);
  return s;
}

namespace {

/// The most bytes of a sender's words kept in `call_result::detail`: more than the transport's escaped text ever
/// holds (its description and at most 256 bytes of libcurl's text, four bytes each once escaped).
constexpr std::size_t max_sender_words = 2048;

/// Moves one attempt's outcome into `result` (response, the error body's code and reason, replayed) and returns the
/// response's `Retry-After`, if any.
std::optional<std::chrono::milliseconds> take_outcome(call_result& result, attempt_result&& outcome,
                                                      wandura::clock const& clk) {
  result.error = outcome.error;
  // The sender's words, one printable line: the transport's come so (at most ~1.1 KB, passed whole: escaping is
  // idempotent), and a sender of one's own is held to the same rule here rather than trusted.
  result.detail = outcome.detail.empty() ? std::string() : detail::printable(outcome.detail, max_sender_words);
  result.error_code.clear();
  result.reason.clear();
  result.server_message.clear();
  result.request_id.clear();
  result.replayed = false;
  if (outcome.error) {
    result.response = http_response{};
    return std::nullopt;
  }
  result.response = std::move(outcome.response);
  int const status = result.response.status;
  if (status < 200 || status >= 300) {
    auto body = detail::parse_error_body(result.response.body);
    result.error_code = std::move(body.error_code);
    result.reason = std::move(body.reason);
    result.server_message = std::move(body.message);
    auto const header_id = result.response.request_id();
    result.request_id = header_id ? std::string(*header_id) : std::move(body.request_id);
  }
  result.replayed = result.response.idempotency_replayed();
  // `Retry-After` is a singleton field; a response with several (a server's error, or two layers each adding one)
  // gets the longest wait any of them asks for, the cautious reading. No allocation: most responses have none.
  std::optional<std::chrono::milliseconds> wait;
  auto const& headers = result.response.headers;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    auto const field = headers[i];
    if (iequals(field.name, "retry-after")) {
      auto const one = parse_retry_after(field.value, result.response.date(), clk.system_now());
      if (one && (!wait || *one > *wait)) {
        wait = one;
      }
    }
  }
  return wait;
}

} // namespace

retry_engine::retry_step retry_engine::plan_retry(call_settings const& settings, request_traits const& traits,
                                                  int retry, std::optional<std::chrono::milliseconds> retry_after,
                                                  bool gate_paces, clock::time_point now) {
  retry_step step;
  if (retry > std::max(settings.policy.max_retries, 0)) {
    step.stop = stop_reason::retries_exhausted;
    return step;
  }
  auto const held = counter_wait_from(traits.counter, now);
  if (gate_paces) {
    // After a 429 the admission gate holds the counter for its Retry-After and then releases the waiting requests
    // at the rate the counter refills, plays first: the retry queues there at once, in its turn, instead of
    // sleeping on its own and joining the crowd released when the hold-off ends.
    step.source = delay_source::retry_after;
  } else {
    auto const delay = compute_backoff(settings.policy, retry, retry_after, draw());
    step.wait = to_clock_duration(delay.delay);
    step.source = delay.source;
  }
  // The next attempt starts after the backoff and after the counter's hold-off (a Retry-After above the policy's
  // cap still holds the counter): both must end before the deadline, or the retry is not made at all.
  auto const start_in = std::max(step.wait, held);
  step.starts_in = start_in;
  if (auto const last = last_start(settings, traits); !fits_deadline(last, now, start_in)) {
    // Stop when now + delay passes the total deadline (or its last `min_time_left`), and report the last real error
    // (docs/protocol.md §3).
    step.stop = stop_reason::deadline_exceeded;
    step.note = "the next retry in " + ms_text(start_in) +
                (fits_deadline(settings.deadline, now, start_in)
                     ? " would start in the deadline's last " + ms_text(settings.deadline - last)
                     : std::string(" would end past it"));
    return step;
  }
  if (!budget_.try_retry(now)) {
    counters_.budget_denied.fetch_add(1, std::memory_order_relaxed);
    step.stop = stop_reason::budget_exhausted;
    return step;
  }
  counters_.retries.fetch_add(1, std::memory_order_relaxed);
  return step;
}

struct retry_engine::call_state {
  call_state(http_request&& r, request_traits&& t, call_settings&& c, response_reader* rr)
      : request(std::move(r)), traits(std::move(t)), settings(std::move(c)), reader(rr) {}
  call_state(call_state const&) = delete;
  call_state& operator=(call_state const&) = delete;
  ~call_state() = default;

  http_request request;
  request_traits traits;
  call_settings settings;
  response_reader* reader = nullptr;
  call_result result;
  request_safety safety = request_safety::read;
  bool is_write = false;
  std::chrono::milliseconds attempt_limit{0};
  std::optional<detail::observed_attempt> observed; ///< The attempt in flight, as its observer sees it.
  attempt_result outcome;                           ///< The last attempt's, until read into `result`.
  bool follow_again = false;                        ///< The next attempt is a follow-up request, with this body:
  std::string follow_body;
  /// When the call started on the engine's clock (read by `open_call`), for the observer's `call_end::duration`.
  clock::time_point started{};
  /// The clock as last read (by `open_call`, or for the admission gate), until the next attempt starts from it;
  /// cleared by a wait at the gate. A real clock read is a vDSO call: tens to hundreds of ns on a virtual machine.
  std::optional<clock::time_point> clock_read;
  /// The last moment an attempt may start (`request_traits::min_time_left`); the deadline when it has none.
  clock::time_point last_start{};
  // The attempt's steps, kept here rather than as locals of `run`, whose frame then stays within the 1,020 bytes
  // Asio recycles (a larger one costs an allocation and a free on every call).
  admission admitted;          ///< The admission gate's verdict for the next attempt.
  attempt_options options;     ///< The attempt's limits (`start_attempt`).
  bool deadline_bound = false; ///< The attempt's timeout is the time left before the deadline.
  clock::time_point wake_at{}; ///< When the next attempt may start, after the retry's sleep (`end_attempt`).
};

asio::awaitable<call_result> retry_engine::call(http_request request, request_traits traits, call_settings settings,
                                                response_reader* reader) {
  // Moved once, straight into their place in the state (the frame would have held another copy of each).
  return run(std::make_unique<call_state>(std::move(request), std::move(traits), std::move(settings), reader));
}

asio::awaitable<call_result> retry_engine::run(std::unique_ptr<call_state> owned) {
  call_state& s = *owned;
  if (auto stop = open_call(s)) {
    co_return finish(s, *stop);
  }
  for (int attempt = 1;; ++attempt) {
    if (is_cancelled(co_await asio::this_coro::cancellation_state)) {
      co_return finish(s, stop_reason::cancelled);
    }
    // Most requests are decided at once (a calm counter, or room while pacing): no coroutine frame for the gate.
    if (!admit_now(s, co_await asio::this_coro::executor)) {
      s.admitted = co_await admit_later(s); // cancellation checked just above: cannot throw
      if (is_cancelled(co_await asio::this_coro::cancellation_state)) {
        co_return finish(s, stop_reason::cancelled); // cancelled as the gate let it go: not sent, no attempt counted
      }
    }
    if (auto const stop = start_attempt(s, attempt)) {
      co_return finish(s, *stop);
    }
    try {
      s.outcome = co_await sender_.send_attempt(s.request, s.options);
    } catch (std::system_error const& e) {
      s.outcome.error = e.code();
    } catch (std::bad_alloc const&) {
      throw;
    } catch (std::exception const&) {
      s.outcome.error = errc::transport_failed; // a misbehaving sender must not escape as an unknown exception
    }
    // A cancellation that came with the answer (emitted after it was queued) ends the call with what it read.
    bool const cancelled_with_answer = is_cancelled(co_await asio::this_coro::cancellation_state);
    if (auto const stop = end_attempt(s, attempt, cancelled_with_answer)) {
      co_return finish(s, *stop);
    }
    // A cancellation emitted after this frame's last resumption was queued (the attempt's answer, the backoff's
    // end) makes Asio throw from `co_await` itself, in this frame, before the awaited coroutine runs: caught here,
    // so that the call still ends as cancelled, with its result and its end reported, instead of escaping.
    bool cancelled = false;
    try {
      cancelled = co_await sleep_on(*clock_, s.wake_at) || co_await yield_turn();
    } catch (std::system_error const& e) {
      if (e.code() != asio::error::operation_aborted) {
        throw;
      }
      cancelled = true;
    }
    if (cancelled) {
      co_return finish(s, stop_reason::cancelled);
    }
    if (auto stop = start_follow_up(s)) {
      co_return finish(s, *stop);
    }
  }
}

std::optional<stop_reason> retry_engine::open_call(call_state& s) {
  s.result.total_timeout = s.settings.total_timeout;
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  s.clock_read = clock_->now();
  s.started = *s.clock_read; // before the key is made: a call refused for its key has a start and an end too
  s.last_start = last_start(s.settings, s.traits);
  s.is_write = s.traits.is_write || s.request.method == http_method::post; // every POST is a write
  if (s.is_write) {
    if (auto ec = attach_key(s.request, s.settings, false, s.result.idempotency_key, s.safety)) {
      s.result.error = ec;
      return stop_reason::invalid_request;
    }
  }
  budget_.note_request(*s.clock_read); // calls counted once each, follow-ups included (docs/protocol.md §3)
  // The floor raises a limit the options set; it does not turn "none of its own" (0 or less) into one.
  s.attempt_limit = s.settings.attempt_timeout.count() > 0
                        ? std::max(s.settings.attempt_timeout, s.traits.attempt_timeout_floor)
                        : std::chrono::milliseconds(0);
  return std::nullopt;
}

namespace {

request_class class_of(response_reader const* reader) {
  return reader != nullptr ? reader->admission_class() : request_class::play;
}

std::uint32_t cost_of(response_reader const* reader) {
  return reader != nullptr ? std::max<std::uint32_t>(reader->admission_cost(), 1) : 1U;
}

} // namespace

bool retry_engine::admit_now(call_state& s, asio::any_io_executor const& executor) {
  if (!s.clock_read) {
    s.clock_read = clock_->now(); // the attempt starts from it too, when admitted at once
  }
  if (*s.clock_read >= s.last_start) {
    // The call's own deadline passed (or is too near: `min_time_left`) before the gate had a say (a deadline of 0,
    // a long wait before): not the rate limit's doing, whatever the counter's state. `not_admitted` ends the call
    // as a timeout; nothing is taken.
    s.admitted = admission{};
    return true;
  }
  auto decided =
      gate_.try_admit(s.traits.counter, class_of(s.reader), cost_of(s.reader), s.last_start, executor, *s.clock_read);
  if (!decided) {
    return false;
  }
  s.admitted = *decided;
  return true;
}

asio::awaitable<admission> retry_engine::admit_later(call_state& s) {
  s.clock_read.reset(); // the attempt starts after a wait: it reads the clock again
  return wait_for_counter(s.traits.counter, class_of(s.reader), cost_of(s.reader), s.last_start, s.started);
}

std::optional<stop_reason> retry_engine::start_attempt(call_state& s, int attempt) {
  auto const now = s.clock_read ? *std::exchange(s.clock_read, std::nullopt) : clock_->now();
  auto const stop = not_admitted(s.result, s.admitted, attempt, s.traits.counter, s.last_start, now);
  if (stop && attempt == 1 && now >= s.last_start && now < s.settings.deadline) {
    // Stopped before the deadline itself, by `min_time_left`: said so, since the deadline has not passed yet.
    std::string why = "not sent in the deadline's last " + ms_text(s.settings.deadline - s.last_start);
    s.result.note = s.result.note.empty() ? std::move(why) : s.result.note + "; " + why;
  }
  if (stop) {
    return stop;
  }
  s.options = attempt_limits(s.attempt_limit, s.settings.deadline, now, s.deadline_bound);
  s.result.attempts = attempt;
  if (s.reader != nullptr) {
    s.reader->on_progress(attempt, s.result.response.status);
  }
  counters_.attempts.fetch_add(1, std::memory_order_relaxed);
  s.outcome = attempt_result{};
  s.observed.emplace(options_.observer.get(), s.traits.operation, s.request, attempt - 1, *clock_, now);
  return std::nullopt;
}

std::optional<stop_reason> retry_engine::end_attempt(call_state& s, int attempt, bool cancelled) {
  auto const ended = s.observed->end(s.outcome); // the clock as read for the observer, when there is one
  s.observed.reset();
  auto const transport_error = s.outcome.error;
  auto retry_after = take_outcome(s.result, std::move(s.outcome), *clock_);
  if (s.reader != nullptr) {
    s.reader->on_progress(attempt, s.result.response.status);
  }
  note_response(s.traits.counter, s.result, retry_after, s.reader, ended);
  auto next = after_attempt(s.result,
                            {transport_error, s.deadline_bound, retry_after, s.safety, attempt, &s.request, cancelled},
                            s.reader, s.settings, s.traits);
  s.follow_again = next.follow.again;
  if (s.follow_again) {
    s.follow_body = std::move(next.follow.body);
  }
  s.wake_at = next.wake_at;
  return next.stop;
}

std::optional<stop_reason> retry_engine::start_follow_up(call_state& s) {
  if (!std::exchange(s.follow_again, false)) {
    return std::nullopt;
  }
  // A new request: its own body and key, the same deadline, budget and count of retries.
  s.request.body = std::move(s.follow_body);
  if (s.is_write) {
    if (auto ec = attach_key(s.request, s.settings, true, s.result.idempotency_key, s.safety)) {
      s.result.error = ec;
      return stop_reason::invalid_request;
    }
  }
  return std::nullopt;
}

call_result&& retry_engine::finish(call_state& s, stop_reason why) noexcept {
  call_result& result = s.result;
  http_request const& request = s.request;
  result.stopped = why;
  if (why != stop_reason::success && result.target.empty()) { // named only where a message may need it
    try {
      result.target = detail::describe_target(request);
    } catch (std::bad_alloc const&) { // the message goes without its target
    }
  }
  result.retries = result.attempts > 0 ? result.attempts - 1 : 0;
  if (why == stop_reason::deadline_exceeded) {
    counters_.deadline_stops.fetch_add(1, std::memory_order_relaxed);
  } else if (why == stop_reason::cancelled) {
    result.error = asio::error::operation_aborted;
  }
  tell_call_end(s);
  return std::move(result);
}

void retry_engine::tell_call_end(call_state const& s) const noexcept {
  auto* const observer = options_.observer.get();
  if (observer == nullptr || !options_.report_call_end) {
    return;
  }
  call_end end;
  end.operation = s.traits.operation.empty() ? std::string_view("other") : s.traits.operation;
  end.error = error_code_of(s.result);
  end.duration = clock_->now() - s.started;
  observer->on_call_end(end);
}

std::optional<stop_reason> retry_engine::not_admitted(call_result& result, admission const& admitted, int attempt,
                                                      std::string const& counter, clock::time_point deadline,
                                                      clock::time_point now) {
  switch (admitted.verdict) {
  case admission_verdict::cancelled: return stop_reason::cancelled;
  case admission_verdict::shed: result.note = describe(admitted, counter); return stop_reason::shed;
  case admission_verdict::deadline_exceeded: break;
  case admission_verdict::admitted:
    if (now < deadline) {
      return std::nullopt;
    }
    break;
  }
  too_late_for_attempt(result, attempt, admitted, counter);
  return stop_reason::deadline_exceeded;
}

void retry_engine::too_late_for_attempt(call_result& result, int attempt, admission const& waited,
                                        std::string const& counter) {
  // The admission gate kept the request until past the deadline (after a 429, or queued behind the counter's pace):
  // the rate limit stopped the call, and a caller matches it as such (errc::rate_limited, condition::rate_limited).
  bool const held = waited.verdict == admission_verdict::deadline_exceeded;
  if (attempt == 1) { // later attempts keep the last real error
    result.error = held ? errc::rate_limited : errc::deadline_exceeded;
  }
  if (!held) {
    return;
  }
  result.note = waited.queued > clock::duration::zero()
                    ? describe(waited, counter)
                    : "the " + counter + " counter is held back after a 429 until too late for the deadline";
}

retry_engine::next_step retry_engine::after_attempt(call_result& result, attempt_summary const& facts,
                                                    response_reader* reader, call_settings const& settings,
                                                    request_traits const& traits) {
  next_step out;
  auto retry_after = facts.retry_after;
  auto const verdict = classify_attempt({facts.transport_error, result.response.status, result.error_code},
                                        settings.policy.classifier, facts.safety);
  switch (verdict.verdict) {
  case attempt_verdict::success:
    if (reader == nullptr || !(out.follow = reader->after_success(result)).again) {
      if (!out.follow.unreadable.empty()) { // a 2xx no one can read: failed as a reset would, same rules
        result.error = errc::invalid_response;
        // The reader's words may quote a key of the body: made printable and bounded here, as the transport
        // makes its own (call_result::detail).
        result.detail = detail::printable(std::exchange(out.follow, {}).unreadable, 2 * detail::max_quoted_bytes);
        if (facts.safety == request_safety::unkeyed_write) {
          result.note = "not retried: write without idempotency key";
          out.stop = stop_reason::not_retryable;
          return out;
        }
        break;
      }
      out.stop = stop_reason::success;
      return out;
    }
    if (facts.safety == request_safety::unkeyed_write || !settings.auto_idempotency_keys) {
      // A follow-up is a retry of the same write with another body: never made without an idempotency key, and its
      // key is a fresh automatic one (the caller's names the first body), so none is made with automatic keys off.
      // The call keeps its 2xx.
      out.follow = {};
      out.stop = stop_reason::success;
      return out;
    }
    retry_after = out.follow.retry_after;
    break;
  case attempt_verdict::cancelled: out.stop = stop_reason::cancelled; return out;
  case attempt_verdict::final:
    result.note = std::string(verdict.note);
    out.stop = stop_reason::not_retryable;
    return out;
  case attempt_verdict::retry: break;
  }
  // A follow-up that cannot be made leaves the call with its 2xx: what the reader read stands.
  bool const follow = out.follow.again;
  if (facts.cancelled) {
    // The caller left as this answer came: no retry and no follow-up (nothing spent on them, no retry event). A 2xx
    // read stands (its tickets were issued); anything else ends the call as cancelled.
    out.follow = {};
    out.stop = follow ? stop_reason::success : stop_reason::cancelled;
    return out;
  }
  auto const now = clock_->now();
  if (!follow && (now >= settings.deadline || (facts.deadline_bound && facts.transport_error == condition::timeout))) {
    result.note = "the attempt used the time left";
    out.stop = stop_reason::deadline_exceeded;
    return out;
  }
  if (retry_after && retry_after->count() <= 0) {
    retry_after.reset();
  }
  int const refused_status = follow ? out.follow.http_status : result.response.status;
  // The gate owns the wait after a 429 that named one (Retry-After, or the item's retry_after) when it holds the
  // counter for it: it holds the counter that long and then paces. A 429 without one, or one the gate did not hold
  // the counter for (a shed prefetch: the counter still grants plays), keeps the policy's backoff.
  bool const gate_paces = refused_status == 429 && retry_after && gate_.held_until(traits.counter) > now;
  auto step = plan_retry(settings, traits, facts.attempt, retry_after, gate_paces, now);
  if (step.stop) {
    if (!follow) {
      result.note = std::move(step.note);
    }
    out.stop = follow ? stop_reason::success : *step.stop;
    return out;
  }
  if (result.target.empty()) {
    result.target = detail::describe_target(*facts.request);
  }
  notify_retry(retry_event_for(result, out.follow, step, facts.attempt, settings, traits, result.error, now));
  out.wake_at = now + step.wait;
  return out;
}

retry_event retry_engine::retry_event_for(call_result const& result, follow_up const& next, retry_step const& step,
                                          int retry, call_settings const& settings, request_traits const& traits,
                                          std::error_code transport_error, clock::time_point now) const {
  retry_event event;
  event.retry = retry;
  event.max_retries = std::max(settings.policy.max_retries, 0);
  event.delay = std::chrono::round<std::chrono::milliseconds>(step.starts_in);
  event.source = step.source;
  event.http_status = next.again ? next.http_status : result.response.status;
  event.error = next.again ? std::error_code{} : transport_error;
  event.error_code = next.again ? std::string_view(next.server_code) : std::string_view(result.error_code);
  event.budget_left = budget_.snapshot(now).left;
  event.idempotency_key = result.idempotency_key;
  event.counter = traits.counter;
  event.target = result.target;
  return event;
}

} // namespace wandura
