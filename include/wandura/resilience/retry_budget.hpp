// The client's retry budget (docs/protocol.md §3 `RetryBudget`): retries may be at most 10 % of the requests of the
// last minute, never fewer than 10 a minute, counted in windows of a minute that each start afresh (the rule below).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace wandura {

/// Parameters of a `retry_budget` (docs/protocol.md §3 values by default).
struct retry_budget_config {
  /// Retries always allowed per window (seed: 10). Taken within [0, 2^30]: a negative value is 0.
  std::int64_t min_retries = 10;
  /// Retries allowed as a percentage of the window's requests (seed: 10). Taken within [0, 2^20].
  std::int64_t percent = 10;
  /// Length of a window (seed: 60 s). At least 1 ms.
  std::chrono::milliseconds window{60000};
};

/// A lock-free retry budget, shared by every call of a client.
///
/// The rule, exactly as the seed's reference code: a window starts when the budget is created; on every operation,
/// when MORE than `window` has passed since the window started, both counts reset and the window restarts at that
/// moment. A retry is allowed while `retries < max(min_retries, percent % of requests)` and then counted; the
/// percentage is exact, not rounded (10 % of 15 requests is 1.5: a second retry goes, as 1 < 1.5). Requests
/// are counted once per logical call (not per attempt) through `note_request`.
///
/// Time is passed in explicitly (`wandura::clock::now()` of the client), so the budget is deterministic under a
/// hand-stepped clock. Times are measured in whole milliseconds since `start`; earlier times count as `start`.
///
/// @par Thread safety
/// All member functions may be called from any number of threads at once. No mutex: the state is 64-bit atomic
/// words (the window's start and generation; the retries; the requests in `stripes` words, each on a cache line of
/// its own), updated with fetch_add and compare-and-swap. Threads are given request words in turn as they first
/// count (the ninth thread of a process shares the first's word), so a few threads counting at once mostly touch
/// lines of their own: a request costs one fetch_add, a retry reads the request words and updates the retries.
/// No interleaving lets more retries through than the rule allows, but for one: a request counted by a thread whose
/// `now` ends the window may also be read, by a retry of another thread with an earlier `now`, as one of the ending
/// window's requests (at most one per thread counting at that moment, with times that disagree).
class retry_budget {
public:
  using time_point = std::chrono::steady_clock::time_point;

  using config = retry_budget_config;

  /// The current window as seen at some time (for metrics and the `on_retry` event).
  struct state {
    std::int64_t requests = 0; ///< Requests noted in the current window.
    std::int64_t retries = 0;  ///< Retries allowed in the current window.
    std::int64_t left = 0;     ///< Retries still allowed now: `max(min_retries, percent% of requests) - retries`.
    std::chrono::milliseconds window_age{0}; ///< Time since the current window started.
  };

  explicit retry_budget(time_point start, config cfg = {}) noexcept;
  retry_budget(retry_budget const&) = delete;
  retry_budget& operator=(retry_budget const&) = delete;

  /// Counts one logical call (seed `noteRequest`). Requests saturate at 2^31 - 1 per window, retries at 2^24 - 1.
  /// One `fetch_add` on this thread's stripe unless a window has just ended.
  void note_request(time_point now) noexcept;

  /// Asks for one retry (seed `tryRetry`): true and counted when the rule allows it, false otherwise.
  [[nodiscard]] bool try_retry(time_point now) noexcept;

  /// The window as it would be at `now` (a window older than `window` reads as empty); does not change anything.
  [[nodiscard]] state snapshot(time_point now) const noexcept;

  [[nodiscard]] config const& settings() const noexcept { return config_; }

  /// How many words the requests are counted in (threads beyond it share them).
  static constexpr std::size_t stripes = 8;

private:
  /// One word, and room after it: two words of the budget are 64 bytes apart at least, so never on one cache line.
  /// Padded rather than over-aligned, so that a budget (or an object holding one) may live where allocation gives
  /// only the default alignment, as GCC 12's coroutine frames do.
  struct line {
    std::atomic<std::uint64_t> word{0};
    char room[56]{};
  };

  [[nodiscard]] std::uint64_t elapsed_ms(time_point now) const noexcept;
  [[nodiscard]] std::uint64_t current_window(std::uint64_t now_ms) noexcept;
  /// The requests of window generation `gen` (mod 256), summed over the stripes.
  [[nodiscard]] std::uint64_t requests_of(std::uint64_t gen) const noexcept;
  /// Writes zero counts of the current window into every word still holding an older window's.
  void clear_old_counts() noexcept;

  config config_;
  time_point start_;
  /// Window start in ms since `start_` (high 48 bits) and the window's generation (low 16 bits).
  line window_;
  /// Generation mod 256 (high 8 bits) and retries (low 24 bits) of the window they belong to.
  line retries_;
  /// Generation mod 256 (high 8 bits) and requests (low 56 bits: at most 2^31, and one more per thread sharing the
  /// word) of the window they belong to.
  std::array<line, stripes> requests_;
};

} // namespace wandura
