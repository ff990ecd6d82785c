#include "wandura/prometheus/collector.hpp"

#include <limits>
#include <utility>

namespace wandura {

prometheus_collector::prometheus_collector(std::shared_ptr<http_client_metrics const> metrics)
    : metrics_(std::move(metrics)) {}

std::vector<prometheus::MetricFamily> prometheus_collector::Collect() const {
  return to_prometheus_families(metrics_->collect());
}

std::vector<prometheus::MetricFamily> to_prometheus_families(std::vector<metric_family> const& families) {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families.size());
  for (auto const& f : families) {
    prometheus::MetricFamily family;
    family.name = f.name;
    family.help = f.help;
    family.type = f.histogram ? prometheus::MetricType::Histogram : prometheus::MetricType::Counter;
    for (auto const& s : f.series) {
      prometheus::ClientMetric metric;
      for (auto const& [name, value] : s.labels) {
        metric.label.push_back({name, value});
      }
      if (!f.histogram) {
        metric.counter.value = s.value;
      } else {
        metric.histogram.sample_count = s.count;
        metric.histogram.sample_sum = s.sum;
        for (std::size_t i = 0; i < s.bucket_counts.size(); ++i) {
          double const bound =
              i < http_duration_buckets.size() ? http_duration_buckets[i] : std::numeric_limits<double>::infinity();
          metric.histogram.bucket.push_back({s.bucket_counts[i], bound});
        }
      }
      family.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(family));
  }
  return out;
}

} // namespace wandura
