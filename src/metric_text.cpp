#include "metric_text.hpp"

#include <array>
#include <charconv>
#include <cmath>

namespace wandura::detail {

std::string sample_value(std::uint64_t value) {
  std::array<char, 20> buf{}; // 2^64 - 1 has 20 digits
  auto const end = std::to_chars(buf.data(), buf.data() + buf.size(), value).ptr;
  return {buf.data(), end};
}

std::string sample_value(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  std::array<char, 32> buf{}; // the longest shortest form, "-2.2250738585072014e-308", has 24 characters
  char* end = nullptr;
  if (std::trunc(value) == value && std::fabs(value) < 0x1p53) {
    // Every whole number below 2^53 is a double exactly: digits read better than `1e+09` for a count of 10^9.
    end = std::to_chars(buf.data(), buf.data() + buf.size(), static_cast<std::int64_t>(value)).ptr;
  } else {
    end = std::to_chars(buf.data(), buf.data() + buf.size(), value).ptr;
  }
  return {buf.data(), end};
}

} // namespace wandura::detail
