// libFuzzer target: the ticket batch reader (`response_parser::parse_ticket_batch`).
#include "response_readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  wandura::fuzz::check_reader<wandura::ticket_batch_result>(
      data, size, [](auto& parser, auto const& in, auto& out) { return parser.parse_ticket_batch(in, out); });
  return 0;
}
