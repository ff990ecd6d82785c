#include "wandura/playback/http_client_metrics.hpp"

#include <memory>
#include <string>
#include <vector>

#include <asio/error.hpp>
#include <catch2/catch.hpp>

#include "wandura/error.hpp"

using namespace std::chrono_literals;

namespace {

/// Remembers what it was told, and hands out its own contexts.
struct recording_tracer final : wandura::attempt_observer {
  std::vector<std::string> events;
  int spans = 0;
  void* on_attempt_begin(wandura::attempt_begin const& a) noexcept override {
    events.push_back("begin " + std::string(a.method) + " " + std::string(a.url_full) + " " +
                     std::string(a.server_address) + " resend=" + std::to_string(a.resend_count));
    return &++spans;
  }
  void on_attempt_end(void* context, wandura::attempt_begin const&, wandura::attempt_end const& e) noexcept override {
    events.push_back("end " + std::to_string(e.status_code) + " " + std::string(e.error_type) +
                     (context == &spans ? " own-context" : " lost-context"));
  }
  void on_call_end(wandura::call_end const& c) noexcept override {
    events.push_back("call " + std::string(c.operation) + " " + (c.error ? c.error.message() : "ok"));
  }
};

/// One attempt of `operation`: begin, then end with `status` / `error` after `took`.
void attempt(wandura::attempt_observer& o, std::string_view operation, wandura::http_method method, int resend,
             int status, std::error_code error, std::chrono::nanoseconds took) {
  wandura::http_request request;
  request.method = method;
  request.url = "http://127.0.0.1:8787/v1/x?k=v";
  auto const begin = wandura::make_attempt_begin(operation, request, resend);
  void* context = o.on_attempt_begin(begin);
  o.on_attempt_end(context, begin, {status, wandura::attempt_error_type(status, error), took});
}

bool has_line(std::string const& text, std::string const& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

TEST_CASE("http client metrics: failed attempts and calls appear under the OpenTelemetry names") {
  wandura::http_client_metrics m;
  attempt(m, "issue_tickets", wandura::http_method::post, 0, 503, {}, 20ms);
  attempt(m, "issue_tickets", wandura::http_method::post, 1, 200, {}, 40ms);
  m.on_call_end({"issue_tickets", {}, 1200ms});
  attempt(m, "get_film", wandura::http_method::get, 0, 0, wandura::errc::connect_failed, 3ms);
  attempt(m, "get_film", wandura::http_method::get, 1, 404, wandura::errc::http_error, 8ms);
  m.on_call_end({"get_film", wandura::errc::http_error, 300ms});
  m.on_call_end({"get_config", asio::error::operation_aborted, 7s});

  auto const text = m.to_prometheus();
  CAPTURE(text);
  CHECK(has_line(text, "# TYPE http_client_request_duration_seconds histogram"));
  CHECK(has_line(text, R"(http_client_request_duration_seconds_bucket{wandura_operation="issue_tickets",)"
                       R"(http_request_method="POST",http_response_status_code="503",error_type="503",le="0.01"} 0)"));
  CHECK(has_line(text, R"(http_client_request_duration_seconds_bucket{wandura_operation="issue_tickets",)"
                       R"(http_request_method="POST",http_response_status_code="503",error_type="503",le="0.025"} 1)"));
  CHECK(has_line(text, R"(http_client_request_duration_seconds_count{wandura_operation="issue_tickets",)"
                       R"(http_request_method="POST",http_response_status_code="200"} 1)"));
  CHECK(has_line(text, R"(http_client_request_duration_seconds_count{wandura_operation="get_film",)"
                       R"(http_request_method="GET",error_type="connect_failed"} 1)"));
  CHECK(has_line(text, R"(wandura_http_client_attempts_total{wandura_operation="get_film",)"
                       R"(http_request_resend_count="1"} 1)"));
  CHECK(
      has_line(text, R"(wandura_call_duration_seconds_bucket{operation="get_film",outcome="http_error",le="0.25"} 0)"));
  CHECK(
      has_line(text, R"(wandura_call_duration_seconds_bucket{operation="get_film",outcome="http_error",le="0.5"} 1)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="http_error"} 0.3)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_bucket{operation="get_config",outcome="operation_aborted",)"
                       R"(le="7.5"} 1)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_count{operation="issue_tickets",outcome="success"} 1)"));
  CHECK(text.find("k=v") == std::string::npos);
}

TEST_CASE("http client metrics: every event reaches the tracer with its own context") {
  auto tracer = std::make_shared<recording_tracer>();
  wandura::http_client_metrics m(tracer);
  attempt(m, "get_config", wandura::http_method::get, 0, 503, {}, 1ms);
  m.on_call_end({"get_config", wandura::errc::http_error, 1ms});
  REQUIRE(tracer->events.size() == 3);
  CHECK(tracer->events[0] == "begin GET http://127.0.0.1:8787/v1/x 127.0.0.1 resend=0");
  CHECK(tracer->events[1] == "end 503 503 own-context");
  CHECK(tracer->events[2].rfind("call get_config ", 0) == 0);
}

TEST_CASE("http client metrics: unknown operations count as other, the tenth retry and later share a row") {
  wandura::http_client_metrics m;
  for (int resend = 0; resend < 13; ++resend) {
    attempt(m, "batch_export", wandura::http_method::get, resend, 200, {}, 1ms);
  }
  auto const families = m.collect();
  REQUIRE(families.size() == 3);
  auto const& resends = families[1];
  REQUIRE(resends.series.size() == 11);
  CHECK(resends.series.back().labels[0].second == "other");
  CHECK(resends.series.back().labels[1].second == "10");
  CHECK(resends.series.back().value == 3);
}

TEST_CASE("http client metrics: one operation's attempts by each method are series of their own") {
  // Two operations the recorder does not know are both "other": a POST of one and a GET of the other each keep
  // their own method.
  wandura::http_client_metrics m;
  attempt(m, "my_custom_op", wandura::http_method::post, 0, 201, {}, 1ms);
  attempt(m, "my_other_op", wandura::http_method::get, 0, 200, {}, 1ms);
  attempt(m, "my_other_op", wandura::http_method::get, 0, 200, {}, 1ms);
  auto const text = m.to_prometheus();
  CHECK(text.find("http_client_request_duration_seconds_count{wandura_operation=\"other\",http_request_method=\"POST\","
                  "http_response_status_code=\"201\"} 1\n") != std::string::npos);
  CHECK(text.find("http_client_request_duration_seconds_count{wandura_operation=\"other\",http_request_method=\"GET\","
                  "http_response_status_code=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("http_request_method=\"GET\",http_response_status_code=\"201\"") == std::string::npos);
}

TEST_CASE("http client metrics: a sum that needs 17 significant digits is written exactly") {
  wandura::http_client_metrics m;
  m.on_call_end({"get_film", {}, std::chrono::nanoseconds{474'855'926'290'448'384}}); // about 15 years
  auto const families = m.collect();
  REQUIRE(families[2].series.at(0).sum == 474855926.29044837);
  auto const text = m.to_prometheus();
  CAPTURE(text);
  CHECK(has_line(text, R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="success"} )"
                       R"(474855926.29044837)"));
}

TEST_CASE("http client metrics: counts past a billion are written in every digit") {
  // A billion observations take too long to record: the families are written as collect() would return them.
  wandura::metric_family attempts{"wandura_http_client_attempts_total", "Attempts.", false, {}};
  wandura::metric_series resent;
  resent.labels = {{"wandura_operation", "get_film"}, {"http_request_resend_count", "0"}};
  resent.value = 1'000'000'007;
  attempts.series.push_back(resent);
  wandura::metric_family calls{"wandura_call_duration_seconds", "Calls.", true, {}};
  wandura::metric_series row;
  row.labels = {{"operation", "get_film"}, {"outcome", "success"}};
  row.bucket_counts.assign(wandura::http_duration_buckets.size(), 0);
  row.bucket_counts.back() = 999'999'999; // le="10"
  row.bucket_counts.push_back(1'000'000'007);
  row.count = 1'000'000'007;
  row.sum = 0.1 + 0.2;
  calls.series.push_back(row);

  auto const text = wandura::to_prometheus({attempts, calls});
  CAPTURE(text);
  CHECK(has_line(text, "# TYPE wandura_http_client_attempts_total counter"));
  CHECK(has_line(text, R"(wandura_http_client_attempts_total{wandura_operation="get_film",)"
                       R"(http_request_resend_count="0"} 1000000007)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_bucket{operation="get_film",outcome="success",le="10"} )"
                       R"(999999999)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_bucket{operation="get_film",outcome="success",le="+Inf"} )"
                       R"(1000000007)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_count{operation="get_film",outcome="success"} 1000000007)"));
  CHECK(has_line(text, R"(wandura_call_duration_seconds_sum{operation="get_film",outcome="success"} )"
                       R"(0.30000000000000004)"));
}
