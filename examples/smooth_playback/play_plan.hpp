// The plays of a run as plain data (`--plan-out`), and the best play success any client could reach on them: the
// figure the demo's success is read against (docs/demo.md "The bound").
//
// The bound, for a plan of plays at times t (seconds from the first viewer), a playback counter of capacity L
// tickets that holds T tickets when the first viewer starts and refills L/60 per second, and a play deadline D:
// - only plays count (prefetches take nothing);
// - a play whose viewer, device, film and episode was served before needs no ticket: it is served at once;
// - every other play takes one ticket, first come first served, at the earliest moment a ticket is there;
// - a play that would wait longer than D is not served and takes nothing.
// The bound is the fraction of plays served.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "audience.hpp"

namespace demo {

/// One `start_episode` of the plan.
struct planned_play {
  double t_s = 0; ///< Seconds from the first viewer's first play.
  std::uint32_t viewer = 0;
  std::uint32_t device = 0;
  std::string film_ref;
  std::int32_t episode_no = 1;
};

/// What `--plan-out` writes.
struct play_plan {
  double playback_limit_per_min = 0; ///< L.
  double tickets_left_at_start = 0;  ///< T: tickets left on the counter when the first viewer starts.
  double deadline_ms = 0;            ///< D: a play's total deadline.
  std::vector<planned_play> plays;   ///< In time order (ties in viewer order).
};

/// Every step of `plan` as a play, timed from the first viewer's first step.
[[nodiscard]] play_plan make_play_plan(audience const& plan, double limit_per_min, double tickets_left_at_start,
                                       double deadline_ms);

/// The plan of a run that started `run_started_after` after its in-process emulator (whose playback counter starts
/// full and had counted `counted_before` tickets, the warm-up's, when the viewers began): T is what the counter
/// holds when the first viewer starts. Against an API (`in_process` false) T is not known and is written as L.
[[nodiscard]] play_plan plan_of_run(audience const& plan, double limit_per_min, bool in_process,
                                    std::uint64_t counted_before, std::chrono::steady_clock::duration run_started_after,
                                    std::chrono::milliseconds deadline);

/// The best possible play success of `plan` (see the file comment); 1 for a plan without plays.
[[nodiscard]] double play_success_bound(play_plan const& plan);

/// Writes `plan` as JSON: `{"playback_limit_per_min": L, "tickets_left_at_start": T, "deadline_ms": D,
/// "plays": [{"t_s": S, "viewer": V, "device": E, "film_ref": F, "episode_no": N}, ...]}`.
/// @throws std::runtime_error when the file cannot be written.
void write_play_plan(std::string const& path, play_plan const& plan);

} // namespace demo
