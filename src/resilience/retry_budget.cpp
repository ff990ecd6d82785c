#include "wandura/resilience/retry_budget.hpp"

#include <algorithm>

namespace wandura {
namespace {

// window_: | start ms since creation (48 bits) | generation (16 bits) |
// counts_: | generation mod 256 (8 bits) | requests (32 bits) | retries (24 bits) |
//
// A window change is published first (CAS on window_ bumps the generation); counts carry the generation of the
// window they belong to, and a thread that sees counts of another generation than the window it loaded AFTER them
// treats them as zero. Counts can never be newer than a window loaded after them, because a generation only
// reaches counts_ after it reached window_, and they lag it by at most a few generations (the thread that rolls a
// window writes counts next), so 8 bits tell them apart. Every allowed retry was checked against the counts of
// its own window.
//
// note_request, 90 % of the traffic, is one fetch_add on the fast path: the increment lands in whatever counts are
// current, and only when those turn out to belong to an older window does the caller take the CAS path, which
// resets them (discarding the stray increment) and counts the request again in the new window. Past
// `requests_fast_limit` requests in one window (2^31: not reached at any real rate) the CAS path saturates the
// count below the limit, which also absorbs the increments of the callers that went past it meanwhile (at most
// one per thread), so the field never reaches its top. No load before the fetch_add: under contention it would
// fetch the line once more before taking it.
constexpr std::uint64_t gen_mask = 0xFFFF;
constexpr std::uint64_t counts_gen_mask = 0xFF;
constexpr std::uint64_t retries_mask = 0xFF'FFFF;
constexpr std::uint64_t requests_mask = 0xFFFF'FFFF;
constexpr std::uint64_t requests_one = std::uint64_t{1} << 24;
/// Above this many requests in a window the fast path stops (threads racing past it cannot reach the field's top).
constexpr std::uint64_t requests_fast_limit = std::uint64_t{1} << 31;
constexpr std::uint64_t max_start_ms = (std::uint64_t{1} << 48) - 1;

constexpr std::uint64_t window_start(std::uint64_t w) noexcept {
  return w >> 16;
}
constexpr std::uint64_t window_gen(std::uint64_t w) noexcept {
  return w & counts_gen_mask;
}
constexpr std::uint64_t counts_gen(std::uint64_t c) noexcept {
  return c >> 56;
}
constexpr std::uint64_t counts_requests(std::uint64_t c) noexcept {
  return (c >> 24) & requests_mask;
}
constexpr std::uint64_t counts_retries(std::uint64_t c) noexcept {
  return c & retries_mask;
}
constexpr std::uint64_t pack_counts(std::uint64_t gen, std::uint64_t requests, std::uint64_t retries) noexcept {
  return (gen << 56) | (requests << 24) | retries;
}

/// 100 x the number of retries a window with `requests` requests allows: max(min_retries, percent% of requests).
std::uint64_t limit_x100(retry_budget_config const& cfg, std::uint64_t requests) noexcept {
  auto const min_x100 = static_cast<std::uint64_t>(std::max<std::int64_t>(cfg.min_retries, 0)) * 100;
  auto const pct_x100 = static_cast<std::uint64_t>(std::max<std::int64_t>(cfg.percent, 0)) * requests;
  return std::max(min_x100, pct_x100);
}

retry_budget_config sanitize(retry_budget_config cfg) noexcept {
  cfg.min_retries = std::clamp<std::int64_t>(cfg.min_retries, 0, std::int64_t{1} << 30);
  cfg.percent = std::clamp<std::int64_t>(cfg.percent, 0, std::int64_t{1} << 20);
  cfg.window = std::max(cfg.window, std::chrono::milliseconds(1));
  return cfg;
}

} // namespace

retry_budget::retry_budget(time_point start, config cfg) noexcept
    : config_(sanitize(cfg)), start_(start), window_(0), counts_(0) {}

std::uint64_t retry_budget::elapsed_ms(time_point now) const noexcept {
  if (now <= start_) {
    return 0;
  }
  auto const ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
  return std::min(static_cast<std::uint64_t>(ms), max_start_ms);
}

std::uint64_t retry_budget::current_window(std::uint64_t now_ms) noexcept {
  auto const length = static_cast<std::uint64_t>(config_.window.count());
  std::uint64_t w = window_.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const start = window_start(w);
    // Seed roll(): more than a window since it started -> restart it now. A caller with an older `now` than the
    // window start (a race between threads) just uses the current window.
    if (now_ms <= start || now_ms - start <= length) {
      return w;
    }
    std::uint64_t const next = (now_ms << 16) | (((w & gen_mask) + 1) & gen_mask);
    if (window_.compare_exchange_weak(w, next, std::memory_order_seq_cst)) {
      return next;
    }
  }
}

