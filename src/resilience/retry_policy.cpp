#include "wandura/resilience/retry_policy.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "wandura/error.hpp"

namespace wandura {

retry_policy retry_policy::interactive() noexcept {
  retry_policy p;
  p.max_retries = 3;
  p.backoff = backoff_kind::full_jitter;
  p.classifier = retry_classifier::seed_default;
  p.initial_delay = std::chrono::milliseconds(500);
  p.max_delay = std::chrono::milliseconds(8000);
  p.attempt_timeout = std::chrono::milliseconds(8000);
  p.total_timeout = std::chrono::milliseconds(15000);
  return p;
}

retry_policy retry_policy::background() noexcept {
  retry_policy p = interactive();
  p.max_retries = 5;
  p.initial_delay = std::chrono::milliseconds(1000);
  p.max_delay = std::chrono::milliseconds(30000);
  p.attempt_timeout = std::chrono::milliseconds(15000);
  p.total_timeout = std::chrono::milliseconds(120000);
  return p;
}

retry_policy retry_policy::standard() noexcept {
  retry_policy p;
  p.max_retries = 2;
  p.backoff = backoff_kind::exponential;
  p.classifier = retry_classifier::standard;
  p.initial_delay = std::chrono::milliseconds(200);
  p.multiplier = 2.0;
  p.max_delay = std::chrono::milliseconds(4000);
  p.jitter = 0.3;
  p.respect_retry_after = true;
  p.max_retry_after = std::chrono::milliseconds(30000);
  p.attempt_timeout = std::chrono::milliseconds(30000);
  p.total_timeout = std::chrono::milliseconds(300000);
  return p;
}

retry_policy retry_policy::none() noexcept {
  retry_policy p = interactive();
  p.max_retries = 0;
  return p;
}

void check_retry_policy(retry_policy const& policy) {
  auto const refuse = [](std::string_view what) {
    throw error(errc::invalid_argument, "retry policy: " + std::string(what));
  };
  if (policy.max_retries < 0) {
    refuse("max_retries must be >= 0");
  }
  if (policy.backoff != backoff_kind::full_jitter && policy.backoff != backoff_kind::exponential) {
    refuse("backoff must be full_jitter or exponential");
  }
  if (policy.classifier != retry_classifier::seed_default && policy.classifier != retry_classifier::standard) {
    refuse("classifier must be seed_default or standard");
  }
  for (auto const& [value, name] : {std::pair{policy.initial_delay, std::string_view("initial_delay")},
                                    {policy.max_delay, "max_delay"},
                                    {policy.max_retry_after, "max_retry_after"}}) {
    if (value < std::chrono::milliseconds::zero()) {
      refuse(std::string(name) + " must not be negative");
    }
  }
  // Written so that NaN fails each check.
  if (!(policy.multiplier >= 1.0 && std::isfinite(policy.multiplier))) {
    refuse("multiplier must be finite and >= 1");
  }
  if (!(policy.jitter >= 0.0 && policy.jitter < 1.0)) {
    refuse("jitter must be >= 0 and < 1");
  }
}

namespace {

using fms = std::chrono::duration<double, std::milli>;

double clamp_unit(double u) noexcept {
  if (!(u >= 0.0)) { // NaN or negative
    return 0.0;
  }
  return std::min(u, std::nextafter(1.0, 0.0));
}

double non_negative_ms(std::chrono::milliseconds d) noexcept {
  return d.count() > 0 ? static_cast<double>(d.count()) : 0.0;
}

} // namespace

backoff_delay compute_backoff(retry_policy const& policy, int retry,
                              std::optional<std::chrono::milliseconds> retry_after, double u) noexcept {
  u = clamp_unit(u);
  int const n = std::max(retry, 1);
  double const initial = non_negative_ms(policy.initial_delay);
  double const cap = non_negative_ms(policy.max_delay);

  std::optional<double> ra_ms;
  if (policy.respect_retry_after && retry_after) {
    ra_ms = std::min(non_negative_ms(*retry_after), non_negative_ms(policy.max_retry_after));
  }

  if (policy.backoff == backoff_kind::full_jitter) {
    // docs/protocol.md §3 backoffMs: Retry-After (> 0) plus up to 1 s of jitter wins; else full jitter under the cap.
    if (ra_ms && *ra_ms > 0.0) {
      return {fms(*ra_ms + u * 1000.0), delay_source::retry_after};
    }
    // 2^(n-1) in double: saturates to inf for huge n, and min() with the cap keeps it finite. An initial delay of 0
    // stays 0 however far it grows (0 times inf would be NaN, and min() would answer the cap).
    double const step = initial > 0.0 ? std::min(cap, initial * std::exp2(static_cast<double>(n - 1))) : 0.0;
    return {fms(u * step), delay_source::backoff};
  }

  // docs/protocol.md §3: min(maxDelay, initial * multiplier^(n-1)) * (1 + U(-jitter, +jitter)).
  double const multiplier = policy.multiplier > 0.0 ? policy.multiplier : 1.0;
  double const jitter = policy.jitter > 0.0 ? std::min(policy.jitter, 1.0) : 0.0; // NaN reads as none
  double const grown = initial > 0.0 ? initial * std::pow(multiplier, static_cast<double>(n - 1)) : 0.0;
  double const base = std::isfinite(grown) ? std::min(cap, grown) : cap;
  double const delay = base * (1.0 + (-jitter + 2.0 * jitter * u));
  if (ra_ms && *ra_ms > delay) {
    return {fms(*ra_ms), delay_source::retry_after};
  }
  return {fms(delay), delay_source::backoff};
}

} // namespace wandura
