#include "run_report.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "play_plan.hpp"

namespace demo {
namespace {

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.1f ms" : "%.0f ms", ms);
  return buf;
}

unsigned long long u(std::uint64_t v) {
  return static_cast<unsigned long long>(v);
}

void print_summary(summary const& s, client_run const& r, bool in_process, std::string const& target,
                   std::string const& json_path, std::string const& svg_path) {
  std::printf("\nsummary (%s)\n", target.c_str());
  std::printf("  %-26s %llu over %.0f s\n", "viewers", u(s.viewers), s.duration_s);
  std::printf("  %-26s %llu, failed %llu, success rate %.4f%s\n", "plays (start_episode)", u(s.play_requests),
              u(s.play_failures), s.play_success_rate, bound_text(s).c_str());
  print_overload_lines(s);
  std::printf("  %-26s p50 %s  p95 %s  p99 %s  max %s\n", "play time-to-ticket", format_ms(s.p50_ms).c_str(),
              format_ms(s.p95_ms).c_str(), format_ms(s.p99_ms).c_str(), format_ms(s.max_ms).c_str());
  std::printf("  %-26s %llu: fresh %llu, reused %llu (client cache hits %llu, calls joined in flight %llu)\n",
              "tickets granted", u(s.tickets_granted), u(s.tickets_fresh), u(s.tickets_reused), u(s.cache_hits),
              u(s.coalesced));
  std::printf("  %-26s asked %llu, shed by the server %llu (not an error)\n", "prefetch", u(s.prefetch_requested),
              u(s.prefetch_shed));
  std::printf("  %-26s %llu (WARN lines %llu), budget denied %llu, waited for a 429 hold-off %llu\n", "retries",
              u(s.retries), u(r.warn_lines), u(s.budget_denied), u(r.held_off));
  std::printf("  %-26s %llu calls, %llu HTTP attempts (items all from the cache need none)\n", "issue_tickets",
              u(r.calls), u(s.requests));
  if (s.emulator_tickets_counted) {
    std::printf("  %-26s %llu tickets counted; fresh tickets received %llu: %s\n", "emulator",
                u(*s.emulator_tickets_counted), u(s.tickets_fresh),
                *s.emulator_tickets_counted == s.tickets_fresh ? "equal, nothing counted twice" : "MISMATCH");
  }
  if (in_process) {
    std::printf("  %-26s %llu plays held until room returned, %llu requests answered by the scripted 503\n", "",
                u(s.held_play), u(s.faults_injected));
  }
  if (s.warmup_tickets > 0) {
    std::printf("  %-26s %llu tickets before the first viewer (counter left at %.0f %% of %.0f/min)\n", "warm-up",
                u(s.warmup_tickets), s.warmup_left * 100, s.playback_limit_per_min);
  }
  std::printf("  %-26s", "outcomes");
  bool first = true;
  for (auto const& [kind, n] : r.sim.outcomes_by_kind) {
    std::printf("%s%s %llu", first ? " " : ", ", kind.c_str(), u(n));
    first = false;
  }
  std::printf("\n  %-26s %s, %s\n", "report", json_path.c_str(), svg_path.c_str());
  for (auto const& f : r.sim.failures) {
    std::printf("  FAILED play: viewer %u %s episode %d: %s\n", f.viewer, f.film_ref.c_str(), f.episode_no,
                f.what.c_str());
  }
  if (s.play_failures > r.sim.failures.size()) {
    std::printf("  ... and %llu more failed plays\n", u(s.play_failures - r.sim.failures.size()));
  }
}

/// The fleet's lines under the summary table: shared state, then one line per process.
void print_fleet(fleet_summary const& f) {
  std::printf("  %-26s %u processes, shared state %s%s\n", "fleet", f.processes,
              f.shared_state.empty() ? "none" : f.shared_state.c_str(),
              f.shared_state_killed_at_s ? (" (killed " + std::to_string(std::lround(*f.shared_state_killed_at_s)) +
                                            " s after the first viewer)")
                                               .c_str()
                                         : "");
  std::printf("  %-26s %llu tickets reused that another process had issued, %llu shared-state fallbacks\n", "",
              u(f.cross_process_reuse), u(f.shared_state_fallbacks));
  for (auto const& p : f.per_process) {
    auto const& s = p.s;
    double const share =
        s.play_items_sent == 0 ? 0.0 : 100.0 * static_cast<double>(s.play_429) / static_cast<double>(s.play_items_sent);
    std::printf("  process %-2u pid %-8lld plays %llu, failed %llu (%.4f), p99 %s, fresh %llu, reused %llu, play 429 "
                "%llu/%llu (%.1f %%), retries %llu, cross-process reuse %llu, fallbacks %llu\n",
                p.process, static_cast<long long>(p.pid), u(s.play_requests), u(s.play_failures), s.play_success_rate,
                format_ms(s.p99_ms).c_str(), u(s.tickets_fresh), u(s.tickets_reused), u(s.play_429),
                u(s.play_items_sent), share, u(s.retries), u(p.cross_process_reuse), u(p.shared_state_fallbacks));
  }
}

} // namespace

