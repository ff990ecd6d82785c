#include "wandura/playback/metrics.hpp"

#include <bit>
#include <cstdio>

#include "playback/metrics_recorder.hpp"

namespace wandura {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  out.append(std::to_string(v));
}

void append_counter(std::string& out, std::string_view prefix, std::string_view name, std::string_view help,
                    std::uint64_t value) {
  out.append("# HELP ").append(prefix).append("_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(prefix).append("_").append(name).append(" counter\n");
  out.append(prefix).append("_").append(name).append(" ");
  append_uint(out, value);
  out.push_back('\n');
}

/// Seconds with up to 6 decimals, trailing zeros trimmed: 0.001, 32.768, 0.000123.
std::string seconds_text(std::int64_t microseconds) {
  char buf[40];
  int const n = std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(microseconds / 1'000'000),
                              static_cast<long long>(microseconds % 1'000'000));
  std::string text(buf, static_cast<std::size_t>(n > 0 ? n : 0));
  while (!text.empty() && text.back() == '0') {
    text.pop_back();
  }
  if (!text.empty() && text.back() == '.') {
    text.pop_back();
  }
  return text;
}

} // namespace

void detail::playback_metrics::observe_latency(std::chrono::nanoseconds latency) noexcept {
  // Microseconds, rounded up; negative counts as 0 and the sum cannot overflow for any real latency.
  auto const us =
      latency.count() <= 0 ? std::int64_t{0} : latency.count() / 1000 + (latency.count() % 1000 != 0 ? 1 : 0);
  auto const ms_ceil = static_cast<std::uint64_t>((us + 999) / 1000);
  std::size_t index = ms_ceil <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(ms_ceil - 1));
  if (index > latency_bucket_count) {
    index = latency_bucket_count; // +Inf
  }
  latency_buckets_[index].fetch_add(1, std::memory_order_relaxed);
  latency_sum_us_.fetch_add(static_cast<std::uint64_t>(us), std::memory_order_relaxed);
  latency_count_.fetch_add(1, std::memory_order_relaxed);
}

metrics_snapshot detail::playback_metrics::snapshot() const noexcept {
  metrics_snapshot s;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.cache_hits = cache_hits_.load(std::memory_order_relaxed);
  s.coalesced = coalesced_.load(std::memory_order_relaxed);
  s.call_failures = call_failures_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    s.outcomes[i] = outcomes_[i].load(std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < latency_buckets_.size(); ++i) {
    s.latency_buckets[i] = latency_buckets_[i].load(std::memory_order_relaxed);
  }
  s.latency_count = latency_count_.load(std::memory_order_relaxed);
  s.latency_sum = std::chrono::microseconds(static_cast<std::int64_t>(latency_sum_us_.load(std::memory_order_relaxed)));
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
  append_counter(out, prefix, "retries_total", "Attempts after the first of a call.", s.retries);
  append_counter(out, prefix, "budget_denied_total", "Retries refused by the retry budget.", s.budget_denied);
  append_counter(out, prefix, "held_off_total",
                 "Requests sent after queuing at the admission gate behind a counter's limit.", s.held_off);
  append_counter(out, prefix, "cache_hits_total", "Ticket items answered from the ticket store.", s.cache_hits);
  append_counter(out, prefix, "coalesced_total", "Calls that joined an identical call in flight.", s.coalesced);
  append_counter(out, prefix, "call_failures_total", "Calls that ended with an error.", s.call_failures);
  append_counter(out, prefix, "hook_errors_total", "Exceptions thrown by the on_retry hook or the logger, ignored.",
                 s.hook_errors);

  out.append("# HELP ").append(prefix).append("_item_outcomes_total Ticket batch items by outcome.\n");
  out.append("# TYPE ").append(prefix).append("_item_outcomes_total counter\n");
  for (auto o : all_item_outcomes) {
    out.append(prefix).append("_item_outcomes_total{outcome=\"").append(to_string(o)).append("\"} ");
    append_uint(out, s.outcome(o));
    out.push_back('\n');
  }

  std::string const name = std::string(prefix) + "_request_duration_seconds";
  out.append("# HELP ").append(name).append(" Latency of calls, retries and waits included.\n");
  out.append("# TYPE ").append(name).append(" histogram\n");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_bucket_count; ++i) {
    cumulative += s.latency_buckets[i];
    out.append(name).append("_bucket{le=\"").append(seconds_text(latency_bucket_bound(i).count())).append("\"} ");
    append_uint(out, cumulative);
    out.push_back('\n');
  }
  cumulative += s.latency_buckets[latency_bucket_count];
  out.append(name).append("_bucket{le=\"+Inf\"} ");
  append_uint(out, cumulative);
  out.push_back('\n');
  out.append(name).append("_sum ").append(seconds_text(s.latency_sum.count())).push_back('\n');
  out.append(name).append("_count ");
  append_uint(out, s.latency_count);
  out.push_back('\n');
  return out;
}

} // namespace wandura
