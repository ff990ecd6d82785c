#include "wandura/resilience/retry_event.hpp"

#include "wandura/detail/printable.hpp"

namespace wandura {

std::string format_retry_line(retry_event const& event) {
  std::string line = "retry ";
  line += std::to_string(event.retry);
  line += '/';
  line += std::to_string(event.max_retries);
  line += " in ";
  line += std::to_string(event.delay.count());
  line += " ms: ";
  if (event.error) {
    line += event.error.message();
  } else {
    line += "HTTP ";
    line += std::to_string(event.http_status);
    if (!event.error_code.empty()) {
      line += " code=";
      detail::append_printable(line, event.error_code); // the server's text: one line, bounded
    }
  }
  if (!event.target.empty()) { // after the documented part, so that the line still starts as it always has
    line += " (";
    line += event.target;
    line += ')';
  }
  return line;
}

} // namespace wandura
