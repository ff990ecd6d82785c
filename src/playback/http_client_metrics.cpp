#include "wandura/playback/http_client_metrics.hpp"

#include <new>

#include <asio/error.hpp>

#include "metric_text.hpp"
#include "wandura/error.hpp"

namespace wandura {
namespace {

constexpr std::size_t status_rows = 500; // statuses 100..599
constexpr std::size_t errc_limit = 60;   // `errc` values below this are kept by value
constexpr std::size_t aborted_index = 60;
constexpr std::size_t other_index = 61;

std::size_t operation_index(std::string_view operation) noexcept {
  for (std::size_t i = 0; i + 1 < http_client_metrics::operations.size(); ++i) {
    if (http_client_metrics::operations[i] == operation) {
      return i;
    }
  }
  return http_client_metrics::operations.size() - 1;
}

/// 0 success, an `errc` value, `aborted_index` or `other_index`.
std::size_t error_index(std::error_code error) noexcept {
  if (!error) {
    return 0;
  }
  if (error == asio::error::operation_aborted) {
    return aborted_index;
  }
  if (error.category() == error_category() && error.value() > 0 &&
      static_cast<std::size_t>(error.value()) < errc_limit) {
    return static_cast<std::size_t>(error.value());
  }
  return other_index;
}

/// The index of an `error.type` name (as `attempt_error_type` writes it) among `error_index`'s values.
std::size_t error_type_index(std::string_view type) noexcept {
  if (type == "operation_aborted") {
    return aborted_index;
  }
  for (std::size_t i = 1; i < errc_limit; ++i) {
    if (to_string(static_cast<errc>(i)) == type) {
      return i;
    }
  }
  return other_index;
}

std::string error_index_name(std::size_t index) {
  if (index == aborted_index) {
    return "operation_aborted";
  }
  if (index == other_index) {
    return "_OTHER";
  }
  return std::string(to_string(static_cast<errc>(index)));
}

metric_series histogram_series(http_client_metrics::row const& r,
                               std::vector<std::pair<std::string, std::string>> labels) {
  metric_series s;
  s.labels = std::move(labels);
  std::uint64_t cumulative = 0;
  for (auto const& b : r.buckets) {
    cumulative += b.load(std::memory_order_relaxed);
    s.bucket_counts.push_back(cumulative);
  }
  s.count = r.count.load(std::memory_order_relaxed);
  s.sum = static_cast<double>(r.sum_ns.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

std::string label_text(std::vector<std::pair<std::string, std::string>> const& labels, std::string_view le = {}) {
  std::string out;
  for (auto const& [name, value] : labels) {
    out.append(out.empty() ? "{" : ",").append(name).append("=\"").append(value).append("\"");
  }
  if (!le.empty()) {
    out.append(out.empty() ? "{" : ",").append("le=\"").append(le).append("\"");
  }
  return out.empty() ? out : out.append("}");
}

void append_family(std::string& out, metric_family const& f) {
  using detail::sample_value;
  out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
  out.append("# TYPE ").append(f.name).append(f.histogram ? " histogram\n" : " counter\n");
  for (auto const& s : f.series) {
    if (!f.histogram) {
      out.append(f.name).append(label_text(s.labels)).append(" ").append(sample_value(s.value)).append("\n");
      continue;
    }
    for (std::size_t i = 0; i < s.bucket_counts.size(); ++i) {
      auto const le = i < http_duration_buckets.size() ? sample_value(http_duration_buckets[i]) : "+Inf";
      out.append(f.name).append("_bucket").append(label_text(s.labels, le)).append(" ");
      out.append(sample_value(s.bucket_counts[i])).append("\n");
    }
    out.append(f.name).append("_sum").append(label_text(s.labels)).append(" ").append(sample_value(s.sum));
    out.append("\n").append(f.name).append("_count").append(label_text(s.labels)).append(" ");
    out.append(sample_value(s.count)).append("\n");
  }
}

} // namespace

void http_client_metrics::row::observe(std::chrono::nanoseconds duration) noexcept {
  auto const ns = duration.count() < 0 ? std::int64_t{0} : duration.count();
  double const seconds = static_cast<double>(ns) / 1e9;
  std::size_t i = 0;
  while (i < http_duration_buckets.size() && seconds > http_duration_buckets[i]) {
    ++i;
  }
  buckets[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
}

http_client_metrics::http_client_metrics(std::shared_ptr<attempt_observer> tracer) : tracer_(std::move(tracer)) {}

http_client_metrics::~http_client_metrics() {
  for (auto& per_operation : attempts_) {
    for (auto& per_method : per_operation) {
      for (auto& slot : per_method) {
        delete slot.load(std::memory_order_relaxed);
      }
    }
  }
  for (auto& per_operation : calls_) {
    for (auto& slot : per_operation) {
      delete slot.load(std::memory_order_relaxed);
    }
  }
}

http_client_metrics::row* http_client_metrics::row_at(std::atomic<row*>& slot) noexcept {
  row* current = slot.load(std::memory_order_acquire);
  if (current != nullptr) {
    return current;
  }
  auto* fresh = new (std::nothrow) row;
  if (fresh == nullptr) {
    return nullptr; // out of memory: this observation is dropped
  }
  if (slot.compare_exchange_strong(current, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
    return fresh;
  }
  delete fresh; // another thread installed the row first
  return current;
}

void* http_client_metrics::on_attempt_begin(attempt_begin const& attempt) noexcept {
  auto const op = operation_index(attempt.operation);
  auto const resend = attempt.resend_count < 0 ? std::size_t{0} : static_cast<std::size_t>(attempt.resend_count);
  resends_[op][resend < resend_slots ? resend : resend_slots - 1].fetch_add(1, std::memory_order_relaxed);
  return tracer_ ? tracer_->on_attempt_begin(attempt) : nullptr;
}

void http_client_metrics::on_attempt_end(void* context, attempt_begin const& attempt, attempt_end const& end) noexcept {
  auto const op = operation_index(attempt.operation);
  bool const has_status = end.status_code >= 100 && end.status_code < 600;
  std::size_t slot = 0;
  if (has_status && (end.error_type.empty() || end.status_code >= 400)) {
    slot = static_cast<std::size_t>(end.status_code - 100);
  } else {
    slot = status_rows + (end.error_type.empty() ? other_index : error_type_index(end.error_type));
  }
  std::size_t const method = attempt.method == methods[1] ? 1 : 0; // POST, else GET (`http_method` has no other)
  if (auto* r = row_at(attempts_[op][method][slot])) {
    r->observe(end.duration);
  }
  if (tracer_) {
    tracer_->on_attempt_end(context, attempt, end);
  }
}

void http_client_metrics::on_call_end(call_end const& call) noexcept {
  if (auto* r = row_at(calls_[operation_index(call.operation)][error_index(call.error)])) {
    r->observe(call.duration);
  }
  if (tracer_) {
    tracer_->on_call_end(call);
  }
}

std::vector<metric_family> http_client_metrics::collect() const {
  metric_family attempts{"http_client_request_duration_seconds",
                         "Duration of HTTP client requests (one per attempt, retries included).",
                         true,
                         {}};
  metric_family resends{
      "wandura_http_client_attempts_total", "HTTP attempts by how many times the request was resent.", false, {}};
  metric_family calls{"wandura_call_duration_seconds",
                      "Duration of logical calls, retries and waits included, failed calls included.",
                      true,
                      {}};
  for (std::size_t op = 0; op < operations.size(); ++op) {
    std::string const operation(operations[op]);
    for (std::size_t m = 0; m < methods.size(); ++m) {
      for (std::size_t slot = 0; slot < attempt_slots; ++slot) {
        auto const* r = attempts_[op][m][slot].load(std::memory_order_acquire);
        if (r == nullptr) {
          continue;
        }
        std::vector<std::pair<std::string, std::string>> labels{{"wandura_operation", operation},
                                                                {"http_request_method", std::string(methods[m])}};
        if (slot < status_rows) {
          auto const status = std::to_string(slot + 100);
          labels.emplace_back("http_response_status_code", status);
          if (slot + 100 >= 400) {
            labels.emplace_back("error_type", status);
          }
        } else {
          labels.emplace_back("error_type", error_index_name(slot - status_rows));
        }
        attempts.series.push_back(histogram_series(*r, std::move(labels)));
      }
    }
    for (std::size_t n = 0; n < resend_slots; ++n) {
      auto const value = resends_[op][n].load(std::memory_order_relaxed);
      if (value != 0) {
        resends.series.push_back({{{"wandura_operation", operation}, {"http_request_resend_count", std::to_string(n)}},
                                  static_cast<double>(value),
                                  {},
                                  0,
                                  0});
      }
    }
    for (std::size_t slot = 0; slot < call_slots; ++slot) {
      if (auto const* r = calls_[op][slot].load(std::memory_order_acquire)) {
        calls.series.push_back(histogram_series(
            *r, {{"operation", operation}, {"outcome", slot == 0 ? std::string("success") : error_index_name(slot)}}));
      }
    }
  }
  return {std::move(attempts), std::move(resends), std::move(calls)};
}

std::string http_client_metrics::to_prometheus() const {
  return wandura::to_prometheus(collect());
}

std::string to_prometheus(std::vector<metric_family> const& families) {
  std::string out;
  for (auto const& family : families) {
    append_family(out, family);
  }
  return out;
}

} // namespace wandura
