#include "wandura/prometheus/collector.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <asio/error.hpp>
#include <catch2/catch.hpp>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "wandura/error.hpp"

using namespace std::chrono_literals;

namespace {

/// Samples of a text exposition: "name{labels}" -> value, with `le` bounds written the same way on both sides.
std::map<std::string, double> samples(std::string const& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto const space = line.rfind(' ');
    std::string key = line.substr(0, space);
    if (auto const le = key.find("le=\""); le != std::string::npos) {
      auto const end = key.find('"', le + 4);
      auto const bound = key.substr(le + 4, end - le - 4);
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.9g", bound == "+Inf" ? 1e300 : std::strtod(bound.c_str(), nullptr));
      key = key.substr(0, le + 4) + buf + key.substr(end);
    }
    out[key] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

void attempt(wandura::attempt_observer& o, std::string_view operation, int resend, int status, std::error_code error,
             std::chrono::nanoseconds took) {
  wandura::http_request request;
  request.method = operation == "issue_tickets" ? wandura::http_method::post : wandura::http_method::get;
  request.url = "http://127.0.0.1:8787/v1/x";
  auto const begin = wandura::make_attempt_begin(operation, request, resend);
  void* context = o.on_attempt_begin(begin);
  o.on_attempt_end(context, begin, {status, wandura::attempt_error_type(status, error), took});
}

} // namespace

TEST_CASE("prometheus: a scrape through prometheus-cpp's serializer matches metrics text, failures included") {
  auto metrics = std::make_shared<wandura::http_client_metrics>();
  attempt(*metrics, "issue_tickets", 0, 503, {}, 30ms);
  attempt(*metrics, "issue_tickets", 1, 200, {}, 80ms);
  metrics->on_call_end({"issue_tickets", {}, 1100ms});
  attempt(*metrics, "get_film", 0, 0, wandura::errc::connect_failed, 2ms);
  attempt(*metrics, "get_film", 1, 404, wandura::errc::http_error, 9ms);
  metrics->on_call_end({"get_film", wandura::errc::http_error, 400ms});
  metrics->on_call_end({"get_config", asio::error::operation_aborted, 12s});
  metrics->on_call_end({"list_videos", {}, std::chrono::nanoseconds{474'855'926'290'448'000}}); // 474855926.290448 s

  auto collector = std::make_shared<wandura::prometheus_collector>(metrics);
  prometheus::TextSerializer serializer;
  auto const scraped = serializer.Serialize(collector->Collect());
  auto const ours = metrics->to_prometheus();
  CAPTURE(scraped, ours);
  auto const a = samples(scraped);
  auto const b = samples(ours);
  CHECK(a.size() == b.size());
  CHECK(a == b);
  CHECK(b.count(R"(wandura_call_duration_seconds_count{operation="get_film",outcome="http_error"})") == 1);
  CHECK(b.count(R"(http_client_request_duration_seconds_count{wandura_operation="get_film",)"
                R"(http_request_method="GET",error_type="connect_failed"})") == 1);

  // The collectable sits next to a program's own registry in one scrape.
  prometheus::Registry registry;
  auto families = registry.Collect();
  auto ours_families = collector->Collect();
  families.insert(families.end(), ours_families.begin(), ours_families.end());
  CHECK(samples(serializer.Serialize(families)) == b);
}

TEST_CASE("prometheus: counts past a billion and long sums are the same in a scrape and in metrics text") {
  // A billion observations take too long to record: the families are written as collect() would return them.
  wandura::metric_family attempts{"wandura_http_client_attempts_total", "Attempts.", false, {}};
  wandura::metric_series resent;
  resent.labels = {{"wandura_operation", "get_film"}, {"http_request_resend_count", "0"}};
  resent.value = 1'000'000'007;
  attempts.series.push_back(resent);
  wandura::metric_family calls{"wandura_call_duration_seconds", "Calls.", true, {}};
  wandura::metric_series row;
  row.labels = {{"operation", "get_film"}, {"outcome", "success"}};
  row.bucket_counts.assign(wandura::http_duration_buckets.size(), 999'999'999);
  row.bucket_counts.push_back(1'000'000'007);
  row.count = 1'000'000'007;
  row.sum = 474855926.290448;
  calls.series.push_back(row);
  row.labels = {{"operation", "get_film"}, {"outcome", "http_error"}};
  row.sum = 474855926.29044837; // 17 significant digits
  calls.series.push_back(row);

  auto const families = wandura::to_prometheus_families({attempts, calls});
  auto const ours = wandura::to_prometheus({attempts, calls});
  auto const scraped = prometheus::TextSerializer().Serialize(families);
  CAPTURE(scraped, ours);
  auto b = samples(ours);
  CHECK(b.at(R"(wandura_http_client_attempts_total{wandura_operation="get_film",http_request_resend_count="0"})") ==
        1'000'000'007);
  CHECK(b.at(R"(wandura_call_duration_seconds_count{operation="get_film",outcome="success"})") == 1'000'000'007);
  CHECK(b.at(R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="success"})") == 474855926.290448);

  // The values handed to prometheus-cpp are collect()'s, each read back from the text to the last bit. Its
  // serializer (1.0.1) writes 16 significant digits, so it is compared where 16 are enough.
  CHECK(families.at(1).metric.at(1).histogram.sample_sum ==
        b.at(R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="http_error"})"));
  auto a = samples(scraped);
  a.erase(R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="http_error"})");
  b.erase(R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="http_error"})");
  CHECK(a == b);
}