void print_run_header(demo_options const& o, run_plan const& plan, std::optional<std::string> const& emulator_url) {
  std::printf("smooth_playback: %u viewers over %.0f s, %zu films, %zu steps; peak demand %.0f tickets/s (plays "
              "%.0f/s)\n",
              o.viewers, o.duration_s, plan.plan.catalogue.size(), plan.plan.steps, plan.peak_demand,
              plan.demand.peak_plays_per_s(3));
  if (emulator_url) {
    std::string const faults_text = o.unavailable > 0 ? ", ~1 in " + std::to_string(std::lround(1 / o.unavailable)) +
                                                            " ticket requests answered 503 (could not issue in time)"
                                                      : std::string();
    std::printf("emulator: %s, playback limit %u tickets/min (%.0f/s), warm-up to %.0f %% left%s\n",
                emulator_url->c_str(), plan.limit, plan.limit / 60.0, plan.warmup_left * 100, faults_text.c_str());
  } else {
    std::printf("target: %s\n", o.base_url.value_or("").c_str());
  }
  std::fflush(stdout);
}

int finish_run(demo_options const& o, run_plan const& plan, client_run const& total, server_side server,
               fleet_summary const* fleet, std::chrono::milliseconds play_deadline) {
  bool const in_process = server.emulator != nullptr;
  summary s = total.sim.totals;
  s.warmup_tickets = server.warmup_tickets;
  s.warmup_left = server.warmup_left;
  s.warmup_counted = server.counted_before;
  s.playback_limit_per_min = server.playback_limit_per_min;
  s.emulator_tickets_counted = server.external_counted;
  auto const plays = plan_of_run(plan.plan, s.playback_limit_per_min, in_process, server.counted_before,
                                 total.sim.started - server.emulator_started, play_deadline);
  if (in_process) {
    s.play_success_bound = play_success_bound(plays);
  }
  if (o.plan_out) {
    write_play_plan(*o.plan_out, plays);
  }
  bool counts_match = !s.emulator_tickets_counted || *s.emulator_tickets_counted == s.tickets_fresh;
  if (in_process) {
    auto const st = server.emulator->stats();
    s.emulator_tickets_counted = st.tickets_counted - server.counted_before;
    s.held_play = st.held_play - server.held_before;
    s.faults_injected = st.faults_injected;
    counts_match = *s.emulator_tickets_counted == s.tickets_fresh && s.warmup_counted == s.warmup_tickets;
    server.emulator->stop();
  }

  auto const json_path = (std::filesystem::path(o.report_dir) / "report.json").string();
  auto const svg_path = (std::filesystem::path(o.report_dir) / "report.svg").string();
  write_report_json(json_path, s, total.sim.samples, fleet);
  write_report_svg(svg_path, s, total.sim.samples);
  print_summary(s, total, in_process, server.target, json_path, svg_path);
  if (fleet != nullptr) {
    print_fleet(*fleet);
  }

  if (!counts_match) {
    std::printf("FAILED: the emulator counted %llu tickets (warm-up %llu) but the demo received %llu fresh (warm-up "
                "%llu)\n",
                u(s.emulator_tickets_counted.value_or(0)), u(s.warmup_counted), u(s.tickets_fresh),
                u(s.warmup_tickets));
    return 1;
  }
  if (s.play_failures > 0) {
    std::printf("FAILED: %llu of %llu plays would have shown the viewer an error\n", u(s.play_failures),
                u(s.play_requests));
    return 1;
  }
  std::printf("OK: every play was granted\n");
  return 0;
}

} // namespace demo
