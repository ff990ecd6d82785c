#include "wandura/detail/printable.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace std::string_literals;
using wandura::detail::printable;

TEST_CASE("printable: visible ASCII and spaces are kept as they are") {
  CHECK(printable("not_ready 50200 (a/b:c)") == "not_ready 50200 (a/b:c)");
  CHECK(printable("") == "");
}

TEST_CASE("printable: line breaks, control bytes, DEL and non-ASCII bytes are written as hex escapes") {
  CHECK(printable("a\r\nb") == "a\\x0d\\x0ab");
  CHECK(printable("\x00\x1b\x7f"s) == "\\x00\\x1b\\x7f");
  CHECK(printable("caf\xc3\xa9") == "caf\\xc3\\xa9");
}

TEST_CASE("printable: text longer than the bound is cut and marked") {
  std::string const long_text(10'000, 'z');
  std::string const shown = printable(long_text);
  CHECK(shown == std::string(wandura::detail::max_quoted_bytes, 'z') + "...");
  CHECK(printable("abcdef", 3) == "abc...");
  CHECK(printable("abc", 3) == "abc");
  CHECK(printable("\n\n\n\n", 2) == "\\x0a\\x0a...");
}
