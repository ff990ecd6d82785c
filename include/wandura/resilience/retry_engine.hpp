// The retry loop of a client, generic over endpoints (docs/protocol.md: idempotency, retries, rate limits).
//
// One `retry_engine` per client holds what every call shares: the `http_sender` (the transport seam), the retry
// budget, the admission gate (one state per rate-limit counter), the clock, the random source, the logger, the
// `on_retry` hook and the client-level defaults. `call` runs one logical call:
//
//   1. merge options once (done by the caller through `settings_for`), deadline fixed on the client's clock;
//   2. writes: validate the caller's key or make an automatic one; add `Idempotency-Key`;
//   3. count the call once in the budget; then per attempt: pass the admission gate of the request's counter
//      (`wait_for_counter`: free while uncongested; after a 429 or a shed it queues requests, plays first, and
//      releases them at the rate the counter refills; waiting there is not a retry and costs no budget), send with
//      timeout = min(attempt timeout, time left), tell the gate what the response says (`note_response`: a 429, a
//      shed, grants, the rate-limit headers), classify (classify.hpp);
//   4. after a 2xx, ask the caller's `response_reader` whether the call is done or goes on with a narrowed request
//      (a ticket batch's items still needed): that follow-up is a retry like any other;
//   5. on a retryable failure or a follow-up: compute the wait (backoff or `Retry-After`; none of its own after a
//      429, whose hold-off and pacing the gate owns), stop at once if the next attempt could not start before the
//      deadline, ask the budget, emit `on_retry` + one WARN line, sleep (cancellable), go to 3.
//
// It returns the final outcome (`call_result`) and never throws for HTTP statuses, transport errors, deadlines or
// cancellation; `to_error`/`throw_if_failed` (call_result.hpp) turn a failure into `wandura::error`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>

#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/call_options.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/resilience/classify.hpp"
#include "wandura/resilience/clock.hpp"
#include "wandura/resilience/retry_budget.hpp"
#include "wandura/resilience/retry_event.hpp"
#include "wandura/resilience/retry_policy.hpp"
#include "wandura/transport/http_request.hpp"
#include "wandura/transport/http_sender.hpp"

namespace wandura {

/// The longest hold-off a 429 can put on a counter: one hour.
inline constexpr std::chrono::milliseconds max_holdoff{std::chrono::hours(1)};

/// What the retry loop needs to know about a request besides its bytes.
struct request_traits {
  /// The rate-limit counter the request spends (docs/protocol.md §1, the counters table): `playback`, `catalog`,
  /// `creatives`, `videos`, `video`, `config`. The admission gate keeps one state per counter name of 1-64
  /// characters of [A-Za-z0-9._:-]; a request to any other name is never paced (`admission_gate::max_counters`).
  std::string counter;
  /// A write: gets an `Idempotency-Key`, and without one is retried only after `connect_failed`. A POST request is
  /// always treated as a write, even when this is false.
  bool is_write = false;
  /// The smallest attempt timeout this request accepts (docs/protocol.md §3: ticket requests never use an attempt
  /// timeout under 5 s): an attempt timeout the options set is raised to it; none (0 or less) stays none. The
  /// deadline still bounds the attempt.
  std::chrono::milliseconds attempt_timeout_floor{0};
  /// The logical call the request belongs to, told to the `attempt_observer` (`wandura.operation`), e.g.
  /// "issue_tickets" or "get_config". Viewed, not copied: give a string with static storage (a literal). Empty is
  /// reported as "other".
  std::string_view operation{};
  /// No attempt starts with less than this left before the call's deadline (at most half the call's total time,
  /// so that a short deadline still gets its first attempt): one that would, after a wait at the admission gate
  /// or a backoff, is not sent, and the call ends as when its deadline passes first (`errc::rate_limited` when it
  /// queued at the gate, else `errc::deadline_exceeded`; a later attempt keeps the last real error). Sent so late,
  /// the server could still be working on the request when the attempt times out: for a ticket request it would
  /// issue a ticket, and spend its counter, for a call that no longer waits. 0: attempts start until the deadline.
  std::chrono::milliseconds min_time_left{0};
};

/// What follows a response, as the caller of `retry_engine::call` reads it (`response_reader::after_success`).
struct follow_up {
  /// Whether the call goes on with another request. False: the call is done with this response.
  bool again = false;
  /// The body of the next request (e.g. the ticket batch narrowed to the items still needed). It is a new request:
  /// it gets a fresh automatic idempotency key (the same key with another body is a 409 conflict). With automatic
  /// keys off (`retry_options::auto_idempotency_keys`), or after a write sent without a key, no follow-up is made:
  /// the call ends with the response just read.
  std::string body;
  /// The wait the server asked for (an item's `retry_after`); nullopt or zero: the policy's backoff.
  std::optional<std::chrono::milliseconds> retry_after;
  /// The status and server code that caused the follow-up, for the retry event and the WARN line.
  int http_status = 0;
  std::string server_code;
  /// Non-empty: the 2xx body could not be read (truncated, not the documented JSON), and why. The engine then
  /// treats the attempt as a failed one (`errc::invalid_response`): retried like a connection reset when the request
  /// is safe to resend (a read, a keyed write: the server replays), final for an unkeyed write.
  std::string unreadable;
};

/// What a caller makes of the responses of one call (the playback layer reads a ticket batch's items). It is
/// consulted synchronously on the call's coroutine, after each response, and lives in the caller's frame for the
/// whole call.
class response_reader {
public:
  response_reader() = default;
  response_reader(response_reader const&) = delete;
  response_reader& operator=(response_reader const&) = delete;
  virtual ~response_reader() = default;

