// libFuzzer target: the flat error body reader (`response_parser::parse_error_body`).
#include "response_readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  wandura::fuzz::check_reader<wandura::error_body>(
      data, size, [](auto& parser, auto const& in, auto& out) { return parser.parse_error_body(in, out); });
  return 0;
}
