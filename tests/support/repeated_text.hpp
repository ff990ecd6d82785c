// Test helper: a text repeated, for bodies and replies of a chosen size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace test_support {

/// `text` written `times` times in a row.
inline std::string repeated(std::string_view text, std::size_t times) {
  std::string out;
  out.reserve(text.size() * times);
  for (std::size_t i = 0; i < times; ++i) {
    out += text;
  }
  return out;
}

} // namespace test_support
