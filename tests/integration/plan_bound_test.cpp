// An independent recomputation of the demo's `play_success_bound` (docs/demo.md "The bound") from the plan it
// wrote with `--plan-out`, compared with the figure in its report.json. Shares no code with the demo: it reads both
// files with nlohmann-json and replays the plan on its own ticket bucket.
//
//   plan_bound_test PLAN.json REPORT.json [--expect-below X]
//
// Exit 0 when the two bounds agree within 0.01 (and the bound is below X when asked); 1 otherwise; 2 for bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct play {
  double at = 0;
  std::string who; // viewer, device, film and episode: what makes a ticket the same
};

nlohmann::json read_json(char const* path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(std::string("cannot read ") + path);
  }
  return nlohmann::json::parse(in);
}

/// Serves the plays first come first served from a bucket of `capacity` tickets holding `start` at time 0 and
/// refilled capacity/60 a second; a repeat of a served ticket is free; a play that would wait longer than
/// `max_wait_s` is dropped and takes nothing. Returns the fraction served.
double recompute(std::vector<play> plays, double capacity, double start, double max_wait_s) {
  std::stable_sort(plays.begin(), plays.end(), [](play const& a, play const& b) { return a.at < b.at; });
  double const per_s = capacity / 60.0;
  std::map<std::string, bool> holds; // tickets already served
  double bucket = std::min(start, capacity);
  double clock = 0; // the bucket is known at this time; nobody is served before it (first come first served)
  int served = 0;
  for (auto const& p : plays) {
    if (holds.count(p.who) != 0) {
      ++served;
      continue;
    }
    double t = std::max(clock, p.at);
    double level = std::min(capacity, bucket + (t - clock) * per_s);
    if (level < 1.0) {
      double const wait = (1.0 - level) / per_s;
      t += wait;
      level = 1.0;
    }
    if (t - p.at > max_wait_s) {
      continue;
    }
    bucket = level - 1.0;
    clock = t;
    holds[p.who] = true;
    ++served;
  }
  return plays.empty() ? 1.0 : served / static_cast<double>(plays.size());
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--expect-below")) {
    std::cerr << "usage: plan_bound_test PLAN.json REPORT.json [--expect-below X]\n";
    return 2;
  }
  double bound = 0;
  double reported = 0;
  try {
    auto const plan = read_json(argv[1]);
    auto const report = read_json(argv[2]);
    std::vector<play> plays;
    for (auto const& p : plan.at("plays")) {
      plays.push_back({p.at("t_s").get<double>(), std::to_string(p.at("viewer").get<long long>()) + "/" +
                                                      std::to_string(p.at("device").get<long long>()) + "/" +
                                                      p.at("film_ref").get<std::string>() + "/" +
                                                      std::to_string(p.at("episode_no").get<long long>())});
    }
    bound = recompute(std::move(plays), plan.at("playback_limit_per_min").get<double>(),
                      plan.at("tickets_left_at_start").get<double>(), plan.at("deadline_ms").get<double>() / 1000.0);
    reported = report.at("play_success_bound").get<double>();
  } catch (std::exception const& e) {
    std::cerr << "plan_bound_test: " << e.what() << "\n";
    return 2;
  }
  std::printf("play_success_bound: report %.4f, recomputed from the plan %.4f\n", reported, bound);
  if (std::fabs(bound - reported) > 0.01) {
    std::printf("FAILED: they differ by more than 0.01\n");
    return 1;
  }
  if (argc == 5 && !(bound < std::stod(argv[4]))) {
    std::printf("FAILED: the plan's bound is not below %s: the run does not exercise the queue\n", argv[4]);
    return 1;
  }
  return 0;
}
