#include "transport/content_length.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

#include <catch2/catch.hpp>

using wandura::detail::parse_content_length;

TEST_CASE("content length: 1*DIGIT between optional white space, or a list of that one number") {
  CHECK(parse_content_length("0") == std::optional<std::uint64_t>(0));
  CHECK(parse_content_length("96") == std::optional<std::uint64_t>(96));
  CHECK(parse_content_length(" \t96\t ") == std::optional<std::uint64_t>(96));
  CHECK(parse_content_length("096") == std::optional<std::uint64_t>(96)); // leading zeros: the same decimal number
  CHECK(parse_content_length("96, 96") == std::optional<std::uint64_t>(96));
  CHECK(parse_content_length("96,096 ,\t96") == std::optional<std::uint64_t>(96));
  CHECK(parse_content_length("9223372036854775807") == std::optional<std::uint64_t>(9223372036854775807U));
}

TEST_CASE("content length: a sign, inner white space, differing or empty elements and numbers past 2^63 - 1 are "
          "refused") {
  for (char const* value : {"",
                            " ",
                            "5, 500",
                            "500, 5",
                            "5 500",
                            "+96",
                            "-1",
                            "- 1",
                            "96,",
                            ",96",
                            "96,,96",
                            "96, ",
                            "0x10",
                            "1e3",
                            "5.0",
                            "96;",
                            "96\v",
                            "\v96",
                            "abc",
                            "9223372036854775808",
                            "18446744073709551615",
                            "18446744073709551616",
                            "99999999999999999999999999"}) {
    INFO("value \"" << value << "\"");
    CHECK_FALSE(parse_content_length(value).has_value());
  }
  CHECK_FALSE(parse_content_length(std::string_view("9\0"
                                                    "6",
                                                    3))
                  .has_value());
}
