// Telemetry after the OpenTelemetry HTTP client semantic conventions, kept as lock-free counters and exposed as
// Prometheus text (format 0.0.4) or as plain series for another exporter (`wandura::prometheus`).
//
//     auto metrics = std::make_shared<wandura::http_client_metrics>(my_tracer); // tracer optional
//     options.retry.observer = metrics;
//     wandura::client api(io.get_executor(), options);
//     ... serve metrics->to_prometheus() on /metrics
//
// Series (the OpenTelemetry names, translated to Prometheus as the OpenTelemetry exporters do: dots become
// underscores, the unit is a suffix):
// - `http_client_request_duration_seconds`, one observation per HTTP attempt, labels `wandura_operation`,
//   `http_request_method`, `http_response_status_code` (when a response was read: an attempt whose response the
//   transport gave up on, `response_too_large` or `connection_reset` say, has none, as `error_info::http_status`;
//   nor does a status under 400 reported with an error), `error_type` (when the attempt failed: the status, or the
//   error's short name); buckets 0.005 ... 10 s, the conventions' defaults.
// - `wandura_http_client_attempts_total`, attempts by `wandura_operation` and `http_request_resend_count` (0 for
//   first attempts, 1 for first retries, ...; "10" counts the tenth retry and later ones).
// - `wandura_call_duration_seconds`, one observation per logical call, failed calls included, labels `operation`
//   and `outcome` ("success" or the error's short name), same buckets.
//
// Thread safety: every member function may be called from any thread at once. Recording is relaxed atomic
// increments; the first observation of a new label set allocates its row once (never per request after that).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wandura/resilience/attempt_observer.hpp"

namespace wandura {

/// Upper bounds of the duration histograms in seconds: the OpenTelemetry HTTP conventions' advice, then +Inf.
inline constexpr std::array<double, 14> http_duration_buckets = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                                                 0.5,   0.75, 1.0,   2.5,  5.0,   7.5, 10.0};

/// One series of a metric family, as read at one moment.
struct metric_series {
  std::vector<std::pair<std::string, std::string>> labels; ///< {name, value}, in a fixed order.
  double value = 0;                                        ///< Counters: the count.
  std::vector<std::uint64_t> bucket_counts; ///< Histograms: cumulative counts per `http_duration_buckets`, then +Inf.
  double sum = 0;                           ///< Histograms: total seconds.
  std::uint64_t count = 0;                  ///< Histograms: observations.
};

/// A metric family: a name, its help text, counter or histogram, and its series.
struct metric_family {
  std::string name;
  std::string help;
  bool histogram = false;
  std::vector<metric_series> series;
};

/// Records attempts and calls (fed through `attempt_observer`) and forwards every event to an optional tracer.
class http_client_metrics final : public attempt_observer {
public:
  /// @param tracer receives every event after it is recorded (e.g. a span binding); may be null.
  explicit http_client_metrics(std::shared_ptr<attempt_observer> tracer = nullptr);
  ~http_client_metrics() override;

  void* on_attempt_begin(attempt_begin const& attempt) noexcept override;
  void on_attempt_end(void* context, attempt_begin const& attempt, attempt_end const& end) noexcept override;
  void on_call_end(call_end const& call) noexcept override;

  /// Every family with its series as read now; series never observed are left out.
  [[nodiscard]] std::vector<metric_family> collect() const;
  /// `collect()` in the Prometheus text exposition format 0.0.4: `wandura::to_prometheus(collect())`.
  [[nodiscard]] std::string to_prometheus() const;

  /// The labels known to the recorder: the client's operations; anything else is counted as "other".
  static constexpr std::array<std::string_view, 8> operations = {"issue_tickets",  "start_episode", "get_config",
                                                                 "get_film",       "list_videos",   "get_video",
                                                                 "list_creatives", "other"};
  /// Rows per operation: statuses 100..599, then error kinds without a usable status (`errc` values, cancellation,
  /// other).
  static constexpr std::size_t attempt_slots = 564;
  /// Rows per operation of the call histogram: success, `errc` values, cancellation, other.
  static constexpr std::size_t call_slots = 64;
  /// `http_request_resend_count` values kept apart; the last one also counts every later retry.
  static constexpr std::size_t resend_slots = 11;

  /// One histogram row (not public API; public for the recorder's own helpers).
  struct row {
    std::array<std::atomic<std::uint64_t>, http_duration_buckets.size() + 1> buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_ns{0};
    void observe(std::chrono::nanoseconds duration) noexcept;
  };

private:
  row* row_at(std::atomic<row*>& slot) noexcept;

  std::shared_ptr<attempt_observer> tracer_;
  /// The methods an attempt's rows are kept apart by (`http_request_method`): `http_method`'s, GET and POST.
  static constexpr std::array<std::string_view, 2> methods = {"GET", "POST"};
  /// Rows by operation, then method, then status or error kind: one operation's attempts (above all "other"'s,
  /// which gathers every operation the recorder does not know) may be sent with either method.
  std::array<std::array<std::array<std::atomic<row*>, attempt_slots>, methods.size()>, operations.size()> attempts_{};
  std::array<std::array<std::atomic<row*>, call_slots>, operations.size()> calls_{};
  std::array<std::array<std::atomic<std::uint64_t>, resend_slots>, operations.size()> resends_{};
};

/// `families` (from `http_client_metrics::collect()`, all or some of them) in the Prometheus text exposition format
/// 0.0.4: for each family a `# HELP` and a `# TYPE` line, then its samples; a histogram's buckets are bounded by
/// `http_duration_buckets`, then `+Inf`. Values are written exactly, so that a scrape reads what `collect()` read:
/// counts in decimal digits (1000000007, not `1.00000001e+09`), sums as the shortest text that reads back as the same
/// double (up to 17 significant digits).
[[nodiscard]] std::string to_prometheus(std::vector<metric_family> const& families);

} // namespace wandura
