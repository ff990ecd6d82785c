// libFuzzer target: the flat error body reader the retry loop uses on every non-2xx response
// (`detail::parse_error_body`, src/resilience/error_body.hpp). It is tolerant: whatever the bytes, it must return
// (never throw or crash), read the same bytes the same way every time, and give back only text that was in them.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "resilience/error_body.hpp"

namespace {

void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

/// A field read from the body is empty or, unescaped, at most as long as the body.
void expect_bounded(std::string const& field, std::size_t size) {
  expect(field.size() <= size);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  wandura::response_body body;
  body.assign(std::string_view(reinterpret_cast<char const*>(data), size));
  auto const first = wandura::detail::parse_error_body(body);
  auto const again = wandura::detail::parse_error_body(body);
  expect(first.error_code == again.error_code && first.reason == again.reason && first.message == again.message &&
         first.request_id == again.request_id);
  expect_bounded(first.error_code, size);
  expect_bounded(first.reason, size);
  expect_bounded(first.message, size);
  expect_bounded(first.request_id, size);
  return 0;
}
