#include "wandura/playback/metrics.hpp"

#include "metric_text.hpp"
#include "playback/metrics_recorder.hpp"

namespace wandura {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  out.append(detail::sample_value(v));
}

void append_counter(std::string& out, std::string_view prefix, std::string_view name, std::string_view help,
                    std::uint64_t value) {
  out.append("# HELP ").append(prefix).append("_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(prefix).append("_").append(name).append(" counter\n");
  out.append(prefix).append("_").append(name).append(" ");
  append_uint(out, value);
  out.push_back('\n');
}

} // namespace

metrics_snapshot detail::playback_metrics::snapshot() const noexcept {
  metrics_snapshot s;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.cache_hits = cache_hits_.load(std::memory_order_relaxed);
  s.coalesced = coalesced_.load(std::memory_order_relaxed);
  s.call_failures = call_failures_.load(std::memory_order_relaxed);
  s.store_errors = store_errors_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    s.outcomes[i] = outcomes_[i].load(std::memory_order_relaxed);
  }
  return s;
}

std::string detail::playback_metrics::to_prometheus(std::string_view prefix) const {
  return wandura::to_prometheus(snapshot(), prefix);
}

std::string to_prometheus(metrics_snapshot const& s, std::string_view prefix) {
  std::string out;
  out.reserve(4096);
  append_counter(out, prefix, "calls_total", "Logical calls started.", s.calls);
  append_counter(out, prefix, "attempts_total", "HTTP attempts sent, retries included.", s.attempts);
  append_counter(out, prefix, "retries_total",
                 "Retries granted: attempts after the first of a call, and retries a call ended before sending.",
                 s.retries);
  append_counter(out, prefix, "budget_denied_total", "Retries refused by the retry budget.", s.budget_denied);
  append_counter(out, prefix, "held_off_total",
                 "Requests sent after queuing at the admission gate behind a counter's limit.", s.held_off);
  append_counter(out, prefix, "cache_hits_total", "Ticket items answered from the ticket store.", s.cache_hits);
  append_counter(out, prefix, "coalesced_total", "Calls that joined an identical call in flight.", s.coalesced);
  append_counter(out, prefix, "call_failures_total", "Calls that ended with an error.", s.call_failures);
  append_counter(out, prefix, "hook_errors_total", "Exceptions thrown by the on_retry hook or the logger, ignored.",
                 s.hook_errors);
  append_counter(out, prefix, "store_errors_total",
                 "Ticket store failures a call went on without (nothing reused, or the tickets left unstored).",
                 s.store_errors);

  out.append("# HELP ").append(prefix).append("_item_outcomes_total Ticket batch items by outcome.\n");
  out.append("# TYPE ").append(prefix).append("_item_outcomes_total counter\n");
  for (auto o : all_item_outcomes) {
    out.append(prefix).append("_item_outcomes_total{outcome=\"").append(to_string(o)).append("\"} ");
    append_uint(out, s.outcome(o));
    out.push_back('\n');
  }

  return out;
}

} // namespace wandura