void retry_budget::note_request(time_point now) noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::uint64_t const before = counts_.fetch_add(requests_one, std::memory_order_seq_cst);
  if (counts_requests(before) < requests_fast_limit && counts_gen(before) == window_gen(current_window(now_ms))) {
    return; // counted in the current window
  }
  std::uint64_t c = counts_.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const gen = window_gen(current_window(now_ms)); // loaded after c: never older than c's
    bool const same = counts_gen(c) == gen;
    std::uint64_t const requests = std::min((same ? counts_requests(c) : 0) + 1, requests_mask >> 1);
    std::uint64_t const retries = same ? counts_retries(c) : 0;
    if (counts_.compare_exchange_weak(c, pack_counts(gen, requests, retries), std::memory_order_seq_cst)) {
      return;
    }
  }
}

bool retry_budget::try_retry(time_point now) noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::uint64_t c = counts_.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const gen = window_gen(current_window(now_ms));
    std::uint64_t const requests = counts_gen(c) == gen ? counts_requests(c) : 0;
    std::uint64_t const retries = counts_gen(c) == gen ? counts_retries(c) : 0;
    // Seed: if (retries >= max(10, sent * 0.1)) refuse; exact in integers: 100 * retries >= max(1000, 10 * sent).
    if (retries * 100 >= limit_x100(config_, requests) || retries == retries_mask) {
      if (counts_gen(c) != gen) {
        // The window rolled (in current_window) and no count was written in it: write its zero counts, so that
        // counts never fall a full cycle of 256 generations behind the window and an old window's counts never
        // read as the current one's (only a refusal rolls without writing, e.g. with min_retries 0). A failed
        // exchange means another thread wrote counts of this generation or a newer one.
        counts_.compare_exchange_strong(c, pack_counts(gen, 0, 0), std::memory_order_seq_cst);
      }
      return false;
    }
    if (counts_.compare_exchange_weak(c, pack_counts(gen, requests, retries + 1), std::memory_order_seq_cst)) {
      return true;
    }
  }
}

retry_budget::state retry_budget::snapshot(time_point now) const noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::uint64_t const c = counts_.load(std::memory_order_seq_cst);
  std::uint64_t const w = window_.load(std::memory_order_seq_cst);
  auto const length = static_cast<std::uint64_t>(config_.window.count());
  bool const expired = now_ms > window_start(w) && now_ms - window_start(w) > length;
  bool const current = !expired && counts_gen(c) == window_gen(w);
  std::uint64_t const requests = current ? counts_requests(c) : 0;
  std::uint64_t const retries = current ? counts_retries(c) : 0;
  std::uint64_t const allowed = (limit_x100(config_, requests) + 99) / 100;
  state s;
  s.requests = static_cast<std::int64_t>(requests);
  s.retries = static_cast<std::int64_t>(retries);
  s.left = allowed > retries ? static_cast<std::int64_t>(allowed - retries) : 0;
  s.window_age = expired ? std::chrono::milliseconds(0)
                         : std::chrono::milliseconds(
                               static_cast<std::int64_t>(now_ms > window_start(w) ? now_ms - window_start(w) : 0));
  return s;
}

} // namespace wandura
