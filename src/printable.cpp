#include "wandura/detail/printable.hpp"

namespace wandura::detail {

void append_printable(std::string& out, std::string_view text, std::size_t max_bytes) {
  constexpr std::string_view hex = "0123456789abcdef";
  for (char const c : text.substr(0, max_bytes)) {
    auto const byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F) {
      out.append("\\x").append(1, hex[byte >> 4U]).append(1, hex[byte & 0xFU]);
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > max_bytes) {
    out.append("...");
  }
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  append_printable(out, text, max_bytes);
  return out;
}

} // namespace wandura::detail
