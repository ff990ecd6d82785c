#include "wandura/playback/ticket.hpp"

#include <chrono>

namespace wandura {
namespace {

/// Reads exactly `width` ASCII digits at `pos`, advancing it.
bool digits(std::string_view text, std::size_t& pos, std::size_t width, int& out) noexcept {
  if (text.size() - pos < width) {
    return false;
  }
  int value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    char const c = text[pos + i];
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + (c - '0');
  }
  pos += width;
  out = value;
  return true;
}

bool expect(std::string_view text, std::size_t& pos, char c) noexcept {
  if (pos >= text.size() || text[pos] != c) {
    return false;
  }
  ++pos;
  return true;
}

} // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) noexcept {
  using namespace std::chrono;
  std::size_t pos = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(text, pos, 4, y) || !expect(text, pos, '-') || !digits(text, pos, 2, mo) || !expect(text, pos, '-') ||
      !digits(text, pos, 2, d)) {
    return std::nullopt;
  }
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')) {
    return std::nullopt;
  }
  ++pos;
  if (!digits(text, pos, 2, h) || !expect(text, pos, ':') || !digits(text, pos, 2, mi) || !expect(text, pos, ':') ||
      !digits(text, pos, 2, s)) {
    return std::nullopt;
  }
  if (h > 23 || mi > 59 || s > 60) {
    return std::nullopt;
  }
  year_month_day const ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) {
    return std::nullopt;
  }
  // Fractional seconds: any number of digits, kept to nanoseconds.
  nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t const first = pos;
    std::int64_t ns = 0;
    std::int64_t scale = 100'000'000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      ns += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == first) {
      return std::nullopt;
    }
    fraction = nanoseconds{ns};
  }
  // Offset: Z, or +hh:mm / -hh:mm; the local time minus the offset is UTC.
  minutes offset{0};
  if (pos >= text.size()) {
    return std::nullopt;
  }
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    int const sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!digits(text, pos, 2, oh) || !expect(text, pos, ':') || !digits(text, pos, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = minutes{sign * (oh * 60 + om)};
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) {
    return std::nullopt;
  }
  if (s == 60) {
    s = 59; // a leap second reads as the second before it (system_clock has none)
  }
  // In whole seconds first (never overflows for 4-digit years), then checked against the clock's range: with
  // nanosecond ticks system_clock only spans the years 1678-2262.
  auto const utc_seconds = sys_days{ymd} + hours{h} + minutes{mi} + seconds{s} - offset;
  constexpr auto lowest = time_point_cast<seconds>(system_clock::time_point::min()) + seconds{1};
  constexpr auto highest = time_point_cast<seconds>(system_clock::time_point::max()) - seconds{1};
  if (utc_seconds < lowest || utc_seconds > highest) {
    return std::nullopt;
  }
  return time_point_cast<system_clock::duration>(utc_seconds) + duration_cast<system_clock::duration>(fraction);
}

} // namespace wandura
