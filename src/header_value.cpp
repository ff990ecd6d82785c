#include "wandura/detail/header_value.hpp"

#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"

#include <string>

namespace wandura::detail {

std::optional<std::size_t> find_forbidden_header_byte(std::string_view value) noexcept {
  // One comparison per byte in the usual case (every byte of a header value is a space or above); checked on every
  // request.
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto const c = static_cast<unsigned char>(value[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7F) {
      return i;
    }
  }
  return std::nullopt;
}

std::string header_value_refusal(std::string_view name, std::string_view value) {
  auto const at = find_forbidden_header_byte(value);
  if (!at) {
    return {};
  }
  std::string message = "header ";
  message.append(name).append(": value holds ");
  switch (char const byte = value[*at]) {
  case '\r': message.append("a carriage return (CR)"); break;
  case '\n': message.append("a line feed (LF)"); break;
  case '\0': message.append("a NUL"); break;
  default:
    message.append("a control byte (");
    append_printable(message, std::string_view(&byte, 1)); // the one byte, as \xHH
    message.append(")");
  }
  message.append(" at byte ").append(std::to_string(*at));
  return message;
}

void check_header_value(std::string_view name, std::string_view value) {
  if (std::string message = header_value_refusal(name, value); !message.empty()) {
    throw error(errc::invalid_argument, message.append("; refused, nothing sent"));
  }
}

} // namespace wandura::detail
