#include "wandura/resilience/call_options.hpp"

#include <algorithm>

#include "saturating_time.hpp"

namespace wandura {

call_settings merge_options(call_options const& per_call, retry_options const& client, clock::time_point now) {
  if (per_call.policy) {
    check_retry_policy(*per_call.policy); // the client's own was checked when the engine was made
  }
  call_settings s;
  // Policy: per-call > client (the client's defaults to the INTERACTIVE preset).
  s.policy = per_call.policy ? *per_call.policy : client.policy;
  if (per_call.disable_retries) {
    s.policy.max_retries = 0;
  }
  s.policy.max_retries = std::max(s.policy.max_retries, 0); // a client policy merged here unchecked, read as none

  // Each time limit: per-call field > per-call policy > client field > client policy (preset).
  auto pick = [&](std::optional<std::chrono::milliseconds> call_field, std::chrono::milliseconds retry_policy::*member,
                  std::optional<std::chrono::milliseconds> client_field) {
    if (call_field) {
      return *call_field;
    }
    if (per_call.policy) {
      return (*per_call.policy).*member;
    }
    if (client_field) {
      return *client_field;
    }
    return client.policy.*member;
  };
  s.total_timeout = std::max(pick(per_call.total_timeout, &retry_policy::total_timeout, client.total_timeout),
                             std::chrono::milliseconds(0));
  s.attempt_timeout = std::max(pick(per_call.attempt_timeout, &retry_policy::attempt_timeout, client.attempt_timeout),
                               std::chrono::milliseconds(0));
  s.policy.total_timeout = s.total_timeout;
  s.policy.attempt_timeout = s.attempt_timeout;

  s.idempotency_key = per_call.idempotency_key;
  s.auto_idempotency_keys = client.auto_idempotency_keys;
  s.deadline = detail::saturating_add(now, s.total_timeout);
  return s;
}

} // namespace wandura
