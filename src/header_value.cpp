#include "wandura/detail/header_value.hpp"

#include "wandura/error.hpp"

#include <string>

namespace wandura::detail {

std::optional<std::size_t> find_forbidden_header_byte(std::string_view value) noexcept {
  // One comparison per byte in the usual case (every byte of a header value is above CR); checked on every request.
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto const c = static_cast<unsigned char>(value[i]);
    if (c <= '\r' && (c == '\r' || c == '\n' || c == '\0')) {
      return i;
    }
  }
  return std::nullopt;
}

void check_header_value(std::string_view name, std::string_view value) {
  auto const at = find_forbidden_header_byte(value);
  if (!at) {
    return;
  }
  char const byte = value[*at];
  std::string_view const kind = byte == '\r' ? "a carriage return (CR)" : byte == '\n' ? "a line feed (LF)" : "a NUL";
  std::string message = "header ";
  message.append(name).append(": value holds ").append(kind);
  message.append(" at byte ").append(std::to_string(*at)).append("; refused, nothing sent");
  throw error(errc::invalid_argument, message);
}

} // namespace wandura::detail
