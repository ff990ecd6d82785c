#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace demo {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) {
    return "0";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void write_file(std::string const& path, std::string const& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw std::runtime_error("cannot write " + path);
  }
}

// A polyline through (x, y) points already in SVG coordinates.
std::string polyline(std::vector<std::pair<double, double>> const& pts, char const* colour, double width,
                     char const* dash = nullptr) {
  std::ostringstream o;
  o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\"";
  if (dash != nullptr) {
    o << " stroke-dasharray=\"" << dash << "\"";
  }
  o << " points=\"";
  for (auto const& [x, y] : pts) {
    o << number(x) << ',' << number(y) << ' ';
  }
  o << "\"/>\n";
  return o.str();
}

// Rounds up to 1, 2 or 5 times a power of ten, for axis maxima.
double nice_ceiling(double v) {
  if (v <= 0) {
    return 1;
  }
  double const p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) {
      return m * p;
    }
  }
  return 10 * p;
}

/// A panel's box, title, time axis (ticks every 5 s, or 10, 20, 40 s ... so that there are at most 12) and unit.
std::string frame_outline(double left, double top, double width, double height, double x_max, char const* title,
                          char const* unit) {
  auto x = [&](double v) { return left + width * (x_max > 0 ? v / x_max : 0); };
  std::ostringstream o;
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width << "\" height=\"" << height
    << "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  o << "<text x=\"" << left << "\" y=\"" << top - 8 << "\" font-size=\"14\" font-weight=\"bold\">" << title
    << "</text>\n";
  double step = 5;
  while (x_max / step > 12) {
    step *= 2;
  }
  for (int i = 0; i * step <= x_max + 1e-9; ++i) {
    double const v = i * step;
    o << "<text x=\"" << number(x(v)) << "\" y=\"" << top + height + 15 << "\" font-size=\"11\" text-anchor=\"middle\">"
      << number(std::round(v)) << " s</text>\n";
  }
  o << "<text x=\"" << left - 45 << "\" y=\"" << top + height / 2 << "\" font-size=\"11\" transform=\"rotate(-90 "
    << left - 45 << ' ' << top + height / 2 << ")\" text-anchor=\"middle\">" << unit << "</text>\n";
  return o.str();
}

/// One horizontal grid line at `yy` labelled `value`.
std::string grid_line(double left, double width, double yy, double value) {
  std::ostringstream o;
  o << "<line x1=\"" << left << "\" x2=\"" << left + width << "\" y1=\"" << number(yy) << "\" y2=\"" << number(yy)
    << "\" stroke=\"#ddd\"/>\n";
  o << "<text x=\"" << left - 6 << "\" y=\"" << number(yy + 4) << "\" font-size=\"11\" text-anchor=\"end\">"
    << number(value) << "</text>\n";
  return o.str();
}

struct panel {
  double left, top, width, height, x_max, y_max;
  [[nodiscard]] double x(double v) const { return left + width * (x_max > 0 ? v / x_max : 0); }
  [[nodiscard]] double y(double v) const { return top + height * (1 - (y_max > 0 ? std::min(v, y_max) / y_max : 0)); }

  [[nodiscard]] std::string frame(char const* title, char const* unit) const {
    std::string o = frame_outline(left, top, width, height, x_max, title, unit);
    for (int i = 0; i <= 4; ++i) {
      double const v = y_max * i / 4;
      o += grid_line(left, width, y(v), v);
    }
    return o;
  }
};

/// The smallest power of ten >= v (>= 1).
double decade_ceiling(double v) {
  return v <= 1 ? 1 : std::pow(10.0, std::ceil(std::log10(v)));
}

/// A panel whose y axis is logarithmic from `y_min` to `y_max` (both powers of ten), grid lines at each decade.
struct log_panel {
  double left, top, width, height, x_max, y_min, y_max;
  [[nodiscard]] double x(double v) const { return left + width * (x_max > 0 ? v / x_max : 0); }
  [[nodiscard]] double y(double v) const {
    double const lo = std::log10(y_min);
    double const f = (std::log10(std::clamp(v, y_min, y_max)) - lo) / (std::log10(y_max) - lo);
    return top + height * (1 - f);
  }

  [[nodiscard]] std::string frame(char const* title, char const* unit) const {
    std::string o = frame_outline(left, top, width, height, x_max, title, unit);
    for (double v = y_min; v <= y_max * 1.001; v *= 10) {
      o += grid_line(left, width, y(v), v);
    }
    return o;
  }
};

std::string legend(double x, double y, char const* colour, char const* label, char const* dash = nullptr) {
  std::ostringstream o;
  o << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"" << colour
    << "\" stroke-width=\"2\"";
  if (dash != nullptr) {
    o << " stroke-dasharray=\"" << dash << "\"";
  }
  o << "/>\n<text x=\"" << x + 30 << "\" y=\"" << y + 4 << "\" font-size=\"12\">" << label << "</text>\n";
  return o.str();
}

} // namespace

std::string bound_text(summary const& s) {
  if (!s.play_success_bound) {
    return {};
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, " (best possible %.4f)", *s.play_success_bound);
  return buf;
}

