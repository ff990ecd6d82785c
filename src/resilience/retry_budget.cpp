#include "wandura/resilience/retry_budget.hpp"

#include <algorithm>

namespace wandura {
namespace {

// window_:   | start ms since creation (48 bits) | generation (16 bits) |
// retries_:  | generation mod 256 (8 bits) | retries (24 bits, low) |
// requests_: | generation mod 256 (8 bits) | requests (56 bits: at most 2^31 + one per thread each) |, per stripe
//
// A window change is published first (CAS on window_ bumps the generation); counts carry the generation of the
// window they belong to, and a thread that sees counts of another generation than the window it loaded AFTER them
// treats them as zero. Counts can never be newer than a window loaded after them, because a generation only
// reaches a count after it reached window_. The thread that rolls a window then writes zero counts of the new
// generation into every word still holding an older one (`clear_old_counts`), so no word falls a full cycle of
// 256 generations behind the window, and an old window's counts never read as the current one's. Every allowed
// retry was checked against requests of its own window: read before its retry is counted, they can only have grown
// since (a roll reads as fewer, never more). One exception (retry_budget.hpp, "Thread safety"): a request is added
// to its word before its caller looks at the window, so a caller whose `now` ends the window adds it to the ending
// window's word first; a retry reading that word meanwhile counts it there, and the caller then counts it again in
// the new window.
//
// note_request, 90 % of the traffic, is one fetch_add on the fast path, on the word of the caller's thread (threads
// are given stripes in turn): the increment lands in whatever counts the word holds, and only when those turn out
// to belong to an older window does the caller take the CAS path, which resets them (discarding the stray
// increment) and counts the request again in the new window. Past `requests_fast_limit` requests in one word and
// window (2^31: not reached at any real rate) the CAS path saturates the word below the limit, which also absorbs
// the increments of the callers that went past it meanwhile (at most one per thread), so the word never overflows.
// No load before the fetch_add: under contention it would fetch the line once more before taking it.
constexpr std::uint64_t gen_mask = 0xFFFF;
constexpr std::uint64_t counts_gen_mask = 0xFF;
constexpr int counts_gen_shift = 56;
constexpr std::uint64_t retries_mask = 0xFF'FFFF;
constexpr std::uint64_t requests_mask = (std::uint64_t{1} << counts_gen_shift) - 1;
/// The most requests a window counts (each word's, and their sum).
constexpr std::uint64_t requests_max = (std::uint64_t{1} << 31) - 1;
/// At this many requests in a word the fast path stops.
constexpr std::uint64_t requests_fast_limit = std::uint64_t{1} << 31;
constexpr std::uint64_t max_start_ms = (std::uint64_t{1} << 48) - 1;

constexpr std::uint64_t window_start(std::uint64_t w) noexcept {
  return w >> 16;
}
constexpr std::uint64_t window_gen(std::uint64_t w) noexcept {
  return w & counts_gen_mask;
}
constexpr std::uint64_t gen_of(std::uint64_t word) noexcept {
  return word >> counts_gen_shift;
}
constexpr std::uint64_t pack(std::uint64_t gen, std::uint64_t count) noexcept {
  return (gen << counts_gen_shift) | count;
}

/// This thread's stripe: threads are given them in turn.
std::size_t stripe_of_this_thread() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local std::size_t const mine = next.fetch_add(1, std::memory_order_relaxed) % retry_budget::stripes;
  return mine;
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

retry_budget::retry_budget(time_point start, config cfg) noexcept : config_(sanitize(cfg)), start_(start) {}

std::uint64_t retry_budget::elapsed_ms(time_point now) const noexcept {
  if (now <= start_) {
    return 0;
  }
  auto const ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
  return std::min(static_cast<std::uint64_t>(ms), max_start_ms);
}

std::uint64_t retry_budget::current_window(std::uint64_t now_ms) noexcept {
  auto const length = static_cast<std::uint64_t>(config_.window.count());
  std::uint64_t w = window_.word.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const start = window_start(w);
    // Seed roll(): more than a window since it started -> restart it now. A caller with an older `now` than the
    // window start (a race between threads) just uses the current window.
    if (now_ms <= start || now_ms - start <= length) {
      return w;
    }
    std::uint64_t const next = (now_ms << 16) | (((w & gen_mask) + 1) & gen_mask);
    if (window_.word.compare_exchange_weak(w, next, std::memory_order_seq_cst)) {
      clear_old_counts();
      return next;
    }
  }
}

void retry_budget::clear_old_counts() noexcept {
  auto clear = [this](std::atomic<std::uint64_t>& word) {
    std::uint64_t c = word.load(std::memory_order_seq_cst);
    for (;;) {
      // The window's generation loaded after the word's: a word of another one belongs to an older window. Zero
      // counts of the current window then replace it, unless the word changed meanwhile (then look again).
      std::uint64_t const gen = window_gen(window_.word.load(std::memory_order_seq_cst));
      if (gen_of(c) == gen || word.compare_exchange_weak(c, pack(gen, 0), std::memory_order_seq_cst)) {
        return;
      }
    }
  };
  clear(retries_.word);
  for (auto& stripe : requests_) {
    clear(stripe.word);
  }
}

std::uint64_t retry_budget::requests_of(std::uint64_t gen) const noexcept {
  std::uint64_t sum = 0;
  for (auto const& stripe : requests_) {
    std::uint64_t const c = stripe.word.load(std::memory_order_seq_cst);
    sum += gen_of(c) == gen ? std::min(c & requests_mask, requests_max) : 0;
  }
  return std::min(sum, requests_max);
}

void retry_budget::note_request(time_point now) noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::atomic<std::uint64_t>& word = requests_[stripe_of_this_thread()].word;
  std::uint64_t const before = word.fetch_add(1, std::memory_order_seq_cst);
  if ((before & requests_mask) < requests_fast_limit && gen_of(before) == window_gen(current_window(now_ms))) {
    return; // counted in the current window
  }
  std::uint64_t c = word.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const gen = window_gen(current_window(now_ms)); // loaded after c: never older than c's
    std::uint64_t const requests = gen_of(c) == gen ? std::min((c & requests_mask) + 1, requests_max) : 1;
    if (word.compare_exchange_weak(c, pack(gen, requests), std::memory_order_seq_cst)) {
      return;
    }
  }
}

