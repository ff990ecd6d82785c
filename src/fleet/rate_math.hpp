// The arithmetic of the per-viewer token bucket and the counter's GCRA, in C++. The Lua scripts of
// lua_scripts.hpp do exactly this inside Redis; the classes use these functions for their local fallback, and the
// tests check that both decide alike. Times are milliseconds (since the Unix epoch) as doubles, as in Lua.
// Not public API.
#pragma once

#include <algorithm>
#include <cmath>

namespace wandura::detail {

/// A rate given per minute, per millisecond.
constexpr double per_ms(double per_minute) noexcept {
  return per_minute / 60000.0;
}

/// Whether `share` of a rate of `per_minute` is a rate per millisecond the bucket arithmetic can divide by: a share
/// that underflows to 0 or to a subnormal would make every wait computed from it infinite or not a number.
inline bool share_counts(double per_minute, double share) noexcept {
  return std::isnormal(per_ms(per_minute) * share);
}

/// A token bucket of `capacity` tokens refilled continuously at `rate_per_ms`. A missing bucket is full.
struct token_bucket {
  double tokens = 0;
  double at_ms = 0;
  bool exists = false;
};

struct bucket_answer {
  bool granted = false;
  double wait_ms = 0; ///< when refused: how long until `n` tokens are there
};

/// Refills `b` (which must exist) up to `now_ms` at `rate_per_ms`, to `capacity` at most.
inline void bucket_refill(token_bucket& b, double now_ms, double rate_per_ms, double capacity) noexcept {
  if (now_ms > b.at_ms) {
    b.tokens = std::min(capacity, b.tokens + (now_ms - b.at_ms) * rate_per_ms);
    b.at_ms = now_ms;
  }
}

/// Gives `n` tokens back to `b` (which must exist; nothing for n <= 0), refilled to `now_ms` first, to `capacity`
/// at most.
inline void bucket_give_back(token_bucket& b, double now_ms, double rate_per_ms, double capacity, double n) noexcept {
  if (n > 0) {
    bucket_refill(b, now_ms, rate_per_ms, capacity);
    b.tokens = std::min(capacity, b.tokens + n);
  }
}

/// Takes `n` tokens all-or-nothing (n > 0), or gives `-n` back (n < 0, capped at `capacity`), from a bucket that
/// holds `capacity` when full and refills at `rate_per_ms`. `most` is the largest request that may ever go, at least
/// `capacity`: a request above `capacity` but within `most` goes when the bucket is full and leaves it in debt
/// (below 0 tokens, refilled before anything else goes), as a process's share of a larger bucket must let such a
/// request go, or it never would. More than `most` is always refused, with the time until the bucket is full.
inline bucket_answer bucket_take(token_bucket& b, double now_ms, double rate_per_ms, double capacity, double n,
                                 double most) {
  if (!b.exists) {
    b = {capacity, now_ms, true};
  }
  if (n < 0) {
    bucket_give_back(b, now_ms, rate_per_ms, capacity, -n);
    return {true, 0};
  }
  bucket_refill(b, now_ms, rate_per_ms, capacity);
  if (n > most) {
    return {false, std::ceil((capacity - b.tokens) / rate_per_ms)}; // never fits: the time to refill completely
  }
  double const needed = std::min(n, capacity); // above the capacity: a full bucket
  if (needed > b.tokens) {
    return {false, std::ceil((needed - b.tokens) / rate_per_ms)};
  }
  b.tokens -= n;
  return {true, 0};
}

/// `bucket_take` of a whole bucket: more than `capacity` is always refused.
inline bucket_answer bucket_take(token_bucket& b, double now_ms, double rate_per_ms, double capacity, double n) {
  return bucket_take(b, now_ms, rate_per_ms, capacity, n, capacity);
}

/// GCRA state of one counter: the theoretical arrival time and a hold-off (both ms since the epoch).
struct gcra {
  double tat_ms = 0;
  double hold_ms = 0;
};

struct gcra_answer {
  bool go = false;
  /// When `go`: the time the units may be used (`now_ms`, or the booked instant). When refused: the earliest time
  /// the same request would go (or be booked).
  double at_ms = 0;
};

/// Admits `cost` units at `now_ms` if the counter has room: one unit every `emission_ms`, up to `burst` units at
/// once from idle; never before `hold_ms`. Units that conform within `book_ms` of now are booked: taken now, used
/// at the instant they conform, so that callers who book get turns in the order they asked (0: only units there
/// now are admitted).
inline gcra_answer gcra_take(gcra& g, double now_ms, double cost, double emission_ms, double burst,
                             double book_ms = 0) {
  if (g.hold_ms > now_ms) {
    return {false, std::ceil(g.hold_ms)}; // a hold to a fraction of a millisecond: never answered before its end
  }
  double const tat = std::max(g.tat_ms, now_ms);
  double const new_tat = tat + cost * emission_ms;
  double const allow_at = new_tat - burst * emission_ms;
  if (allow_at > now_ms + book_ms) {
    return {false, std::ceil(allow_at - book_ms)};
  }
  g.tat_ms = new_tat;
  return {true, allow_at > now_ms ? std::ceil(allow_at) : now_ms};
}

/// Holds every caller back until `until_ms` (a 429's Retry-After). Units booked for instants inside the hold are used
/// at its end: they are moved there, so that they come out of the burst at the end instead of adding to it. Calling
/// it again with the same or an earlier hold changes nothing.
inline void gcra_hold(gcra& g, double now_ms, double until_ms, double emission_ms, double burst) {
  double const from = std::max(now_ms, g.hold_ms); // booked instants before it were moved by an earlier hold
  g.hold_ms = std::max(g.hold_ms, until_ms);
  double const to = std::min(g.tat_ms - burst * emission_ms, g.hold_ms); // the last booked instant, within the hold
  if (to > from) {
    g.tat_ms = std::max(g.tat_ms, g.hold_ms + (to - from));
  }
}

} // namespace wandura::detail
