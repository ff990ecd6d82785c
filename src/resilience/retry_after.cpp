#include "wandura/resilience/retry_after.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace wandura {
namespace {

constexpr bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

constexpr std::int64_t max_ms = max_retry_after_value.count();

/// delta-seconds with an optional fraction and exponent, parsed exactly in decimal (no binary floating point, so
/// `1.1` is 1100 ms, not 1101), rounded up to whole milliseconds and saturated at `max_ms`.
std::optional<std::int64_t> parse_delta_ms(std::string_view s) noexcept {
  std::size_t i = 0;
  std::size_t const int_begin = i;
  while (i < s.size() && is_digit(s[i])) {
    ++i;
  }
  std::string_view const int_digits = s.substr(int_begin, i - int_begin);
  if (int_digits.empty()) {
    return std::nullopt; // "+30", "-1", ".5", "x"
  }
  std::string_view frac_digits;
  if (i < s.size() && s[i] == '.') {
    std::size_t const frac_begin = ++i;
    while (i < s.size() && is_digit(s[i])) {
      ++i;
    }
    frac_digits = s.substr(frac_begin, i - frac_begin);
    if (frac_digits.empty()) {
      return std::nullopt; // "1."
    }
  }
  std::int64_t exponent = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      negative = s[i] == '-';
      ++i;
    }
    std::size_t const exp_begin = i;
    while (i < s.size() && is_digit(s[i])) {
      if (exponent < 1'000'000) { // saturate: beyond this the answer is 0-ish or the cap either way
        exponent = exponent * 10 + (s[i] - '0');
      }
      ++i;
    }
    if (i == exp_begin) {
      return std::nullopt; // "1e"
    }
    exponent = negative ? -exponent : exponent;
  }
  if (i != s.size()) {
    return std::nullopt; // "5s", "0x10", "12 34"
  }

  // value_ms = mantissa * 10^scale, mantissa = int_digits frac_digits without leading zeros.
  std::string mantissa;
  mantissa.reserve(int_digits.size() + frac_digits.size());
  for (std::string_view part : {int_digits, frac_digits}) {
    for (char c : part) {
      if (!mantissa.empty() || c != '0') {
        mantissa.push_back(c);
      }
    }
  }
  if (mantissa.empty()) {
    return 0; // "0", "0.000", "0e5"
  }
  std::int64_t const scale = exponent - static_cast<std::int64_t>(frac_digits.size()) + 3;
  auto const significant = static_cast<std::int64_t>(mantissa.size());
  if (significant + scale > 12) {
    return max_ms; // >= 10^12 ms, far above one year
  }
  if (scale >= 0) {
    std::int64_t value = 0;
    for (char c : mantissa) {
      value = value * 10 + (c - '0');
    }
    for (std::int64_t k = 0; k < scale; ++k) {
      value *= 10;
    }
    return value < max_ms ? value : max_ms;
  }
  std::int64_t const dropped = -scale;
  if (dropped >= significant) {
    return 1; // a positive value under 1 ms rounds up to 1 ms
  }
  std::int64_t value = 0;
  auto const kept = static_cast<std::size_t>(significant - dropped);
  for (std::size_t k = 0; k < kept; ++k) {
    value = value * 10 + (mantissa[k] - '0');
  }
  bool remainder = false;
  for (std::size_t k = kept; k < mantissa.size(); ++k) {
    remainder = remainder || mantissa[k] != '0';
  }
  value += remainder ? 1 : 0;
  return value < max_ms ? value : max_ms;
}