bool retry_budget::try_retry(time_point now) noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::uint64_t c = retries_.word.load(std::memory_order_seq_cst);
  for (;;) {
    std::uint64_t const gen = window_gen(current_window(now_ms)); // loaded after c: never older than c's
    std::uint64_t const retries = gen_of(c) == gen ? c & retries_mask : 0;
    // Seed: if (retries >= max(10, sent * 0.1)) refuse; exact in integers: 100 * retries >= max(1000, 10 * sent).
    // The requests are read after the window and the retries: a window rolled since reads them as fewer.
    if (retries * 100 >= limit_x100(config_, requests_of(gen)) || retries == retries_mask) {
      return false;
    }
    if (retries_.word.compare_exchange_weak(c, pack(gen, retries + 1), std::memory_order_seq_cst)) {
      return true;
    }
  }
}

retry_budget::state retry_budget::snapshot(time_point now) const noexcept {
  std::uint64_t const now_ms = elapsed_ms(now);
  std::uint64_t const c = retries_.word.load(std::memory_order_seq_cst);
  std::uint64_t const w = window_.word.load(std::memory_order_seq_cst);
  auto const length = static_cast<std::uint64_t>(config_.window.count());
  bool const expired = now_ms > window_start(w) && now_ms - window_start(w) > length;
  std::uint64_t const requests = expired ? 0 : requests_of(window_gen(w));
  std::uint64_t const retries = !expired && gen_of(c) == window_gen(w) ? c & retries_mask : 0;
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
