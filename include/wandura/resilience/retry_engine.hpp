// The retry loop of a client, generic over endpoints (SPEC §1 idempotency, §3 SDK behaviour; seeds 000 and 004).
//
// One `retry_engine` per client holds what every call shares: the `http_sender` (the transport seam), the retry
// budget, the per-counter 429 hold-offs, the clock, the random source, the logger, the `on_retry` hook and the
// client-level defaults. `call` runs one logical call:
//
//   1. merge options once (done by the caller through `settings_for`), deadline fixed on the client's clock;
//   2. writes: validate the caller's key or make an automatic one; add `Idempotency-Key`;
//   3. count the call in the budget; then per attempt: wait out the counter's 429 hold-off, send with
//      timeout = min(attempt timeout, time left), classify (classify.hpp);
//   4. on a retryable failure: compute the wait (backoff or `Retry-After`), stop at once if it would end past the
//      deadline, ask the budget, emit `on_retry` + one WARN line, sleep (cancellable), go to 3;
//   5. record a 429's `Retry-After` as the counter's hold-off (not when its body's reason is `prefetch_shed`: the
//      server then refused prefetches only and still grants plays).
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
#include <system_error>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>

#include "wandura/resilience/call_options.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/resilience/clock.hpp"
#include "wandura/resilience/holdoff_registry.hpp"
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
  /// The rate-limit counter the request spends (SPEC §1 table): `playback`, `catalog`, `creatives`, `videos`,
  /// `video`, `config`. Hold-offs after a 429 are per counter.
  std::string counter;
  /// A write: gets an `Idempotency-Key`, and without one is retried only after `connect_failed`. A POST request is
  /// always treated as a write, even when this is false.
  bool is_write = false;
  /// The smallest attempt timeout this request accepts, whatever the options say (SPEC §3, seed 000: ticket
  /// requests never use an attempt timeout under 5 s). The deadline still bounds the attempt.
  std::chrono::milliseconds attempt_timeout_floor{0};
};

/// Counters of one engine since it was created, for metrics.
struct retry_engine_stats {
  std::uint64_t calls = 0;          ///< Logical calls started.
  std::uint64_t attempts = 0;       ///< Attempts sent.
  std::uint64_t retries = 0;        ///< Retries granted (hook fired).
  std::uint64_t budget_denied = 0;  ///< Retries the budget refused.
  std::uint64_t deadline_stops = 0; ///< Calls stopped by their deadline.
  std::uint64_t holdoff_waits = 0;  ///< Attempts that waited for a counter's 429 hold-off.
};

/// The retry engine of one client.
///
/// @par Thread safety
/// `call` and every primitive may be used from any number of threads and coroutines at once. The `http_sender`
/// must outlive the engine; the engine must outlive every call on it.
class retry_engine {
public:
  /// @param sender the transport seam; not owned, must outlive the engine.
  /// @param options client-level defaults and services (clock, random, logger, hook, budget parameters).
  explicit retry_engine(http_sender& sender, retry_options options = {});
  retry_engine(retry_engine const&) = delete;
  retry_engine& operator=(retry_engine const&) = delete;
  ~retry_engine();

  /// Merges `per_call` over the client options (call_options.hpp) and fixes the deadline from now.
  /// Call once per logical call.
  [[nodiscard]] call_settings settings_for(call_options const& per_call = {}) const;

  /// Runs one logical call: attempts, classification, backoff, budget, hooks, hold-offs (see the file comment).
  ///
  /// Completes, never throwing for these, with `call_result::stopped`:
  /// - `success`: a 2xx response (`replayed` set from `Idempotency-Replayed: true`);
  /// - `not_retryable`: a final status or transport error, or a write without a key after it was sent;
  /// - `retries_exhausted`, `budget_exhausted`, `deadline_exceeded`: the last real error or response is kept;
  /// - `cancelled`: `error == asio::error::operation_aborted`;
  /// - `invalid_request`: `errc::invalid_idempotency_key`, nothing sent.
  ///
  /// @param request moved into the call's frame; for writes the engine adds `Idempotency-Key` (unless the request
  ///        already has one, which is then validated as a caller key). The body is sent byte-identical each time.
  /// @param traits the counter and whether it is a write.
  /// @param settings from `settings_for`; taken by value and kept in the frame.
  /// @par Cancellation
  /// Terminal cancellation through the awaiting coroutine's cancellation slot ends the call at once with
  /// `stopped == cancelled`, whether it is in an attempt, a backoff sleep or a hold-off wait.
  /// @par Retries and idempotency
  /// Seed 000 / 004 as configured by the policy; one key per logical call, reused on every attempt.
  [[nodiscard]] asio::awaitable<call_result> call(http_request request, request_traits traits, call_settings settings);

  /// `call` for any completion token (callbacks, `asio::use_future`, `use_awaitable`, ...), run on the sender's
  /// executor. Completion signature `void(std::exception_ptr, call_result)`.
  template <typename CompletionToken>
  auto async_call(http_request request, request_traits traits, call_settings settings, CompletionToken&& token) {
    return asio::co_spawn(sender_.get_executor(), call(std::move(request), std::move(traits), std::move(settings)),
                          std::forward<CompletionToken>(token));
  }

  // --- primitives for callers that retry on their own (per-item retries of a ticket batch) -------------------

  /// The wait before retry number `retry` (1-based) under `policy`, drawing the jitter from the engine's random
  /// source. `retry_after` as from `parse_retry_after`, or an item's `retry_after` in seconds.
  [[nodiscard]] backoff_delay next_delay(retry_policy const& policy, int retry,
                                         std::optional<std::chrono::milliseconds> retry_after) const;

  /// Whether a wait of `delay` starting now would end before `settings.deadline` (a retry that would end past the
  /// deadline is not made).
  [[nodiscard]] bool fits_deadline(call_settings const& settings, clock::duration delay) const noexcept;

  /// Fires the `on_retry` hook and writes the WARN line (`format_retry_line`). Does not consult the budget.
  void notify_retry(retry_event const& event);

  /// Sleeps on the engine's clock until `when`; empty error, or `operation_aborted` when cancelled.
  [[nodiscard]] asio::awaitable<std::error_code> sleep_until(clock::time_point when);

  /// Records a 429 `Retry-After` for `counter` (the hold-off every request to it then waits for). The server's full
  /// value is honoured, not the policy's `max_retry_after` (that caps a backoff, not the server's rate limit), up to
  /// `max_holdoff`, so that one broken header cannot block a counter for a year.
  void hold_counter(std::string_view counter, std::chrono::milliseconds retry_after);

  [[nodiscard]] retry_budget& budget() noexcept { return budget_; }
  [[nodiscard]] retry_budget const& budget() const noexcept { return budget_; }
  [[nodiscard]] holdoff_registry& holdoffs() noexcept { return holdoffs_; }
  [[nodiscard]] wandura::clock& get_clock() const noexcept { return *clock_; }
  [[nodiscard]] retry_options const& options() const noexcept { return options_; }
  [[nodiscard]] http_sender& sender() const noexcept { return sender_; }
  [[nodiscard]] retry_engine_stats stats() const noexcept;

private:
  struct counters {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> attempts{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> budget_denied{0};
    std::atomic<std::uint64_t> deadline_stops{0};
    std::atomic<std::uint64_t> holdoff_waits{0};
  };

  [[nodiscard]] double draw() const;

  http_sender& sender_;
  retry_options options_;
  std::shared_ptr<wandura::clock> clock_;
  retry_budget budget_;
  holdoff_registry holdoffs_;
  counters counters_;
};

} // namespace wandura