void print_overload_lines(summary const& s) {
  if (!s.failures_by_reason.empty()) {
    std::string text;
    for (auto const& [reason, n] : s.failures_by_reason) {
      text += (text.empty() ? "" : ", ") + reason + " " + std::to_string(n);
    }
    std::printf("  %-26s %s\n", "failed plays by reason", text.c_str());
  }
  double const share =
      s.play_items_sent == 0 ? 0.0 : 100.0 * static_cast<double>(s.play_429) / static_cast<double>(s.play_items_sent);
  std::printf("  %-26s %llu sent (every attempt), %llu answered 429 (%.1f %%)\n", "play items",
              static_cast<unsigned long long>(s.play_items_sent), static_cast<unsigned long long>(s.play_429), share);
}

namespace {

std::string reasons_object(std::map<std::string, std::uint64_t> const& by_reason) {
  std::string reasons = "{";
  for (auto const& [reason, n] : by_reason) {
    reasons += (reasons.size() > 1 ? ", \"" : "\"") + reason + "\": " + std::to_string(n);
  }
  return reasons + "}";
}

} // namespace

void write_report_json(std::string const& path, summary const& s, std::vector<sample> const& samples,
                       fleet_summary const* fleet) {
  std::ostringstream o;
  o << "{\n";
  auto field = [&o](char const* name, auto value, bool last = false) {
    o << "  \"" << name << "\": " << value << (last ? "\n" : ",\n");
  };
  field("viewers", s.viewers);
  field("play_requests", s.play_requests);
  field("play_failures", s.play_failures);
  field("play_success_rate", number(s.play_success_rate));
  field("p50_ms", number(s.p50_ms));
  field("p95_ms", number(s.p95_ms));
  field("p99_ms", number(s.p99_ms));
  field("max_ms", number(s.max_ms));
  field("tickets_granted", s.tickets_granted);
  field("tickets_fresh", s.tickets_fresh);
  field("tickets_reused", s.tickets_reused);
  field("cache_hits", s.cache_hits);
  field("coalesced", s.coalesced);
  field("prefetch_requested", s.prefetch_requested);
  field("prefetch_shed", s.prefetch_shed);
  field("retries", s.retries);
  field("budget_denied", s.budget_denied);
  field("requests", s.requests);
  field("held_play", s.held_play);
  field("faults_injected", s.faults_injected);
  if (s.emulator_tickets_counted) {
    field("emulator_tickets_counted", *s.emulator_tickets_counted);
  } else {
    field("emulator_tickets_counted", "null");
  }
  field("warmup_tickets", s.warmup_tickets);
  field("warmup_counted", s.warmup_counted);
  field("warmup_left", number(s.warmup_left));
  field("playback_limit_per_min", number(s.playback_limit_per_min));
  field("duration_s", number(s.duration_s));
  field("play_success_bound", s.play_success_bound ? number(*s.play_success_bound) : std::string("null"));
  field("failures_by_reason", reasons_object(s.failures_by_reason));
  field("play_items_sent", s.play_items_sent);
  field("play_429", s.play_429);
  if (fleet != nullptr) {
    field("processes", fleet->processes);
    field("shared_state", fleet->shared_state.empty() ? std::string("null") : "\"" + fleet->shared_state + "\"");
    field("shared_state_killed_at_s",
          fleet->shared_state_killed_at_s ? number(*fleet->shared_state_killed_at_s) : std::string("null"));
    field("cross_process_reuse", fleet->cross_process_reuse);
    field("shared_state_fallbacks", fleet->shared_state_fallbacks);
    o << "  \"per_process\": [\n";
    for (std::size_t i = 0; i < fleet->per_process.size(); ++i) {
      auto const& p = fleet->per_process[i];
      auto const& q = p.s;
      o << "    {\"process\": " << p.process << ", \"pid\": " << p.pid << ", \"viewers\": " << q.viewers
        << ", \"play_requests\": " << q.play_requests << ", \"play_failures\": " << q.play_failures
        << ", \"play_success_rate\": " << number(q.play_success_rate) << ", \"p50_ms\": " << number(q.p50_ms)
        << ", \"p95_ms\": " << number(q.p95_ms) << ", \"p99_ms\": " << number(q.p99_ms)
        << ", \"max_ms\": " << number(q.max_ms) << ", \"tickets_granted\": " << q.tickets_granted
        << ", \"tickets_fresh\": " << q.tickets_fresh << ", \"tickets_reused\": " << q.tickets_reused
        << ", \"cache_hits\": " << q.cache_hits << ", \"coalesced\": " << q.coalesced
        << ", \"prefetch_requested\": " << q.prefetch_requested << ", \"prefetch_shed\": " << q.prefetch_shed
        << ", \"retries\": " << q.retries << ", \"budget_denied\": " << q.budget_denied
        << ", \"requests\": " << q.requests << ", \"failures_by_reason\": " << reasons_object(q.failures_by_reason)
        << ", \"play_items_sent\": " << q.play_items_sent << ", \"play_429\": " << q.play_429
        << ", \"cross_process_reuse\": " << p.cross_process_reuse
        << ", \"shared_state_fallbacks\": " << p.shared_state_fallbacks << "}"
        << (i + 1 < fleet->per_process.size() ? ",\n" : "\n");
    }
    o << "  ],\n";
  }
  o << "  \"samples\": [\n";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto const& p = samples[i];
    o << "    {\"t_s\": " << number(p.t_s) << ", \"tickets_per_s\": " << number(p.tickets_per_s)
      << ", \"demand_per_s\": " << number(p.demand_per_s) << ", \"play_p50_ms\": " << number(p.play_p50_ms)
      << ", \"play_p95_ms\": " << number(p.play_p95_ms) << ", \"play_sent_per_s\": " << number(p.play_sent_per_s)
      << ", \"prefetch_sent_per_s\": " << number(p.prefetch_sent_per_s)
      << ", \"play_429_per_s\": " << number(p.play_429_per_s)
      << ", \"prefetch_429_per_s\": " << number(p.prefetch_429_per_s) << "}" << (i + 1 < samples.size() ? ",\n" : "\n");
  }
  o << "  ]\n}\n";
  write_file(path, o.str());
}

