#include "wandura/transport/http_response.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace {

/// The promise simdjson relies on: `body_padding` readable bytes after the content, whatever happened before, and
/// zeros (simdjson reads them; uninitialised, a memory checker reports every parse).
bool padded(wandura::response_body const& b) {
  if (b.data() == nullptr || b.capacity() < b.size() + wandura::body_padding) {
    return false;
  }
  char const* const padding = b.data() + b.size();
  return std::all_of(padding, padding + wandura::body_padding, [](char c) { return c == 0; });
}

} // namespace

TEST_CASE("http_headers: lookups are case-insensitive and keep repeats in arrival order") {
  wandura::http_headers h;
  CHECK(h.empty());
  CHECK_FALSE(h.find("date"));
  h.add("Content-Type", "application/json");
  h.add("X-Repeat", "a");
  h.add("x-repeat", "b");
  h.add("Retry-After", "");
  REQUIRE(h.size() == 4);
  CHECK(h.find("CONTENT-TYPE") == "application/json");
  CHECK(h.find("x-REPEAT") == "a");
  CHECK(h.find_all("X-Repeat") == std::vector<std::string_view>{"a", "b"});
  CHECK(h.find("retry-after") == ""); // present and empty is not absent
  CHECK_FALSE(h.find("Retry"));
  CHECK(h[2].name == "x-repeat");
  CHECK(h[2].value == "b");
  auto const all = h.fields();
  REQUIRE(all.size() == 4);
  CHECK(all[0].name == "Content-Type");
  CHECK(all[3].value.empty());
  h.clear();
  CHECK(h.empty());
  CHECK_FALSE(h.find("content-type"));
}

TEST_CASE("http_headers: many and long headers, and views of its own headers, stay intact") {
  wandura::http_headers h;
  std::string const long_value(100'000, 'v');
  for (int i = 0; i < 200; ++i) {
    h.add("X-Header-" + std::to_string(i), i % 50 == 0 ? long_value : std::to_string(i));
  }
  // Adding a header made of views into the object's own buffer: the buffer grows while they are read.
  for (int i = 0; i < 20; ++i) {
    auto const name = h[0].name;
    auto const value = h[static_cast<std::size_t>(i) * 10].value;
    h.add(name, value);
  }
  REQUIRE(h.size() == 220);
  CHECK(h[199].value == "199");
  CHECK(h[200].name == "X-Header-0");
  CHECK(h[200].value == long_value);
  CHECK(h[201].value == "10");
  CHECK(h.find_all("x-header-0").size() == 21);
  wandura::http_headers copy = h;
  wandura::http_headers moved = std::move(h);
  CHECK(copy.find("X-HEADER-150") == long_value);
  CHECK(moved.find("x-header-42") == "42");
}

TEST_CASE("response_body: padded when empty, after growth, copies and moves") {
  wandura::response_body b;
  CHECK(b.empty());
  CHECK(padded(b));
  std::string expected;
  for (int i = 0; i < 1000; ++i) {
    std::string const chunk = std::to_string(i) + ",";
    b.append(chunk.data(), chunk.size());
    expected += chunk;
    REQUIRE(padded(b));
  }
  CHECK(b.view() == expected);
  wandura::response_body copy = b;
  CHECK(copy.view() == expected);
  CHECK(padded(copy));
  wandura::response_body moved = std::move(b);
  CHECK(moved.view() == expected);
  CHECK(b.empty()); // NOLINT(bugprone-use-after-move): moved-from is documented as empty and padded
  CHECK(padded(b));
  b = moved;
  CHECK(b.view() == expected);
  b = std::move(b); // NOLINT: self-move leaves it unchanged
  CHECK(b.view() == expected);
  b.clear();
  CHECK(b.empty());
  CHECK(padded(b));
  b.reserve(5000);
  CHECK(b.capacity() >= 5000 + wandura::body_padding);
  CHECK(padded(b));
  b.assign("short");
  CHECK(padded(b));
  b.assign("");
  CHECK(padded(b));
  b = wandura::response_body{} /* copy-assigned from an empty one */;
  CHECK(padded(b));
  wandura::response_body reserved;
  reserved.reserve(100); // storage, no content yet
  CHECK(padded(reserved));
}

TEST_CASE("response_body: appending or assigning its own bytes, with and without growth") {
  wandura::response_body b;
  b.assign("0123456789");
  b.append(b.data(), b.size()); // grows: the source is in the block being replaced
  CHECK(b.view() == "01234567890123456789");
  b.reserve(1000);
  b.append(b.data() + 5, 5); // no growth
  CHECK(b.view() == "0123456789012345678956789");
  b.assign(b.view().substr(10, 5)); // overlapping, no growth
  CHECK(b.view() == "01234");
  CHECK(padded(b)); // the old content after the new end is padding now
  wandura::response_body small;
  small.assign("abc");
  small.assign(small.view()); // the same bytes onto themselves
  CHECK(small.view() == "abc");
  std::string big(300, 'x');
  small.append(big.data(), big.size());
  small.assign(small.view().substr(1)); // shrinking assign from its own content
  CHECK(small.view() == "bc" + big);
  CHECK(padded(small));
}

TEST_CASE("trim_ows: spaces and tabs around a header value go, everything else stays") {
  static_assert(wandura::trim_ows(" \t 2 \t") == "2");
  CHECK(wandura::trim_ows("") == "");
  CHECK(wandura::trim_ows(" \t ") == "");
  CHECK(wandura::trim_ows("a b") == "a b");
  CHECK(wandura::trim_ows("\r1\n") == "\r1\n"); // CR and LF are not optional white space
}
