// libFuzzer target: the `GET /v1/config` reader (`response_parser::parse_org_config`).
#include "response_readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  wandura::fuzz::check_reader<wandura::org_config>(
      data, size, [](auto& parser, auto const& in, auto& out) { return parser.parse_org_config(in, out); });
  return 0;
}
