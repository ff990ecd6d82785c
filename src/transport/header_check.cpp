#include "transport/header_check.hpp"

#include <array>
#include <cstdint>
#include <cstring>

#include "wandura/detail/header_value.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura::detail {
namespace {

constexpr std::array<bool, 256> token_chars = [] {
  std::array<bool, 256> table{};
  for (char c = '0'; c <= '9'; ++c) {
    table[static_cast<unsigned char>(c)] = true;
  }
  for (char c = 'a'; c <= 'z'; ++c) {
    table[static_cast<unsigned char>(c)] = true;
    table[static_cast<unsigned char>(c - 'a' + 'A')] = true;
  }
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) {
    table[static_cast<unsigned char>(c)] = true;
  }
  return table;
}();

} // namespace

bool is_header_name(std::string_view name) noexcept {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    if (!token_chars[static_cast<unsigned char>(c)]) {
      return false;
    }
  }
  return true;
}

bool is_header_value(std::string_view value) noexcept {
  // Eight bytes at a time while no byte is below 0x20 or equal to 0x7F: `(w - 0x2020..) & ~w & 0x8080..` is non-zero
  // exactly when some byte of `w` is below 0x20, and `(x - 0x0101..) & ~x & 0x8080..` with `x = w ^ 0x7F7F..` when
  // some byte is 0x7F (bytes of 0x80 and above set neither). From the first word that may hold one (a tab is below
  // 0x20 too), the SDK's one byte-wise check of a header value decides. Checked on every request.
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t highs = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + sizeof(std::uint64_t) <= value.size(); i += sizeof(std::uint64_t)) {
    std::uint64_t word = 0;
    std::memcpy(&word, value.data() + i, sizeof word);
    std::uint64_t const del = word ^ (ones * 0x7FU);
    if (((((word - ones * 0x20U) & ~word) | ((del - ones) & ~del)) & highs) != 0) {
      break;
    }
  }
  return !find_forbidden_header_byte(value.substr(i));
}

std::string check_headers(std::vector<http_header> const& headers) {
  for (auto const& h : headers) {
    if (!is_header_name(h.name)) {
      // A name that is not a token is not echoed whole either: it may be a line the caller meant as a value.
      return "request header " + std::to_string(&h - headers.data()) + ": name is not an HTTP token";
    }
    if (iequals(h.name, "content-length") || iequals(h.name, "transfer-encoding")) {
      // Framing is the transport's, from the body: a caller's own would disagree with it (a `Content-Length: 0`
      // with a body makes the body a second request to the server: request smuggling).
      return "request header " + h.name + ": message framing is set by the transport from the body";
    }
    if (!is_header_value(h.value)) {
      return "request " + header_value_refusal(h.name, h.value); // names the byte, never the value
    }
  }
  return {};
}

} // namespace wandura::detail
