#include "wandura/fleet/fleet_error.hpp"

#include <string>

#include "wandura/error.hpp"

namespace wandura {
namespace {

class fleet_error_category final : public std::error_category {
public:
  [[nodiscard]] char const* name() const noexcept override { return "wandura.fleet"; }

  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<fleet_errc>(value)) {
    case fleet_errc::server_error: return "redis answered an error reply";
    case fleet_errc::auth_failed: return "redis refused the credentials or database";
    case fleet_errc::overloaded: return "too many redis commands waiting for replies";
    case fleet_errc::unexpected_reply: return "unexpected reply shape from redis";
    }
    return "unknown wandura.fleet error";
  }

  [[nodiscard]] bool equivalent(int value, std::error_condition const& cond) const noexcept override {
    if (cond.category() == condition_category()) {
      return static_cast<condition>(cond.value()) == condition::retryable &&
             static_cast<fleet_errc>(value) == fleet_errc::overloaded;
    }
    return std::error_category::equivalent(value, cond);
  }
};

} // namespace

std::error_category const& fleet_category() noexcept {
  static fleet_error_category const category;
  return category;
}

std::string_view to_string(fleet_errc e) noexcept {
  switch (e) {
  case fleet_errc::server_error: return "server_error";
  case fleet_errc::auth_failed: return "auth_failed";
  case fleet_errc::overloaded: return "overloaded";
  case fleet_errc::unexpected_reply: return "unexpected_reply";
  }
  return "unknown";
}

} // namespace wandura
