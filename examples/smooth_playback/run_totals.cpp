#include "run_totals.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace demo {
namespace {

void add_counts(summary& to, summary const& from) {
  to.play_requests += from.play_requests;
  to.play_failures += from.play_failures;
  to.tickets_granted += from.tickets_granted;
  to.tickets_fresh += from.tickets_fresh;
  to.tickets_reused += from.tickets_reused;
  to.cache_hits += from.cache_hits;
  to.coalesced += from.coalesced;
  to.prefetch_requested += from.prefetch_requested;
  to.prefetch_shed += from.prefetch_shed;
  to.retries += from.retries;
  to.budget_denied += from.budget_denied;
  to.requests += from.requests;
  to.play_items_sent += from.play_items_sent;
  to.play_429 += from.play_429;
  for (auto const& [reason, n] : from.failures_by_reason) {
    to.failures_by_reason[reason] += n;
  }
  to.duration_s = std::max(to.duration_s, from.duration_s);
}

/// Rates summed per whole second of the run; p50 and p95 of the plays completed in each second.
std::vector<sample> combined_samples(std::vector<client_run> const& runs, simulation_result const& all) {
  std::map<long, sample> by_second;
  for (auto const& r : runs) {
    for (auto const& p : r.sim.samples) {
      auto& s = by_second[std::lround(p.t_s)];
      s.tickets_per_s += p.tickets_per_s;
      s.demand_per_s += p.demand_per_s;
      s.play_sent_per_s += p.play_sent_per_s;
      s.prefetch_sent_per_s += p.prefetch_sent_per_s;
      s.play_429_per_s += p.play_429_per_s;
      s.prefetch_429_per_s += p.prefetch_429_per_s;
    }
  }
  std::map<long, std::vector<double>> latencies;
  for (std::size_t i = 0; i < all.play_latencies_ms.size(); ++i) {
    latencies[static_cast<long>(std::ceil(all.play_done_s[i]))].push_back(all.play_latencies_ms[i]);
  }
  std::vector<sample> out;
  for (auto& [second, s] : by_second) {
    s.t_s = static_cast<double>(second);
    if (auto it = latencies.find(second); it != latencies.end()) {
      s.play_p50_ms = percentile(it->second, 50);
      s.play_p95_ms = percentile(it->second, 95);
    }
    out.push_back(s);
  }
  return out;
}

} // namespace

client_run combine_runs(std::vector<client_run> const& runs, std::uint64_t plan_viewers) {
  if (runs.size() == 1) {
    return runs.front();
  }
  client_run out;
  auto& sim = out.sim;
  sim.started = runs.front().sim.started;
  for (auto const& r : runs) {
    add_counts(sim.totals, r.sim.totals);
    sim.play_latencies_ms.insert(sim.play_latencies_ms.end(), r.sim.play_latencies_ms.begin(),
                                 r.sim.play_latencies_ms.end());
    sim.play_done_s.insert(sim.play_done_s.end(), r.sim.play_done_s.begin(), r.sim.play_done_s.end());
    for (auto const& f : r.sim.failures) {
      if (sim.failures.size() < 20) {
        sim.failures.push_back(f);
      }
    }
    for (auto const& [kind, n] : r.sim.outcomes_by_kind) {
      sim.outcomes_by_kind[kind] += n;
    }
    for (auto const& [reason, n] : r.sim.failures_by_reason) {
      sim.failures_by_reason[reason] += n;
    }
    sim.starts += r.sim.starts;
    out.calls += r.calls;
    out.held_off += r.held_off;
    out.warn_lines += r.warn_lines;
    out.cross_process_reuse += r.cross_process_reuse;
    out.shared_state_fallbacks += r.shared_state_fallbacks;
  }
  auto& t = sim.totals;
  t.viewers = plan_viewers;
  t.play_success_rate = t.play_requests == 0 ? 0
                                             : static_cast<double>(t.play_requests - t.play_failures) /
                                                   static_cast<double>(t.play_requests);
  auto latencies = sim.play_latencies_ms;
  t.p50_ms = percentile(latencies, 50);
  t.p95_ms = percentile(latencies, 95);
  t.p99_ms = percentile(latencies, 99);
  t.max_ms = latencies.empty() ? 0 : latencies.back();
  sim.samples = combined_samples(runs, sim);
  return out;
}

} // namespace demo
