// libFuzzer target: `detail::checked_base_url`. An accepted URL is http(s), has no query, fragment or userinfo,
// no trailing slash, and is a fixed point (checking it again returns it unchanged). A refusal is always
// `errc::invalid_argument`, and when the URL holds an `@` (where userinfo would be) the message quotes none of it.
#include "wandura/detail/base_url.hpp"
#include "wandura/error.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void expect(bool condition) {
  if (!condition) {
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string_view const url(reinterpret_cast<char const*>(data), size);
  try {
    std::string const base = wandura::detail::checked_base_url(url);
    expect(base.starts_with("http://") || base.starts_with("https://"));
    expect(base.find_first_of("?#@") == std::string::npos);
    expect(base.back() != '/');
    expect(wandura::detail::checked_base_url(base) == base);
  } catch (wandura::error const& e) {
    expect(e.code() == wandura::errc::invalid_argument);
    if (url.find('@') != std::string_view::npos) {
      expect(std::string_view(e.what()).find('@') == std::string_view::npos);
    }
  }
  return 0;
}