constexpr std::array<std::string_view, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> short_days{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> long_days{"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                    "Friday", "Saturday", "Sunday"};

/// A tiny cursor over the date text; every read checks bounds.
struct cursor {
  std::string_view s;
  std::size_t i = 0;

  bool literal(std::string_view lit) noexcept {
    if (s.substr(i, lit.size()) != lit) {
      return false;
    }
    i += lit.size();
    return true;
  }
  bool number(std::size_t digits, int& out) noexcept {
    if (i + digits > s.size()) {
      return false;
    }
    int v = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      char const c = s[i + k];
      if (!is_digit(c)) {
        return false;
      }
      v = v * 10 + (c - '0');
    }
    i += digits;
    out = v;
    return true;
  }
  bool month(unsigned& out) noexcept {
    for (std::size_t m = 0; m < months.size(); ++m) {
      if (literal(months[m])) {
        out = static_cast<unsigned>(m + 1);
        return true;
      }
    }
    return false;
  }
  template <std::size_t N> bool one_of(std::array<std::string_view, N> const& names) noexcept {
    for (auto name : names) {
      if (literal(name)) {
        return true;
      }
    }
    return false;
  }
  bool time_of_day(int& h, int& m, int& sec) noexcept {
    return number(2, h) && literal(":") && number(2, m) && literal(":") && number(2, sec);
  }
  [[nodiscard]] bool done() const noexcept { return i == s.size(); }
};

std::optional<std::chrono::sys_seconds> make_time(int year, unsigned month, int day, int hour, int minute,
                                                  int second) noexcept {
  using namespace std::chrono;
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  year_month_day const ymd{std::chrono::year{year}, std::chrono::month{month},
                           std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) {
    return std::nullopt; // 31 Feb
  }
  return sys_seconds{sys_days{ymd}} + hours{hour} + minutes{minute} + seconds{second};
}

} // namespace

std::optional<std::chrono::sys_seconds> parse_http_date(std::string_view text) noexcept {
  text = trim(text);
  int day = 0;
  int year = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  unsigned month = 0;

  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  {
    cursor c{text};
    if (c.one_of(short_days) && c.literal(", ") && c.number(2, day) && c.literal(" ") && c.month(month) &&
        c.literal(" ") && c.number(4, year) && c.literal(" ") && c.time_of_day(hour, minute, second) &&
        c.literal(" GMT") && c.done()) {
      return make_time(year, month, day, hour, minute, second);
    }
  }
  // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
  {
    cursor c{text};
    int yy = 0;
    if (c.one_of(long_days) && c.literal(", ") && c.number(2, day) && c.literal("-") && c.month(month) &&
        c.literal("-") && c.number(2, yy) && c.literal(" ") && c.time_of_day(hour, minute, second) &&
        c.literal(" GMT") && c.done()) {
      return make_time(yy < 70 ? 2000 + yy : 1900 + yy, month, day, hour, minute, second);
    }
  }
  // asctime: "Sun Nov  6 08:49:37 1994" (day is two digits or a space and one digit)
  {
    cursor c{text};
    if (c.one_of(short_days) && c.literal(" ") && c.month(month) && c.literal(" ") &&
        (c.number(2, day) || (c.literal(" ") && c.number(1, day))) && c.literal(" ") &&
        c.time_of_day(hour, minute, second) && c.literal(" ") && c.number(4, year) && c.done()) {
      return make_time(year, month, day, hour, minute, second);
    }
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, std::optional<std::string_view> date,
                                                           std::chrono::system_clock::time_point now) noexcept {
  value = trim(value);
  if (value.empty()) {
    return std::nullopt;
  }
  if (is_digit(value.front())) {
    if (auto ms = parse_delta_ms(value)) {
      return std::chrono::milliseconds(*ms);
    }
    return std::nullopt;
  }
  auto const when = parse_http_date(value);
  if (!when) {
    return std::nullopt;
  }
  // Clock skew: measure against the server's own Date when it sent one we can read, else the local wall clock.
  // Everything in milliseconds of int64: years 0-9999 are about 3e14 ms, far from overflow.
  using std::chrono::milliseconds;
  auto const when_ms = std::chrono::time_point_cast<milliseconds>(*when);
  std::chrono::sys_time<milliseconds> base_ms;
  std::optional<std::chrono::sys_seconds> server_now;
  if (date) {
    server_now = parse_http_date(*date);
  }
  if (server_now) {
    base_ms = std::chrono::time_point_cast<milliseconds>(*server_now);
  } else {
    base_ms = std::chrono::floor<milliseconds>(now); // delay = ceil(when - now)
  }
  if (when_ms <= base_ms) {
    return milliseconds(0);
  }
  auto const diff = when_ms - base_ms;
  return diff < max_retry_after_value ? diff : max_retry_after_value;
}

} // namespace wandura
