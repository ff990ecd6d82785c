// JSON text for the demo's own files: a string literal of `text` (quotes, backslashes and control characters escaped),
// for the demo's own files: the plan (`--plan-out`) and the workers' reports.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace demo {

inline std::string json_quoted(std::string_view text) {
  std::string out = "\"";
  for (char const c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The shortest text that reads back as the same double (17 significant digits).
inline std::string json_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

} // namespace demo
