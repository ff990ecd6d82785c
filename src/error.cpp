#include "wandura/error.hpp"

#include <asio/error.hpp>

namespace wandura {
namespace {

/// `code` is the system's `e`: in the generic category, the standard system one or Asio's ("asio.system", which
/// maps its values to no generic condition).
bool is_errno(std::error_code const& code, std::errc e) noexcept {
  bool const system = code.category() == std::system_category() || code.category() == asio::system_category();
  return code == e || (system && code.value() == static_cast<int>(e));
}

class wandura_category final : public std::error_category {
public:
  [[nodiscard]] char const* name() const noexcept override { return "wandura"; }

  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
    case errc::connect_failed: return "could not connect (request not sent)";
    case errc::attempt_timeout: return "attempt timed out before any response byte";
    case errc::response_timeout: return "attempt timed out mid-response";
    case errc::connection_reset: return "connection reset";
    case errc::tls_failed: return "TLS failure";
    case errc::response_too_large: return "response too large";
    case errc::protocol_error: return "the peer sent data its protocol does not allow";
    case errc::transport_failed: return "transport failure";
    case errc::deadline_exceeded: return "deadline exceeded";
    case errc::budget_exhausted: return "retry budget exhausted";
    case errc::invalid_idempotency_key: return "invalid idempotency key (90010)";
    case errc::http_error: return "HTTP error";
    case errc::rate_limited: return "rate limited";
    case errc::unavailable: return "unavailable (a status worth retrying later)";
    case errc::invalid_response: return "invalid response body";
    case errc::invalid_argument: return "invalid argument";
    case errc::unauthorized: return "unauthorized";
    }
    return "unknown wandura error";
  }

  [[nodiscard]] std::error_condition default_error_condition(int value) const noexcept override {
    return {value, *this};
  }

  [[nodiscard]] bool equivalent(int value, std::error_condition const& cond) const noexcept override {
    if (cond.category() == wandura::condition_category()) {
      auto const e = static_cast<errc>(value);
      switch (static_cast<condition>(cond.value())) {
      case condition::retryable:
        return e == errc::connect_failed || e == errc::attempt_timeout || e == errc::response_timeout ||
               e == errc::connection_reset || e == errc::rate_limited || e == errc::unavailable;
      case condition::timeout:
        return e == errc::attempt_timeout || e == errc::response_timeout || e == errc::deadline_exceeded;
      case condition::rate_limited: return e == errc::rate_limited;
      case condition::budget_exhausted: return e == errc::budget_exhausted;
      }
      return false;
    }
    return std::error_category::equivalent(value, cond);
  }
};

class wandura_condition_category final : public std::error_category {
public:
  [[nodiscard]] char const* name() const noexcept override { return "wandura.condition"; }

  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<condition>(value)) {
    case condition::retryable: return "retryable failure";
    case condition::timeout: return "timeout";
    case condition::rate_limited: return "rate limited";
    case condition::budget_exhausted: return "retry budget exhausted";
    }
    return "unknown wandura condition";
  }

  [[nodiscard]] bool equivalent(std::error_code const& code, int value) const noexcept override {
    // Codes of the wandura category answer for themselves (wandura_category::equivalent).
    if (code.category() == wandura::error_category()) {
      return code.category().equivalent(code.value(), std::error_condition(value, *this));
    }
    if (static_cast<condition>(value) == condition::timeout) {
      return is_errno(code, std::errc::timed_out);
    }
    if (static_cast<condition>(value) == condition::retryable) {
      return is_errno(code, std::errc::connection_reset) || is_errno(code, std::errc::connection_refused) ||
             is_errno(code, std::errc::connection_aborted) || is_errno(code, std::errc::network_unreachable) ||
             is_errno(code, std::errc::host_unreachable) || is_errno(code, std::errc::timed_out) ||
             code == asio::error::eof;
    }
    return false;
  }
};

} // namespace

std::error_category const& error_category() noexcept {
  static wandura_category const category;
  return category;
}

std::error_category const& condition_category() noexcept {
  static wandura_condition_category const category;
  return category;
}

std::string_view to_string(errc e) noexcept {
  switch (e) {
  case errc::connect_failed: return "connect_failed";
  case errc::attempt_timeout: return "attempt_timeout";
  case errc::response_timeout: return "response_timeout";
  case errc::connection_reset: return "connection_reset";
  case errc::tls_failed: return "tls_failed";
  case errc::response_too_large: return "response_too_large";
  case errc::protocol_error: return "protocol_error";
  case errc::transport_failed: return "transport_failed";
  case errc::deadline_exceeded: return "deadline_exceeded";
  case errc::budget_exhausted: return "budget_exhausted";
  case errc::invalid_idempotency_key: return "invalid_idempotency_key";
  case errc::http_error: return "http_error";
  case errc::rate_limited: return "rate_limited";
  case errc::unavailable: return "unavailable";
  case errc::invalid_response: return "invalid_response";
  case errc::invalid_argument: return "invalid_argument";
  case errc::unauthorized: return "unauthorized";
  }
  return "unknown";
}

error::error(std::error_code code, std::string const& message, error_info info)
    : std::system_error(code, message), message_(message), info_(std::move(info)) {}

} // namespace wandura