void write_report_svg(std::string const& path, summary const& s, std::vector<sample> const& samples) {
  double const w = 900;
  double const h = 620;
  double x_max = s.duration_s;
  double rate_max = s.playback_limit_per_min / 60.0;
  double ms_max = 0;
  for (auto const& p : samples) {
    x_max = std::max(x_max, p.t_s);
    rate_max = std::max(
        {rate_max, p.tickets_per_s, p.play_sent_per_s, p.prefetch_sent_per_s, p.play_429_per_s, p.prefetch_429_per_s});
    ms_max = std::max(ms_max, p.play_p95_ms);
  }
  panel const top{80, 60, w - 120, 220, std::ceil(std::max(x_max, 1.0) / 5) * 5, nice_ceiling(rate_max * 1.05)};
  log_panel const bottom{80, 360, w - 120, 200, top.x_max, 1.0, std::max(decade_ceiling(ms_max * 1.1), 100.0)};

  std::vector<std::pair<double, double>> plays, prefetches, granted, play_429, prefetch_429, p50, p95;
  for (auto const& p : samples) {
    plays.emplace_back(top.x(p.t_s), top.y(p.play_sent_per_s));
    prefetches.emplace_back(top.x(p.t_s), top.y(p.prefetch_sent_per_s));
    granted.emplace_back(top.x(p.t_s), top.y(p.tickets_per_s));
    play_429.emplace_back(top.x(p.t_s), top.y(p.play_429_per_s));
    prefetch_429.emplace_back(top.x(p.t_s), top.y(p.prefetch_429_per_s));
    if (p.play_p95_ms > 0) {
      p50.emplace_back(bottom.x(p.t_s), bottom.y(p.play_p50_ms));
      p95.emplace_back(bottom.x(p.t_s), bottom.y(p.play_p95_ms));
    }
  }
  double const limit_y = top.y(s.playback_limit_per_min / 60.0);

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << w / 2
    << "\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">wandura smooth playback: " << s.viewers
    << " viewers, play success " << number(s.play_success_rate * 100) << " %";
  if (s.play_success_bound) {
    o << " (best possible " << number(*s.play_success_bound * 100) << " %)";
  }
  o << ", p95 " << number(std::round(s.p95_ms)) << " ms</text>\n";
  o << top.frame("Ticket items per second (every attempt)", "items/s");
  o << polyline(prefetches, "#f0a030", 1.5);
  o << polyline(plays, "#208040", 1.5);
  o << polyline(granted, "#2060c0", 2);
  o << polyline(prefetch_429, "#e08080", 1, "2 2");
  o << polyline(play_429, "#c00000", 2);
  if (s.playback_limit_per_min > 0) { // unknown against an API whose /v1/config did not answer
    o << "<line x1=\"" << top.left << "\" x2=\"" << top.left + top.width << "\" y1=\"" << number(limit_y) << "\" y2=\""
      << number(limit_y) << "\" stroke=\"#c03030\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
    o << legend(top.left + 620, top.top + 14, "#c03030", "playback limit", "6 4");
  }
  o << legend(top.left + 10, top.top + 14, "#208040", "play items sent");
  o << legend(top.left + 170, top.top + 14, "#f0a030", "prefetch items sent");
  o << legend(top.left + 350, top.top + 14, "#2060c0", "fresh tickets counted by the server");
  o << legend(top.left + 10, top.top + 32, "#c00000", "play items answered 429");
  o << legend(top.left + 220, top.top + 32, "#e08080", "prefetch items answered 429 (shed)", "2 2");
  o << bottom.frame("Play time-to-ticket (log scale)", "ms");
  o << polyline(p50, "#208040", 2);
  o << polyline(p95, "#8040a0", 1.5, "4 3");
  o << legend(bottom.left + 10, bottom.top + 14, "#208040", "p50");
  o << legend(bottom.left + 90, bottom.top + 14, "#8040a0", "p95", "4 3");
  o << "</svg>\n";
  write_file(path, o.str());
}

} // namespace demo
