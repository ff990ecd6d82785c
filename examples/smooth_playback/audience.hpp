// The demo's audience: who starts which episode when, decided before the run from a seed, so that two runs with the
// same seed and options ask for exactly the same things. No SDK types here: a plan is plain data, the simulation
// (simulation.hpp) plays it against a `wandura::client`.
//
// What a viewer does (seed 000 "Xin vé sớm", "Dùng lại vé cho đúng"):
// - starts episode N of a film chosen Zipf-like (s = 1.1) from the catalogue: one request, N as play plus N+1 and
//   N+2 as prefetch when they are unlocked;
// - some binge: after watching a few (scaled) seconds they start N+1, then maybe N+2, up to what is unlocked;
// - some have only part of the series unlocked (`unlocked_through < N + 2`), so fewer prefetches are asked for;
// - some restart the same episode on the same device (the ticket is reused: client cache or server reuse);
// - some continue the same episode on another device (a fresh ticket: tickets are never shared across devices).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace demo {

/// A film of the catalogue, in popularity order (rank 1 first).
struct catalogue_film {
  std::string film_ref;
  std::int32_t episodes = 1; ///< Released episodes, numbered 1..episodes.
};

/// What one step of a viewer does.
enum class step_kind : std::uint8_t {
  start,         ///< Presses play on an episode (the first one, or the next one while binging).
  restart,       ///< Presses play again on the same episode on the same device.
  switch_device, ///< Continues the same episode on a second device of the same user.
};

[[nodiscard]] char const* to_string(step_kind k) noexcept;

struct viewer_step {
  double at_s = 0; ///< Seconds since the start of the run.
  step_kind kind = step_kind::start;
  std::int32_t episode_no = 1; ///< The episode played.
  std::uint8_t device = 0;     ///< 0: the viewer's first device, 1: the second.
};

/// One viewer: a user of the backend, on one or two devices, watching one film.
struct viewer_plan {
  std::uint32_t id = 0;
  std::size_t film = 0;              ///< Index into the catalogue.
  std::int32_t unlocked_through = 1; ///< The last episode this viewer may watch (>= every episode played).
  std::vector<viewer_step> steps;    ///< In time order; at least one `start`.
};

/// The mix of behaviours, as fractions of viewers in [0, 1]. Binge, restart and device switch exclude each other.
struct audience_mix {
  double binge = 0.35; ///< Start N+1 after watching N (and N+2 after N+1 with probability `binge_on`).
  double binge_on = 0.5;
  double restart = 0.15;        ///< Restart the same episode on the same device.
  double switch_device = 0.05;  ///< Continue the same episode on a second device.
  double partial_unlock = 0.25; ///< Only N or N+1 unlocked (the rest is behind the paywall).
  double from_first = 0.4;      ///< Start the series at episode 1 (else anywhere in it).
  double watch_min_s = 2.0;     ///< Scaled watching time before the next step, uniform in [min, max].
  double watch_max_s = 5.0;
  double zipf_s = 1.1; ///< Zipf exponent of film popularity.
};

/// How viewers arrive: a triangle over `duration_s`, rising from 0 to its peak at `peak_at` (fraction of the run)
/// and falling back to 0 at the end, the shape of an evening peak.
struct arrival_profile {
  double duration_s = 30;
  double peak_at = 0.5;

  /// The arrival time of quantile `u` in [0, 1] (the inverse of the triangle's distribution function).
  [[nodiscard]] double time_of(double u) const noexcept;
};

/// Samples an index in [0, weights.size()) with probability proportional to 1 / rank^s (rank = index + 1).
class zipf_sampler {
public:
  /// @param n number of items, >= 1. @param s exponent, >= 0.
  zipf_sampler(std::size_t n, double s);
  /// @param u uniform in [0, 1).
  [[nodiscard]] std::size_t operator()(double u) const noexcept;
  /// The probability of index `i`.
  [[nodiscard]] double probability(std::size_t i) const noexcept;

private:
  std::vector<double> cdf_;
};

/// Fresh tickets asked of the server per second of the run, if every ticket were granted (tickets the viewer's
/// device already holds for the same episode and intent come from the client's cache): the demand the playback
/// limit is sized against.
struct demand_curve {
  std::vector<double> tickets_per_s; ///< Index = whole second of the run.
  std::vector<double> plays_per_s;
  [[nodiscard]] double peak_tickets_per_s(std::size_t window_s) const noexcept;
  [[nodiscard]] double peak_plays_per_s(std::size_t window_s) const noexcept;
  double total_tickets = 0;
  double total_plays = 0;
};

/// The whole plan of a run.
struct audience {
  std::vector<catalogue_film> catalogue;
  std::vector<viewer_plan> viewers; ///< Sorted by their first step's time.
  std::size_t steps = 0;            ///< Steps of every viewer.

  /// The demand of the plan over `duration_s` seconds (and 30 s of binge tail).
  [[nodiscard]] demand_curve demand(double duration_s) const;
};

/// Builds the plan of `viewers` viewers arriving over `profile` from `catalogue` (not empty), deterministically from
/// `seed`. @throws std::invalid_argument when the catalogue is empty or a film has no episode.
[[nodiscard]] audience plan_audience(std::vector<catalogue_film> catalogue, std::uint32_t viewers,
                                     arrival_profile const& profile, audience_mix const& mix, std::uint64_t seed);

} // namespace demo
