#include "playback/observed_call.hpp"

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/playback/http_client_metrics.hpp"
#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono_literals;

TEST_CASE("observed call: a failed call is recorded with its code as outcome, a succeeded one as success, an "
          "abandoned one as operation_aborted") {
  wandura::testing::manual_clock clock;
  wandura::http_client_metrics metrics;
  {
    wandura::detail::observed_call observed(&metrics, "get_film", clock);
    clock.advance(300ms);
    observed.fail(std::make_exception_ptr(wandura::error(wandura::errc::http_error, "get_film: HTTP 404")));
  }
  {
    wandura::detail::observed_call observed(&metrics, "get_config", clock);
    clock.advance(20ms);
    observed.succeeded();
  }
  {
    wandura::detail::observed_call observed(&metrics, "get_video", clock); // its coroutine destroyed mid-call
  }
  auto const text = metrics.to_prometheus();
  CAPTURE(text);
  CHECK(text.find("wandura_call_duration_seconds_bucket{operation=\"get_film\",outcome=\"http_error\",le=\"0.5\"} 1") !=
        std::string::npos);
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"get_config\",outcome=\"success\"} 1") !=
        std::string::npos);
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"get_video\",outcome=\"success\"}") ==
        std::string::npos);
  CHECK(text.find("wandura_call_duration_seconds_count{operation=\"get_video\",outcome=\"operation_aborted\"} 1") !=
        std::string::npos);
  wandura::detail::observed_call unobserved(nullptr, "get_config", clock);
}
