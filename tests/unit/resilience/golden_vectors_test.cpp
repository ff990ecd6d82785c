// The golden vectors computed from the seeds' reference semantics (tests/vectors/README.md). The directory is the
// one named by WANDURA_VECTORS_DIR, else the project's own copy, so any vector file of the same shape can be
// swapped in without rebuilding.
#include "wandura/resilience/retry_policy.hpp"

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/error.hpp"
#include "wandura/resilience/classify.hpp"
#include "wandura/resilience/retry_budget.hpp"

namespace {

std::string vectors_path(char const* file) {
  char const* dir = std::getenv("WANDURA_VECTORS_DIR");
  std::string path = (dir != nullptr && *dir != '\0') ? dir : WANDURA_TEST_VECTORS_DIR;
  return path + "/" + file;
}

/// The parsed golden file; the parser must outlive the element.
struct golden {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  golden() {
    auto const path = vectors_path("retry-golden.json");
    INFO("vectors file: " << path);
    REQUIRE(parser.load(path).get(root) == simdjson::SUCCESS);
  }
  simdjson::dom::array list(char const* key) {
    simdjson::dom::array out;
    REQUIRE(root[key].get_array().get(out) == simdjson::SUCCESS);
    REQUIRE(out.size() > 0);
    return out;
  }
};

double number(simdjson::dom::element e) {
  double d = 0;
  if (e.get_double().get(d) == simdjson::SUCCESS) {
    return d;
  }
  std::int64_t i = 0;
  REQUIRE(e.get_int64().get(i) == simdjson::SUCCESS);
  return static_cast<double>(i);
}

wandura::retry_policy policy_named(std::string_view name) {
  if (name == "INTERACTIVE") {
    return wandura::retry_policy::interactive();
  }
  if (name == "BACKGROUND") {
    return wandura::retry_policy::background();
  }
  if (name == "STANDARD") {
    return wandura::retry_policy::standard();
  }
  FAIL("unknown policy in vectors: " << name);
  return {};
}

} // namespace

TEST_CASE("golden vectors: isRetryable matches seed 000 for every status and code") {
  golden g;
  std::size_t checked = 0;
  for (auto v : g.list("isRetryable")) {
    int status = 0;
    if (!v["status"].is_null()) {
      status = static_cast<int>(number(v["status"]));
    }
    std::string_view code;
    if (!v["error_code"].is_null()) {
      REQUIRE(v["error_code"].get_string().get(code) == simdjson::SUCCESS);
    }
    bool expected = false;
    REQUIRE(v["retryable"].get_bool().get(expected) == simdjson::SUCCESS);
    INFO("status " << status << " code '" << code << "'");
    CHECK(wandura::is_retryable_status(status, code, wandura::retry_classifier::seed_default) == expected);
    // The same row through the full decision table, as a read: retry exactly when retryable.
    std::error_code transport;
    if (status == 0) {
      transport = wandura::errc::connection_reset;
    }
    auto const c = wandura::classify_attempt({transport, status, code}, wandura::retry_classifier::seed_default,
                                             wandura::request_safety::read);
    CHECK((c.verdict == wandura::attempt_verdict::retry) == expected);
    ++checked;
  }
  CHECK(checked > 10);
}

TEST_CASE("golden vectors: seed 000 backoff to within 1e-6 ms for every preset, attempt and Retry-After") {
  golden g;
  for (auto v : g.list("backoff")) {
    std::string_view name;
    REQUIRE(v["policy"].get_string().get(name) == simdjson::SUCCESS);
    auto const policy = policy_named(name);
    int const attempt = static_cast<int>(number(v["attempt"]));
    std::optional<std::chrono::milliseconds> retry_after;
    if (!v["retry_after_s"].is_null()) {
      retry_after = std::chrono::milliseconds(static_cast<std::int64_t>(number(v["retry_after_s"]) * 1000.0));
    }
    double const u = number(v["u"]);
    double const expected = number(v["delay_ms"]);
    INFO(name << " attempt " << attempt << " u " << u);
    auto const d = wandura::compute_backoff(policy, attempt + 1, retry_after, u); // vectors: 0-based attempt
    CHECK(std::abs(d.delay.count() - expected) <= 1e-6);
  }
}

TEST_CASE("golden vectors: seed 004 standard delay to within 1e-6 ms with and without Retry-After") {
  golden g;
  auto const policy = wandura::retry_policy::standard();
  for (auto v : g.list("sdkDelay")) {
    int const retry = static_cast<int>(number(v["retry"]));
    std::optional<std::chrono::milliseconds> retry_after;
    if (!v["retry_after_ms"].is_null()) {
      retry_after = std::chrono::milliseconds(static_cast<std::int64_t>(number(v["retry_after_ms"])));
    }
    double const u = number(v["u"]);
    double const expected = number(v["delay_ms"]);
    INFO("retry " << retry << " u " << u);
    auto const d = wandura::compute_backoff(policy, retry, retry_after, u);
    CHECK(std::abs(d.delay.count() - expected) <= 1e-6);
  }
}

TEST_CASE("golden vectors: retry budget traces answer every retry as the seed's RetryBudget does") {
  golden g;
  std::size_t traces = 0;
  for (auto b : g.list("budget")) {
    auto const epoch = std::chrono::steady_clock::time_point(std::chrono::hours(100));
    auto at = [&](double ms) { return epoch + std::chrono::milliseconds(static_cast<std::int64_t>(ms)); };
    wandura::retry_budget budget(at(number(b["start_ms"])));
    simdjson::dom::array trace;
    REQUIRE(b["trace"].get_array().get(trace) == simdjson::SUCCESS);
    std::size_t step = 0;
    for (auto op : trace) {
      std::string_view kind;
      REQUIRE(op["op"].get_string().get(kind) == simdjson::SUCCESS);
      auto const now = at(number(op["t_ms"]));
      if (kind == "request") {
        budget.note_request(now);
      } else {
        bool allowed = false;
        REQUIRE(op["allowed"].get_bool().get(allowed) == simdjson::SUCCESS);
        INFO("trace " << traces << " step " << step << " t_ms " << number(op["t_ms"]));
        CHECK(budget.try_retry(now) == allowed);
      }
      ++step;
    }
    ++traces;
  }
  CHECK(traces >= 1);
}
