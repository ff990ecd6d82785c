#include "metric_text.hpp"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

using wandura::detail::sample_value;

TEST_CASE("metric text: counts are written in every digit") {
  CHECK(sample_value(std::uint64_t{0}) == "0");
  CHECK(sample_value(std::uint64_t{1'000'000'007}) == "1000000007");
  CHECK(sample_value(std::numeric_limits<std::uint64_t>::max()) == "18446744073709551615");
}

TEST_CASE("metric text: a whole number kept as a double is written as a count, below 2^53") {
  CHECK(sample_value(0.0) == "0");
  CHECK(sample_value(1e9) == "1000000000");
  CHECK(sample_value(1'000'000'007.0) == "1000000007");
  CHECK(sample_value(9'007'199'254'740'991.0) == "9007199254740991"); // 2^53 - 1
  CHECK(sample_value(-42.0) == "-42");
  CHECK(sample_value(9'007'199'254'740'992.0) == "9007199254740992"); // 2^53: shortest form, still every digit
  CHECK(sample_value(1e22) == "1e+22");
}

TEST_CASE("metric text: a double is written as the shortest text that reads back as the same double") {
  CHECK(sample_value(0.005) == "0.005");
  CHECK(sample_value(1097448.8) == "1097448.8");
  CHECK(sample_value(4000.0 / 60) == "66.66666666666667");
  CHECK(sample_value(0.1 + 0.2) == "0.30000000000000004");         // 17 significant digits
  CHECK(sample_value(474855926.29044837) == "474855926.29044837"); // likewise
  CHECK(sample_value(1e-7) == "1e-07");
  for (double const v : {0.1 + 0.2, 474855926.29044837, 5e-324, std::numeric_limits<double>::max(),
                         -std::numeric_limits<double>::min(), 123456789.12345679}) {
    auto const text = sample_value(v);
    INFO(text);
    CHECK(std::strtod(text.c_str(), nullptr) == v);
  }
}

TEST_CASE("metric text: infinities and NaN are spelled as the text format spells them") {
  CHECK(sample_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(sample_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(sample_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
}
