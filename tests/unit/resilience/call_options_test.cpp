#include "wandura/resilience/call_options.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wandura::call_options;
using wandura::merge_options;
using wandura::retry_options;
using wandura::retry_policy;

namespace {
auto const now = std::chrono::steady_clock::time_point(50h);
}

TEST_CASE("options: with nothing set, the client's preset decides (INTERACTIVE by default)") {
  auto const s = merge_options({}, retry_options{}, now);
  CHECK(s.policy == retry_policy::interactive());
  CHECK(s.total_timeout == 15s);
  CHECK(s.attempt_timeout == 8s);
  CHECK(s.deadline == now + 15s);
  CHECK(s.auto_idempotency_keys);
  CHECK_FALSE(s.idempotency_key);
}

TEST_CASE("options: client fields override the client's preset") {
  retry_options client;
  client.policy = retry_policy::background();
  client.total_timeout = 60s;
  client.auto_idempotency_keys = false;
  auto const s = merge_options({}, client, now);
  CHECK(s.policy.max_retries == 5);
  CHECK(s.total_timeout == 60s);
  CHECK(s.attempt_timeout == 15s); // background preset
  CHECK_FALSE(s.auto_idempotency_keys);
}

TEST_CASE("options: per-call fields override everything, a per-call policy overrides the client's fields") {
  retry_options client;
  client.total_timeout = 60s;
  client.attempt_timeout = 3s;

  call_options with_policy;
  with_policy.policy = retry_policy::standard();
  auto const a = merge_options(with_policy, client, now);
  CHECK(a.policy.max_retries == 2);
  CHECK(a.total_timeout == 300s); // the per-call policy is more specific than the client's field
  CHECK(a.attempt_timeout == 30s);

  call_options explicit_fields;
  explicit_fields.policy = retry_policy::standard();
  explicit_fields.total_timeout = 5s;
  explicit_fields.attempt_timeout = 1s;
  explicit_fields.idempotency_key = "order-1";
  auto const b = merge_options(explicit_fields, client, now);
  CHECK(b.total_timeout == 5s);
  CHECK(b.attempt_timeout == 1s);
  CHECK(b.deadline == now + 5s);
  CHECK(b.idempotency_key == "order-1");
  CHECK(b.policy.total_timeout == 5s); // the merged policy tells the same story
}

TEST_CASE("options: retries off keeps the time limits") {
  call_options off;
  off.disable_retries = true;
  auto const s = merge_options(off, retry_options{}, now);
  CHECK(s.policy.max_retries == 0);
  CHECK(s.total_timeout == 15s);
  call_options none;
  none.policy = retry_policy::none();
  CHECK(merge_options(none, retry_options{}, now).policy.max_retries == 0);
}

TEST_CASE("options: a huge total timeout saturates the deadline instead of overflowing") {
  call_options forever;
  forever.total_timeout = std::chrono::milliseconds::max();
  auto const s = merge_options(forever, retry_options{}, now);
  CHECK(s.deadline == std::chrono::steady_clock::time_point::max());
  call_options negative;
  negative.total_timeout = -5s;
  CHECK(merge_options(negative, retry_options{}, now).deadline == now);
}

// Designated initializers that name a few fields (as a user writes them) compile under -Wextra -Werror with GCC
// 12, which warns about every field left out that has no default member initializer.
TEST_CASE("options: designated initializers naming a few fields keep every other default, warning-free") {
  call_options const once{.disable_retries = true};
  CHECK_FALSE(once.idempotency_key);
  CHECK_FALSE(once.policy);
  CHECK_FALSE(once.total_timeout);
  CHECK_FALSE(once.attempt_timeout);
  retry_options const client{.auto_idempotency_keys = false};
  CHECK(client.policy == retry_policy::interactive());
  CHECK_FALSE(client.total_timeout);
  CHECK(client.budget.percent == 10);
  CHECK(client.admission.calm_period == 10s);
  CHECK_FALSE(client.log);
  CHECK_FALSE(client.time_source);
  wandura::admission_gate_options const gate{.burst = 250ms};
  CHECK_FALSE(gate.shared_pace);
  CHECK_FALSE(gate.on_long_wait);
}