  /// The class of the request about to be sent, for the admission gate: `play` (the default) when it carries
  /// anything a viewer waits for, `prefetch` when all of it may be dropped. Asked before each attempt.
  [[nodiscard]] virtual request_class admission_class() const { return request_class::play; }
  /// Units the counter will count if the request about to be sent is granted whole (the items of a ticket batch).
  /// Default 1. Asked before each attempt.
  [[nodiscard]] virtual std::uint32_t admission_cost() const { return 1; }

  /// Adds what `response` says about its counter to `feedback` (status, `Retry-After` and the rate-limit headers
  /// are the engine's): units granted fresh, shed and refused for rate. Called after each response, before
  /// `after_success`, without suspending in between. Default: 1 granted for a 2xx, 1 refused for a 429. The
  /// playback layer counts a batch's items, so that a 429 that only shed prefetches does not read as the counter
  /// running out (the server still grants plays then).
  virtual void read_counter_feedback(call_result const& response, counter_feedback& feedback);

  /// Told how far the call got, each time that changes: when attempt `attempts` (1-based) is sent, and when it
  /// ended, with the HTTP status of the latest attempt's response (0 when it produced none, or none arrived yet). Lets
  /// the caller say what a call that it left early had done (e.g. `wandura::error::attempts()` of a cancelled call).
  /// Default: nothing. Called on the call's coroutine without suspending; a caller reading it from another thread keeps
  /// it in atomics.
  virtual void on_progress(int attempts, int http_status) noexcept {
    (void)attempts;
    (void)http_status;
  }

