// The admission gate's statistics as Prometheus text (exposition format 0.0.4), one family per figure with a
// `counter` label, so that a client appends them to its own `metrics_text()`. Values are written exactly
// (`detail::sample_value`).
#include "admission_gate_metrics.hpp"

#include <string>

#include "metric_text.hpp"

namespace wandura {
namespace {

using detail::sample_value;

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP wandura_gate_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE wandura_gate_").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels, std::string const& value) {
  out.append("wandura_gate_").append(name).append("{").append(labels).append("} ").append(value).append("\n");
}

std::string counter_label(admission_counter_stats const& s) {
  return "counter=\"" + s.counter + "\"";
}

} // namespace

std::string admission_gate::metrics_text() const {
  return detail::admission_gate_metrics_text(stats());
}

std::string detail::admission_gate_metrics_text(std::vector<admission_counter_stats> const& all) {
  std::string out;
  header(out, "congested", "gauge", "1 while the counter is paced after a 429 or a shed prefetch.");
  for (auto const& s : all) {
    sample(out, "congested", counter_label(s), s.congested ? "1" : "0");
  }
  header(out, "queue_length", "gauge", "Requests waiting at the gate.");
  for (auto const& s : all) {
    sample(out, "queue_length", counter_label(s) + ",class=\"play\"", sample_value(s.queued_play));
    sample(out, "queue_length", counter_label(s) + ",class=\"prefetch\"", sample_value(s.queued_prefetch));
  }
  header(out, "pacing_rate", "gauge", "Units per second released while congested.");
  for (auto const& s : all) {
    sample(out, "pacing_rate", counter_label(s), sample_value(s.pacing_rate));
  }
  header(out, "released_per_second", "gauge", "Requests released in the last whole second while congested.");
  for (auto const& s : all) {
    sample(out, "released_per_second", counter_label(s), sample_value(s.released_last_second));
  }
  header(out, "outcomes_total", "counter", "Requests decided while congested, by outcome.");
  for (auto const& s : all) {
    auto const l = counter_label(s);
    sample(out, "outcomes_total", l + ",outcome=\"admitted\"", sample_value(s.released));
    sample(out, "outcomes_total", l + ",outcome=\"shed\"", sample_value(s.shed));
    sample(out, "outcomes_total", l + ",outcome=\"deadline_exceeded\"", sample_value(s.deadline_exceeded));
    sample(out, "outcomes_total", l + ",outcome=\"cancelled\"", sample_value(s.cancelled));
  }
  header(out, "decreases_total", "counter", "Pacing rate cuts after a 429 while pacing.");
  for (auto const& s : all) {
    sample(out, "decreases_total", counter_label(s), sample_value(s.decreases));
  }
  header(out, "fleet_total", "counter",
         "Fleet-wide grants asked for through the shared pace, by outcome (none without a shared pace).");
  for (auto const& s : all) {
    auto const l = counter_label(s);
    sample(out, "fleet_total", l + ",outcome=\"granted\"", sample_value(s.fleet_grants));
    sample(out, "fleet_total", l + ",outcome=\"wait\"", sample_value(s.fleet_waits));
    sample(out, "fleet_total", l + ",outcome=\"failed\"", sample_value(s.fleet_failures));
  }
  header(out, "fleet_congestions_total", "counter", "Times another process's 429 or hold congested the counter here.");
  for (auto const& s : all) {
    sample(out, "fleet_congestions_total", counter_label(s), sample_value(s.fleet_congestions));
  }
  header(out, "wait_seconds", "histogram", "Time requests spent queued at the gate.");
  for (auto const& s : all) {
    auto const l = counter_label(s);
    for (std::size_t i = 0; i < wait_buckets_s.size(); ++i) {
      sample(out, "wait_seconds_bucket", l + ",le=\"" + sample_value(wait_buckets_s[i]) + "\"",
             sample_value(s.wait_buckets[i]));
    }
    sample(out, "wait_seconds_bucket", l + ",le=\"+Inf\"", sample_value(s.wait_count));
    sample(out, "wait_seconds_sum", l, sample_value(s.wait_sum_s));
    sample(out, "wait_seconds_count", l, sample_value(s.wait_count));
  }
  return out;
}

} // namespace wandura
