// Binding the SDK's per-attempt hook to a tracer (docs/testing.md, "Telemetry"): one client span per HTTP attempt
// with the OpenTelemetry HTTP client attribute names, and the metrics recorder in front of it.
//
// `toy_tracer` stands in for the tracer a program already runs (an OpenTelemetry SDK, a vendor agent): it keeps
// ended spans in memory. Only `span_binding` is what a program writes. The program feeds one failed and one
// successful attempt through the recorder as the retry engine does, and checks the spans and the metrics.
// Exit status 0 when every check holds, 1 otherwise.
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <wandura/playback/http_client_metrics.hpp>
#include <wandura/resilience/attempt_observer.hpp>

namespace {

/// A stand-in tracer: spans with string attributes, kept once ended.
struct toy_span {
  std::string name;
  std::map<std::string, std::string> attributes;
  bool error = false;
};
class toy_tracer {
public:
  toy_span* start(std::string name) { return new toy_span{std::move(name), {}, false}; }
  void end(toy_span* span) {
    std::lock_guard lock(mutex_);
    ended_.emplace_back(span);
  }
  std::vector<std::unique_ptr<toy_span>> const& ended() const { return ended_; }

private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<toy_span>> ended_;
};

/// The binding: a span per attempt, named after the method as the conventions advise.
class span_binding final : public wandura::attempt_observer {
public:
  explicit span_binding(toy_tracer& tracer) : tracer_(tracer) {}

  void* on_attempt_begin(wandura::attempt_begin const& a) noexcept override {
    auto* span = tracer_.start(std::string(a.method));
    span->attributes["http.request.method"] = a.method;
    span->attributes["url.full"] = a.url_full;
    span->attributes["server.address"] = a.server_address;
    span->attributes["server.port"] = std::to_string(a.server_port);
    span->attributes["http.request.resend_count"] = std::to_string(a.resend_count);
    return span;
  }
  void on_attempt_end(void* context, wandura::attempt_begin const&, wandura::attempt_end const& e) noexcept override {
    auto* span = static_cast<toy_span*>(context);
    if (e.status_code != 0) {
      span->attributes["http.response.status_code"] = std::to_string(e.status_code);
    }
    if (!e.error_type.empty()) {
      span->attributes["error.type"] = e.error_type;
      span->error = true;
    }
    tracer_.end(span);
  }

private:
  toy_tracer& tracer_;
};

bool check(bool ok, char const* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

/// One attempt as the retry engine reports it.
void attempt(wandura::attempt_observer& o, int resend, int status) {
  wandura::http_request request;
  request.url = "https://api.wandura.example/v1/config";
  auto const begin = wandura::make_attempt_begin("get_config", request, resend);
  void* span = o.on_attempt_begin(begin);
  o.on_attempt_end(span, begin, {status, wandura::attempt_error_type(status, {}), std::chrono::milliseconds(40)});
}

} // namespace

int main() {
  toy_tracer tracer;
  // In a program: options.retry.observer = metrics; the client's retry engine then calls it for every attempt.
  auto metrics = std::make_shared<wandura::http_client_metrics>(std::make_shared<span_binding>(tracer));
  attempt(*metrics, 0, 503);
  attempt(*metrics, 1, 200);

  bool ok = check(tracer.ended().size() == 2, "one span per attempt");
  if (tracer.ended().size() == 2) {
    auto const& first = *tracer.ended()[0];
    auto const& second = *tracer.ended()[1];
    ok &= check(first.name == "GET" && first.attributes.at("url.full") == "https://api.wandura.example/v1/config",
                "span named after the method, url.full set");
    ok &= check(first.error && first.attributes.at("error.type") == "503", "the 503 attempt is an error span");
    ok &= check(!second.error && second.attributes.at("http.request.resend_count") == "1",
                "the retry carries http.request.resend_count 1");
  }
  auto const text = metrics->to_prometheus();
  ok &= check(text.find(R"(http_client_request_duration_seconds_count{wandura_operation="get_config",)"
                        R"(http_request_method="GET",http_response_status_code="503",error_type="503"} 1)") !=
                  std::string::npos,
              "the failed attempt is in http_client_request_duration_seconds");
  return ok ? 0 : 1;
}