  /// Reads a 2xx response (`response.response`); says whether the call is done or goes on with a follow-up
  /// request. A follow-up is made like any retry (counted against `max_retries`, backoff, deadline, budget, hook);
  /// when it cannot be made, the call ends with this response as its successful result.
  [[nodiscard]] virtual follow_up after_success(call_result const& response) = 0;
};

/// Counters of one engine since it was created, for metrics.
struct retry_engine_stats {
  std::uint64_t calls = 0;          ///< Logical calls started.
  std::uint64_t attempts = 0;       ///< Attempts sent.
  std::uint64_t retries = 0;        ///< Retries granted (hook fired).
  std::uint64_t budget_denied = 0;  ///< Retries the budget refused.
  std::uint64_t deadline_stops = 0; ///< Calls stopped by their deadline.
  std::uint64_t hook_errors = 0;    ///< Exceptions thrown by `on_retry` or `log`, caught and ignored.
};

/// The retry engine of one client.
///
/// @par Thread safety
/// `call` and every query may be used from any number of threads and coroutines at once. The `http_sender`
/// must outlive the engine; the engine must outlive every call on it.
class retry_engine {
public:
  /// @param sender the transport seam; not owned, must outlive the engine.
  /// @param options client-level defaults and services (clock, random, logger, hook, budget parameters).
  /// @throws wandura::error `errc::invalid_argument` for an `options.admission` option outside its range
  ///         (admission_gate.hpp), an `options.policy` that `check_retry_policy` refuses, or an `options.budget`
  ///         with a negative `min_retries` or `percent` or a `window` under 1 ms.
  explicit retry_engine(http_sender& sender, retry_options options = {});
  retry_engine(retry_engine const&) = delete;
  retry_engine& operator=(retry_engine const&) = delete;
  ~retry_engine();

  /// Merges `per_call` over the client options (call_options.hpp) and fixes the deadline from now.
  /// Call once per logical call. @throws wandura::error `errc::invalid_argument` for a `per_call.policy` that
  /// `check_retry_policy` refuses.
  [[nodiscard]] call_settings settings_for(call_options const& per_call = {}) const;

  /// Runs one logical call: admission, attempts, classification, backoff, budget, hooks (see the file comment).
  ///
  /// Completes, never throwing for these, with `call_result::stopped`:
  /// - `success`: a 2xx response (`replayed` set from `Idempotency-Replayed: true`);
  /// - `not_retryable`: a final status or transport error, or a write without a key after it was sent;
  /// - `retries_exhausted`, `budget_exhausted`, `deadline_exceeded`: the last real error or response is kept;
  /// - `cancelled`: `error == asio::error::operation_aborted`;
  /// - `invalid_request`: `errc::invalid_idempotency_key`, nothing sent;
  /// - `shed`: the admission gate dropped a prefetch-only request (the counter is under its reserve); `note` says so.
  ///
  /// A call that cannot be admitted before its deadline (or before `traits.min_time_left` of it is left) ends
  /// `deadline_exceeded`, its error `errc::rate_limited`, with `note` saying how long it was queued behind the
  /// counter's limit (or that the counter's 429 hold-off outlasts the deadline).
  /// @param request moved into the call's state; for writes the engine adds `Idempotency-Key` (unless the request
  ///        already has one, which is then validated as a caller key and wins over `call_options::idempotency_key`;
  ///        a request with two or more is refused with `errc::invalid_idempotency_key`). The body is sent
  ///        byte-identical each time.
  /// @param traits the counter and whether it is a write.
  /// @param settings from `settings_for`; taken by value and kept in the call's state.
  /// @par Cancellation
  /// Terminal cancellation through the awaiting coroutine's cancellation slot ends the call at once with
  /// `stopped == cancelled`, whether it is in an attempt, a backoff sleep or queued at the admission gate; it is
  /// never thrown. One emitted after an answer arrived but before the call went on from it ends the call with that
  /// answer when it is a 2xx (`success`: what it granted is not thrown away; no follow-up is made), and as
  /// `cancelled` otherwise, with no retry planned and nothing taken from the budget.
  /// @par Observer
  /// `retry_options::observer` hears of each attempt's begin and end, and once of the call's end when the call
  /// completes (with `error_code_of` the result; unless `retry_options::report_call_end` is false).
  /// @par Retries and idempotency
  /// As configured by the policy (retry_policy.hpp); one key per logical call, reused on every attempt; a
  /// follow-up request gets its own. Waiting at the admission gate is not a retry and costs no retry budget.
  /// @param reader what the caller makes of each response: what it tells the admission gate (units granted, shed,
  ///        refused), the class and cost of the next request, and whether a 2xx is followed by a narrowed request.
  ///        Null: a request of class `play` costing 1, every 2xx ends the call. Not owned; must live until the call
  ///        completes (in the caller's frame).
  [[nodiscard]] asio::awaitable<call_result> call(http_request request, request_traits traits, call_settings settings,
                                                  response_reader* reader = nullptr);

