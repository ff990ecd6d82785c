#include "wandura/resilience/retry_after.hpp"

#include <array>
#include <cstdint>

#include "wandura/transport/http_response.hpp"

namespace wandura {
namespace {

constexpr bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

constexpr std::int64_t max_ms = max_retry_after_value.count();

/// RFC 9110 §10.2.3 delay-seconds (`1*DIGIT`, §5.6.1 of RFC 9110 reads it as a non-negative integer) in
/// milliseconds, saturated at `max_ms`. Anything but digits is not delay-seconds: nullopt.
std::optional<std::int64_t> parse_delay_seconds_ms(std::string_view s) noexcept {
  if (s.empty()) {
    return std::nullopt;
  }
  constexpr std::int64_t max_seconds = max_ms / 1000;
  std::int64_t seconds = 0;
  for (char const c : s) {
    if (!is_digit(c)) {
      return std::nullopt; // "1.5", "1e3", "5s", "0x10", "12 34"
    }
    // Saturate as soon as the value passes the cap, so that 20 or 2,000 digits cannot overflow.
    seconds = seconds > max_seconds ? seconds : seconds * 10 + (c - '0');
  }
  return seconds >= max_seconds ? max_ms : seconds * 1000;
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
  text = trim_ows(text);
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
  value = trim_ows(value);
  if (value.empty()) {
    return std::nullopt;
  }
  if (is_digit(value.front())) {
    if (auto ms = parse_delay_seconds_ms(value)) {
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
