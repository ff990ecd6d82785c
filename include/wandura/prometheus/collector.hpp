// wandura::prometheus: the SDK's telemetry (`wandura::http_client_metrics`) as a prometheus-cpp collectable, for
// programs that already serve a prometheus-cpp `Exposer` or keep a `prometheus::Registry` of their own. Optional:
// the `wandura::prometheus` target is built only when prometheus-cpp (Debian `prometheus-cpp-dev`) is found.
//
//     auto metrics = std::make_shared<wandura::http_client_metrics>();
//     options.retry.observer = metrics;                               // the client records into it
//     auto collector = std::make_shared<wandura::prometheus_collector>(metrics);
//     exposer.RegisterCollectable(collector);                         // next to the program's own registry
//
// A scrape reads the live counters: the series are those of `http_client_metrics::collect()`, by name, labels and
// value, each value handed to prometheus-cpp as read, and so the same as `http_client_metrics::to_prometheus()`
// writes. Its text is exact: counts in every digit, a double as the shortest text that reads back as the same
// double. prometheus-cpp 1.0's serializer writes a double with 16 significant digits: a value that needs 17 (a sum
// of seconds with nanoseconds in it, such as 474855926.29044837) reads back from its text as a nearby double rather
// than the one collected; a value that 16 digits hold reads back the same from both.
//
// Thread safety: `Collect` may run on the exposer's threads while the client records; it reads atomics only.
#pragma once

#include <memory>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "wandura/playback/http_client_metrics.hpp"

namespace wandura {

/// A `prometheus::Collectable` over one `http_client_metrics`.
class prometheus_collector final : public prometheus::Collectable {
public:
  /// @param metrics what to expose; shared, so it outlives every scrape. Must not be null.
  explicit prometheus_collector(std::shared_ptr<http_client_metrics const> metrics);

  /// Every family of `http_client_metrics::collect()` as prometheus-cpp metric families.
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

private:
  std::shared_ptr<http_client_metrics const> metrics_;
};

/// `families` (from `http_client_metrics::collect()`) as prometheus-cpp metric families.
[[nodiscard]] std::vector<prometheus::MetricFamily> to_prometheus_families(std::vector<metric_family> const& families);

} // namespace wandura
