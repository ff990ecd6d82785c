// libFuzzer target: the catalogue readers (film, open videos, one video, creatives) over the same bytes.
#include "response_readers.hpp"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  using wandura::fuzz::check_reader;
  check_reader<wandura::film>(data, size, [](auto& p, auto const& in, auto& out) { return p.parse_film(in, out); });
  check_reader<std::vector<wandura::video>>(data, size,
                                            [](auto& p, auto const& in, auto& out) { return p.parse_videos(in, out); });
  check_reader<wandura::video>(data, size, [](auto& p, auto const& in, auto& out) { return p.parse_video(in, out); });
  check_reader<std::vector<wandura::creative>>(
      data, size, [](auto& p, auto const& in, auto& out) { return p.parse_creatives(in, out); });
  return 0;
}