  /// `call` for any completion token (callbacks, `asio::use_future`, `use_awaitable`, ...), run on the sender's
  /// executor. Completion signature `void(std::exception_ptr, call_result)`.
  template <typename CompletionToken>
  auto async_call(http_request request, request_traits traits, call_settings settings, CompletionToken&& token) {
    return asio::co_spawn(sender_.get_executor(), call(std::move(request), std::move(traits), std::move(settings)),
                          std::forward<CompletionToken>(token));
  }

  /// The admission gate every attempt of every call passes (admission_gate.hpp): one state per rate-limit counter,
  /// paced after a 429 or a shed, free while uncongested.
  [[nodiscard]] admission_gate& gate() noexcept { return gate_; }
  [[nodiscard]] admission_gate const& gate() const noexcept { return gate_; }

  [[nodiscard]] retry_budget& budget() noexcept { return budget_; }
  [[nodiscard]] retry_budget const& budget() const noexcept { return budget_; }
  [[nodiscard]] wandura::clock& get_clock() const noexcept { return *clock_; }
  [[nodiscard]] retry_options const& options() const noexcept { return options_; }
  [[nodiscard]] http_sender& sender() const noexcept { return sender_; }
  [[nodiscard]] retry_engine_stats stats() const noexcept;
  /// Writes `message` through `options().log` at `level`, when a logger is set. A throwing logger is counted
  /// (`retry_engine_stats::hook_errors`) and otherwise ignored. Thread-safe as the logger is.
  void write_log(log_level level, std::string_view message) noexcept;

private:
  struct counters {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> attempts{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> budget_denied{0};
    std::atomic<std::uint64_t> deadline_stops{0};
    std::atomic<std::uint64_t> hook_errors{0};
  };

  /// The next retry's wait, or why there is none.
  struct retry_step {
    std::optional<stop_reason> stop;
    clock::duration wait{};      ///< The retry's own sleep (zero when the admission gate paces it).
    clock::duration starts_in{}; ///< When the next attempt may start: the sleep, or the counter's hold-off if later.
    delay_source source = delay_source::backoff;
    std::string note;
  };

  /// What one call keeps while it runs, on the heap: the coroutine's own frame then stays small enough for Asio
  /// to recycle (a frame over 1,020 bytes costs an `aligned_alloc` and a free on every call).
  struct call_state;

  [[nodiscard]] asio::awaitable<call_result> run(std::unique_ptr<call_state> state);

