// Shared body of the response-reader fuzz targets: every reader must complete with success or
// `errc::invalid_response` and a message, never crash, and read the same bytes the same way whether they come as
// a `std::string_view` (copied into the parser's scratch) or a `response_body` (parsed in place), and whether the
// output object is fresh or holds a previous result (the reuse path).
#pragma once

#include "playback/response_parser.hpp"
#include "wandura/error.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace wandura::fuzz {

/// Aborts (a finding for libFuzzer) when `condition` is false.
inline void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

/// Runs `read(parser, view_or_body, out)` over `data` three ways and checks that they agree.
template <class Output, class Read> void check_reader(std::uint8_t const* data, std::size_t size, Read read) {
  std::string_view const text(reinterpret_cast<char const*>(data), size);
  detail::response_parser parser;

  Output fresh{};
  std::error_code const from_view = read(parser, text, fresh);
  expect(!from_view || from_view == errc::invalid_response);
  expect(!from_view || !parser.message().empty());

  response_body body;
  body.assign(text);
  Output in_place{};
  std::error_code const from_body = read(parser, body, in_place);
  expect(from_body == from_view);

  std::error_code const reused = read(parser, text, fresh); // `fresh` now holds the first result
  expect(reused == from_view);
}

} // namespace wandura::fuzz
