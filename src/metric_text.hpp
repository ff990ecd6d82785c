// Sample values of the Prometheus text exposition format 0.0.4, written exactly: a scrape reads back the very value
// the library holds, however large the count or however many digits the sum needs. The one writer of sample values
// for every exporter of the library (a client's counters, its HTTP telemetry, the admission gate). Not public API.
#pragma once

#include <cstdint>
#include <string>

namespace wandura::detail {

/// `value` in decimal digits, every one of them: how a count (a counter, a histogram's cumulative bucket count or
/// its `_count`) is written.
[[nodiscard]] std::string sample_value(std::uint64_t value);

/// `value` as the text format writes a float: `+Inf`, `-Inf` or `NaN`; a whole number below 2^53 (a count kept
/// as a double) in decimal digits; any other the shortest text that reads back as the same double (`std::to_chars`:
/// up to 17 significant digits, an exponent when that is shorter). Also the text of a histogram's `le` bound.
[[nodiscard]] std::string sample_value(double value);

} // namespace wandura::detail