  // The steps of `run` between its suspensions, out of its frame (their locals would all be kept in it); what one
  // step leaves for the next is kept in the call's state.
  /// The key of a write, the call counted in the budget. @returns why the call stops before sending, if it does.
  [[nodiscard]] std::optional<stop_reason> open_call(call_state& state);
  /// The admission gate's decision when it is made at once, without waiting, into `state.admitted`. @returns
  /// whether it was: false when the attempt must wait (`admit_later`).
  [[nodiscard]] bool admit_now(call_state& state, asio::any_io_executor const& executor);
  [[nodiscard]] asio::awaitable<admission> admit_later(call_state& state);
  /// After the gate's verdict: the attempt's limits, counted and observed. @returns why the call stops instead.
  [[nodiscard]] std::optional<stop_reason> start_attempt(call_state& state, int attempt);
  /// After the attempt: its outcome taken, the next step planned (`state.wake_at`). @returns why the call stops.
  [[nodiscard]] std::optional<stop_reason> end_attempt(call_state& state, int attempt, bool cancelled);
  /// Puts a follow-up's body and key on the request. @returns why the call stops instead, if it does.
  [[nodiscard]] std::optional<stop_reason> start_follow_up(call_state& state);
  [[nodiscard]] double draw() const;
  /// Before an attempt the gate could not admit at once (`admission_gate::try_admit`): waits at the gate until
  /// `counter` admits a request of class `cls` and `cost` units, within the deadline, in the order of the calls'
  /// starts (`first_asked`: a retry keeps its call's place).
  [[nodiscard]] asio::awaitable<admission> wait_for_counter(std::string_view counter, request_class cls,
                                                            std::uint32_t cost, clock::time_point deadline,
                                                            clock::time_point first_asked);
  /// After each response: tells the admission gate what it means for its counter (a 429, a shed, grants), at `now`
  /// when the caller has read the clock already.
  void note_response(std::string_view counter, call_result const& response,
                     std::optional<std::chrono::milliseconds> retry_after, response_reader* reader,
                     std::optional<clock::time_point> now);
  /// How long from `now` until `counter` may be used again (zero when it is not held).
  [[nodiscard]] clock::duration counter_wait_from(std::string_view counter, clock::time_point now) const;
  /// What one attempt produced besides its response, for `after_attempt`.
  struct attempt_summary {
    std::error_code transport_error;
    bool deadline_bound = false; ///< The attempt's timeout was the time left before the deadline.
    std::optional<std::chrono::milliseconds> retry_after;
    request_safety safety = request_safety::read;
    int attempt = 1;
    http_request const* request = nullptr; ///< What was sent; named in the retry event.
    /// The call was cancelled as the answer came (before the loop resumed): nothing more is sent, and the answer
    /// stands as the call's end only when it is a 2xx.
    bool cancelled = false;
  };
  /// What the loop does after an attempt: stop (and why), or sleep until `wake_at` and send again (`follow` says
  /// with which body when it is a follow-up request).
  struct next_step {
    std::optional<stop_reason> stop;
    clock::time_point wake_at{};
    follow_up follow;
  };
  /// Classifies the attempt, asks the reader after a 2xx, and plans the retry (counting it and firing `on_retry`).
  [[nodiscard]] next_step after_attempt(call_result& result, attempt_summary const& facts, response_reader* reader,
                                        call_settings const& settings, request_traits const& traits);
  /// Ends a call: records why it stopped, names its target when a message may need it, counts a deadline stop,
  /// tells the observer the call's end.
  call_result&& finish(call_state& state, stop_reason why) noexcept;
  /// Tells `options_.observer` how the call ended, unless there is none or `report_call_end` is off.
  void tell_call_end(call_state const& state) const noexcept;
  /// Why no attempt may be sent after the admission gate's verdict (cancelled, shed, or the deadline passed at the
  /// gate or before); nullopt when it may.
  std::optional<stop_reason> not_admitted(call_result& result, admission const& admitted, int attempt,
                                          std::string const& counter, clock::time_point deadline,
                                          clock::time_point now);
  /// Records why no attempt could start: the deadline passed, at the admission gate or before.
  static void too_late_for_attempt(call_result& result, int attempt, admission const& waited,
                                   std::string const& counter);
  /// Whether retry number `retry` may be made and after what wait: `max_retries`, backoff (none of its own when
  /// `gate_paces`: a 429 on a counter the admission gate now paces), deadline (with the counter's hold-off and
  /// the request's `min_time_left`), budget. Counts a granted retry or a budget refusal.
  [[nodiscard]] retry_step plan_retry(call_settings const& settings, request_traits const& traits, int retry,
                                      std::optional<std::chrono::milliseconds> retry_after, bool gate_paces,
                                      clock::time_point now);
  [[nodiscard]] retry_event retry_event_for(call_result const& result, follow_up const& next, retry_step const& step,
                                            int retry, call_settings const& settings, request_traits const& traits,
                                            std::error_code transport_error, clock::time_point now) const;
  /// Fires the `on_retry` hook and writes the WARN line; a throwing hook or logger is counted and otherwise ignored.
  void notify_retry(retry_event const& event);

  http_sender& sender_;
  retry_options options_;
  std::shared_ptr<wandura::clock> clock_;
  retry_budget budget_;
  admission_gate gate_;
  counters counters_;
};

} // namespace wandura
