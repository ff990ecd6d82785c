#include "wandura/resilience/classify.hpp"

#include <array>

#include <asio/error.hpp>

#include "wandura/error.hpp"

namespace wandura {
namespace {

constexpr std::string_view unkeyed_write_note = "not retried: write without idempotency key";

/// Codes that are final whatever the status says (docs/protocol.md §3: never retry `not_ready` or
/// `idempotency_conflict`).
bool is_never_retried_code(std::string_view code) noexcept {
  return code == "not_ready" || code == "idempotency_conflict" || code == "40903";
}

/// docs/protocol.md §1 code table: the codes marked retryable. `idempotency_in_progress` is 40901's string form
/// (docs/protocol.md §1).
bool is_retryable_code(std::string_view code) noexcept {
  constexpr std::array<std::string_view, 5> numeric{"40901", "42900", "42901", "50000", "50200"};
  for (auto c : numeric) {
    if (code == c) {
      return true;
    }
  }
  return false;
}

} // namespace

bool is_retryable_status(int status, std::string_view error_code, retry_classifier classifier) noexcept {
  if (status == 0) {
    return true; // no response: a network error (docs/protocol.md §3 `status === null`)
  }
  if (status >= 200 && status < 300) {
    return false;
  }
  if (is_never_retried_code(error_code)) {
    // docs/protocol.md §3 checks not_ready only on 503; on 429/500/502 its table still retries, and the golden vectors
    // say so.
    if (status == 503 || error_code != "not_ready") {
      return false;
    }
  }
  // 409 is decided by its body: only "still running" is worth waiting for (docs/protocol.md §1, both classifiers).
  if (status == 409) {
    return error_code == "idempotency_in_progress" || error_code == "40901";
  }
  switch (status) {
  case 429:
  case 500:
  case 502:
  case 503: return true;
  case 408:
  case 425:
  case 504: return classifier == retry_classifier::standard;
  default: break;
  }
  return classifier == retry_classifier::standard && is_retryable_code(error_code);
}

attempt_classification classify_attempt(attempt_facts const& facts, retry_classifier classifier,
                                        request_safety safety) noexcept {
  if (facts.transport_error) {
    if (facts.transport_error == asio::error::operation_aborted) {
      return {attempt_verdict::cancelled, {}};
    }
    if (facts.transport_error == errc::connect_failed) {
      return {attempt_verdict::retry, {}}; // never sent: safe even for an unkeyed write
    }
    if (facts.transport_error != condition::retryable) {
      return {attempt_verdict::final, {}}; // TLS, too large, protocol: would fail the same way
    }
    if (safety == request_safety::unkeyed_write) {
      return {attempt_verdict::final, unkeyed_write_note}; // may have been executed
    }
    return {attempt_verdict::retry, {}};
  }
  int const status = facts.http_status;
  if (status >= 200 && status < 300) {
    return {attempt_verdict::success, {}};
  }
  if (!is_retryable_status(status, facts.error_code, classifier)) {
    return {attempt_verdict::final, {}};
  }
  if (safety == request_safety::unkeyed_write) {
    return {attempt_verdict::final, unkeyed_write_note};
  }
  return {attempt_verdict::retry, {}};
}

} // namespace wandura
