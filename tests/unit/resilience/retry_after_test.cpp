#include "wandura/resilience/retry_after.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using wandura::parse_http_date;
using wandura::parse_retry_after;
using ms = std::chrono::milliseconds;

namespace {

// 1994-11-06T08:49:37Z, the RFC's example instant.
std::chrono::sys_seconds const rfc_instant = std::chrono::sys_days(std::chrono::year(1994) / 11 / 6) + 8h + 49min + 37s;

std::chrono::system_clock::time_point local(std::chrono::sys_seconds t) {
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(t);
}

std::optional<ms> parse(std::string_view value) {
  return parse_retry_after(value, std::nullopt, local(rfc_instant));
}

} // namespace

TEST_CASE("Retry-After: delta-seconds become milliseconds") {
  CHECK(parse("120") == ms(120000));
  CHECK(parse("1") == ms(1000));
  CHECK(parse("  2\t") == ms(2000)); // optional white space around the value
  CHECK(parse("007") == ms(7000));
}

TEST_CASE("Retry-After: zero is a value, not the same as absent") {
  REQUIRE(parse("0").has_value());
  CHECK(*parse("0") == ms(0));
  CHECK(parse("000") == ms(0));
  CHECK_FALSE(parse("").has_value());
  CHECK_FALSE(parse("   ").has_value());
}

TEST_CASE("Retry-After: only digits are delay-seconds, a fraction or an exponent is junk, not rounded") {
  // RFC 9110 §10.2.3: delay-seconds = 1*DIGIT. `1e3` once meant 1,000 s.
  for (auto not_digits : {"1e3", "1E3", "15e-1", "1.5", "1.1", "0.0001", "0.000", "1e400", "1e-400", "0e400"}) {
    INFO("value: " << not_digits);
    CHECK_FALSE(parse(not_digits).has_value());
  }
}

TEST_CASE("Retry-After: junk falls back to normal backoff") {
  for (auto junk : {"0x10", "+30", "5s", "-1", "-0", "1.", ".5", "1e", "1,5", "12 34", "abc", "NaN", "inf", "\xff",
                    "1e+", "Sun, 06 Nov 1994 08:49:37 UTC"}) {
    INFO("value: " << junk);
    CHECK_FALSE(parse(junk).has_value());
  }
  using namespace std::string_view_literals;
  CHECK_FALSE(parse("1\0"sv).has_value()); // an embedded NUL ends nothing: the whole value must be digits
}

TEST_CASE("Retry-After: huge values saturate without overflowing any duration") {
  for (auto huge : {"9223372037", "99999999999999999999", "31536001", "9000000000000000000",
                    "0000000000000000000000000000000000000000031536000"}) {
    INFO("value: " << huge);
    auto const v = parse(huge);
    REQUIRE(v.has_value());
    CHECK(*v == wandura::max_retry_after_value);
    // Adding it to a nanosecond time point and converting to nanoseconds must be fine.
    auto const ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*v);
    CHECK(ns.count() > 0);
    CHECK(std::chrono::steady_clock::now() + *v > std::chrono::steady_clock::now());
  }
  CHECK(parse("31535999") == wandura::max_retry_after_value - ms(1000)); // just under the cap is exact
}

TEST_CASE("Retry-After: the three HTTP-date forms parse to the same instant") {
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == rfc_instant);
  CHECK(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == rfc_instant);
  CHECK(parse_http_date("Sun Nov  6 08:49:37 1994") == rfc_instant);
  CHECK(parse_http_date("Thu, 31 Dec 2037 23:59:59 GMT").has_value());
  CHECK(parse_http_date("Monday, 01-Jan-30 00:00:00 GMT") ==
        std::chrono::sys_seconds(std::chrono::sys_days(std::chrono::year(2030) / 1 / 1)));
  CHECK(parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT").has_value()); // seconds precision: no overflow
}

TEST_CASE("Retry-After: malformed HTTP-dates are refused") {
  for (auto bad : {"Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37", "Xyz, 06 Nov 1994 08:49:37 GMT",
                   "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                   "Sun, 06 Nov 1994 08:60:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT junk", "Sun Nov 6 08:49:37 1994",
                   "Sunday, 06-Nov-1994 08:49:37 GMT", ""}) {
    INFO("date: " << bad);
    CHECK_FALSE(parse_http_date(bad).has_value());
  }
}

TEST_CASE("Retry-After: an HTTP-date is measured against the response's Date, correcting local clock skew") {
  // The server says "now is 08:49:37, retry at 08:50:07"; the local clock is 10 minutes fast.
  auto const skewed_local = local(rfc_instant + 10min);
  auto const v = parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", skewed_local);
  CHECK(v == ms(30000));
  // Without a usable Date, the local clock is all there is: the date is then in the past, which means 0.
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", std::nullopt, skewed_local) == ms(0));
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", "garbage", skewed_local) == ms(0));
  // RFC 850 and asctime forms too.
  CHECK(parse_retry_after("Sunday, 06-Nov-94 08:49:47 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", skewed_local) ==
        ms(10000));
  CHECK(parse_retry_after("Sun Nov  6 08:49:40 1994", "Sun Nov  6 08:49:37 1994", skewed_local) == ms(3000));
}

TEST_CASE("Retry-After: a past date means retry now, a far future date saturates") {
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", {}) == ms(0));
  CHECK(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", {}) ==
        wandura::max_retry_after_value);
  // Measured against a local clock with sub-second digits, the wait rounds up to the next millisecond.
  auto const local_now = local(rfc_instant) + std::chrono::microseconds(250500);
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:38 GMT", std::nullopt, local_now) == ms(750));
}
