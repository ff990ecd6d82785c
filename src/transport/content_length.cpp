#include "transport/content_length.hpp"

#include <charconv>
#include <limits>
#include <system_error>

#include "wandura/transport/http_response.hpp"

namespace wandura::detail {

std::optional<std::uint64_t> parse_content_length(std::string_view value) noexcept {
  constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()); // curl_off_t
  std::optional<std::uint64_t> length;
  for (;;) { // one list element per turn, each turn consumes it and its comma: bounded by the value's size
    auto const comma = value.find(',');
    auto const element = trim_ows(value.substr(0, comma));
    std::uint64_t n = 0;
    // from_chars takes digits only for an unsigned type: no sign, no white space, no "0x".
    auto const [end, ec] = std::from_chars(element.data(), element.data() + element.size(), n);
    if (element.empty() || ec != std::errc() || end != element.data() + element.size() || n > most ||
        (length && *length != n)) {
      return std::nullopt;
    }
    length = n;
    if (comma == std::string_view::npos) {
      return length;
    }
    value.remove_prefix(comma + 1);
  }
}

} // namespace wandura::detail
