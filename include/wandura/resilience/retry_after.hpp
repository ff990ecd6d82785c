// Parsing the `Retry-After` response header (RFC 9110 §10.2.3) into a delay.
//
// Accepted forms, with optional surrounding spaces and tabs:
// - delay-seconds: `120`, digits only (RFC 9110 §10.2.3: `delay-seconds = 1*DIGIT`). A fraction (`1.5`), an
//   exponent (`1e3`), a sign or a unit is not delay-seconds and is junk, as any other value the grammar does not
//   allow: guessing what a server meant by `1e3` (1 s? 1,000 s?) is how a client waits 16 minutes by mistake;
// - IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT` and asctime
//   `Sun Nov  6 08:49:37 1994`: the delay is the date minus the response's own `Date` header when that parses
//   (so a skewed local clock does not matter), else minus the local wall clock. A date in the past means 0.
//
// Results:
// - nullopt: absent, empty or junk (`1.5`, `1e3`, `0x10`, `+30`, `5s`, `-1`, ...): the caller falls back to its
//   normal backoff;
// - 0 ms: "retry now" (`0`, or a past date). This is not the same as absent: it is a server statement;
// - values above `max_retry_after_value` (one year), `9223372037` and `99999999999999999999` included, saturate
//   to it, so that adding the result to any `std::chrono` time point cannot overflow. The policy then caps it
//   (`retry_policy::max_retry_after`).
//
// A response with several `Retry-After` headers (a singleton field: a server's error, or two layers each adding
// one): the retry engine parses each and waits the longest any of them asks for; junk among them is ignored.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace wandura {

/// The largest delay `parse_retry_after` returns: one year.
inline constexpr std::chrono::milliseconds max_retry_after_value{std::chrono::hours(24 * 365)};

/// Parses one HTTP-date in any of the three forms of RFC 9110 §5.6.7 (always UTC) to whole seconds. nullopt when
/// malformed (bad day/month names, out-of-range fields, 31 Feb, trailing junk). RFC 850 two-digit years are read as
/// 1970-2069. Seconds precision keeps every four-digit year representable (a nanosecond time point would not).
[[nodiscard]] std::optional<std::chrono::sys_seconds> parse_http_date(std::string_view text) noexcept;

/// Parses a `Retry-After` value (see the file comment for every case).
///
/// @param value the raw header text (`http_response::retry_after()`).
/// @param date the raw `Date` header of the same response, or nullopt; used to correct HTTP-dates for clock skew.
/// @param now the local wall-clock time, used only when `value` is an HTTP-date and `date` is absent or malformed.
[[nodiscard]] std::optional<std::chrono::milliseconds>
parse_retry_after(std::string_view value, std::optional<std::string_view> date,
                  std::chrono::system_clock::time_point now) noexcept;

} // namespace wandura
