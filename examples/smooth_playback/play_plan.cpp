#include "play_plan.hpp"

#include "json_text.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace demo {
namespace {} // namespace

play_plan make_play_plan(audience const& plan, double limit_per_min, double tickets_left_at_start, double deadline_ms) {
  play_plan out;
  out.playback_limit_per_min = limit_per_min;
  out.tickets_left_at_start = tickets_left_at_start;
  out.deadline_ms = deadline_ms;
  double first = std::numeric_limits<double>::infinity();
  for (auto const& v : plan.viewers) {
    for (auto const& s : v.steps) {
      first = std::min(first, s.at_s);
    }
  }
  for (auto const& v : plan.viewers) {
    for (auto const& s : v.steps) {
      out.plays.push_back({s.at_s - first, v.id, s.device, plan.catalogue[v.film].film_ref, s.episode_no});
    }
  }
  std::stable_sort(out.plays.begin(), out.plays.end(),
                   [](planned_play const& a, planned_play const& b) { return a.t_s < b.t_s; });
  return out;
}

play_plan plan_of_run(audience const& plan, double limit_per_min, bool in_process, std::uint64_t counted_before,
                      std::chrono::steady_clock::duration run_started_after, std::chrono::milliseconds deadline) {
  auto out = make_play_plan(plan, limit_per_min, limit_per_min, static_cast<double>(deadline.count()));
  if (in_process && !plan.viewers.empty()) {
    // The counter started full when the emulator did and refills limit/60 a second; the warm-up spent it from the
    // start, so it was never full (capped) again before the first viewer.
    double const first_s = plan.viewers.front().steps.front().at_s; // viewers are in order of their first step
    double const since_start = std::chrono::duration<double>(run_started_after).count() + first_s;
    out.tickets_left_at_start = std::clamp(
        limit_per_min - static_cast<double>(counted_before) + limit_per_min / 60.0 * since_start, 0.0, limit_per_min);
  }
  return out;
}

double play_success_bound(play_plan const& plan) {
  if (plan.plays.empty()) {
    return 1.0;
  }
  double const capacity = plan.playback_limit_per_min;
  double const rate = capacity / 60.0; // tickets per second
  double const wait_limit_s = plan.deadline_ms / 1000.0;
  double tokens = std::min(plan.tickets_left_at_start, capacity);
  double at = 0; // the time `tokens` is for: the last ticket taken (first come first served) or the start
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::string, std::int32_t>> served;
  std::size_t ok = 0;
  for (auto const& p : plan.plays) {
    auto key = std::make_tuple(p.viewer, p.device, p.film_ref, p.episode_no);
    if (served.contains(key)) {
      ++ok; // the ticket is already on the device
      continue;
    }
    double const from = std::max(p.t_s, at); // nobody overtakes an earlier play still waiting
    double const level = std::min(capacity, tokens + rate * (from - at));
    double const when = level >= 1.0 ? from : from + (1.0 - level) / rate;
    if (when - p.t_s > wait_limit_s) {
      continue; // past its deadline: not served, takes nothing
    }
    tokens = std::min(capacity, level + rate * (when - from)) - 1.0;
    at = when;
    served.insert(std::move(key));
    ++ok;
  }
  return static_cast<double>(ok) / static_cast<double>(plan.plays.size());
}

void write_play_plan(std::string const& path, play_plan const& plan) {
  std::ostringstream o;
  o << "{\"playback_limit_per_min\": " << json_number(plan.playback_limit_per_min)
    << ", \"tickets_left_at_start\": " << json_number(plan.tickets_left_at_start)
    << ", \"deadline_ms\": " << json_number(plan.deadline_ms) << ",\n \"plays\": [";
  for (std::size_t i = 0; i < plan.plays.size(); ++i) {
    auto const& p = plan.plays[i];
    o << (i == 0 ? "\n  " : ",\n  ") << "{\"t_s\": " << json_number(p.t_s) << ", \"viewer\": " << p.viewer
      << ", \"device\": " << p.device << ", \"film_ref\": " << json_quoted(p.film_ref)
      << ", \"episode_no\": " << p.episode_no << "}";
  }
  o << "\n]}\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << o.str();
  out.close();
  if (!out) {
    throw std::runtime_error("cannot write " + path);
  }
}

} // namespace demo
