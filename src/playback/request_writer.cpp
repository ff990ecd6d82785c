#include "playback/request_writer.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <utility>

#include <simdjson.h>

#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

std::error_code refuse(std::string* message, std::string text) {
  if (message != nullptr) {
    *message = std::move(text);
  }
  return errc::invalid_argument;
}

std::string episode_path(std::size_t index, std::string_view field) {
  return "episodes[" + std::to_string(index) + "]." + std::string(field);
}

/// Upper bound of the escaped size of `text`, so that `out` grows once.
constexpr std::size_t escaped_bound(std::string_view text) noexcept {
  return text.size() * 6 + 2;
}

// Eight bytes at a time (SWAR): the short ASCII texts of a ticket batch (film refs, device ids, keys) are checked in
// a few steps instead of byte by byte or through a call into simdjson.
constexpr std::uint64_t ones = 0x0101010101010101ULL;
constexpr std::uint64_t highs = 0x8080808080808080ULL;

std::uint64_t load8(char const* p) noexcept {
  std::uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Bytes of `v` that are below `n` (n <= 128) get their high bit set; for bytes below 0x80 only, exactly.
constexpr std::uint64_t bytes_below(std::uint64_t v, std::uint8_t n) noexcept {
  return (v - ones * n) & ~v & highs;
}

/// Whether any byte of `text` is 0x80 or above.
bool has_non_ascii(std::string_view text) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    if ((load8(text.data() + i) & highs) != 0) {
      return true;
    }
  }
  for (; i < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) >= 0x80) {
      return true;
    }
  }
  return false;
}

/// Whether `text`, known to be ASCII, has a byte that JSON escapes: below 0x20, '"' or '\\'.
bool needs_escape_ascii(std::string_view text) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t const v = load8(text.data() + i);
    if ((bytes_below(v, 0x20) | bytes_below(v ^ (ones * '"'), 1) | bytes_below(v ^ (ones * '\\'), 1)) != 0) {
      return true;
    }
  }
  for (; i < text.size(); ++i) {
    auto const c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == '"' || c == '\\') {
      return true;
    }
  }
  return false;
}

} // namespace

bool is_valid_utf8(std::string_view text) noexcept {
  return !has_non_ascii(text) || simdjson::validate_utf8(text.data(), text.size());
}

namespace {

/// Writes the JSON string of `text` (valid UTF-8) at `p`, which has room for `escaped_bound(text)` bytes; returns
/// the end of what it wrote.
char* write_json_string(char* p, std::string_view text) noexcept {
  static constexpr char hex[] = "0123456789abcdef";
  *p++ = '"';
  if (!has_non_ascii(text) && !needs_escape_ascii(text)) { // the usual id or ref: copied as it is
    std::memcpy(p, text.data(), text.size());
    p += text.size();
    *p++ = '"';
    return p;
  }
  for (char const ch : text) {
    auto const c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != '"' && c != '\\') {
      *p++ = ch;
      continue;
    }
    *p++ = '\\';
    switch (c) {
    case '"': *p++ = '"'; break;
    case '\\': *p++ = '\\'; break;
    case '\b': *p++ = 'b'; break;
    case '\f': *p++ = 'f'; break;
    case '\n': *p++ = 'n'; break;
    case '\r': *p++ = 'r'; break;
    case '\t': *p++ = 't'; break;
    default: {
      char const escape[5] = {'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
      std::memcpy(p, escape, sizeof escape);
      p += sizeof escape;
    }
    }
  }
  *p++ = '"';
  return p;
}

/// Copies `text` to `p`; returns its end.
char* write_raw(char* p, std::string_view text) noexcept {
  std::memcpy(p, text.data(), text.size());
  return p + text.size();
}

} // namespace

void append_json_string(std::string& out, std::string_view text) {
  auto const size = out.size();
  out.resize(size + escaped_bound(text));
  char* const end = write_json_string(out.data() + size, text);
  out.resize(static_cast<std::size_t>(end - out.data()));
}

std::error_code check_ticket_batch(ticket_batch const& batch, std::string* message) {
  if (batch.episodes.empty()) {
    return refuse(message, "episodes is empty");
  }
  if (batch.episodes.size() > ticket_batch::max_episodes) {
    return refuse(message, "more than 3 episodes (" + std::to_string(batch.episodes.size()) + ")");
  }
  for (std::size_t i = 0; i < batch.episodes.size(); ++i) {
    auto const& e = batch.episodes[i];
    if (e.film_ref.empty()) {
      return refuse(message, episode_path(i, "film_ref") + " is empty");
    }
    if (!is_valid_utf8(e.film_ref)) {
      return refuse(message, episode_path(i, "film_ref") + " is not valid UTF-8");
    }
    if (e.episode_no < 1) {
      return refuse(message, episode_path(i, "episode_no") + " is below 1");
    }
    if (e.intent != intent::play && e.intent != intent::prefetch) {
      return refuse(message, episode_path(i, "intent") + " is neither play nor prefetch");
    }
    // One outcome per episode: the same episode asked twice with one intent would have the server issue (and count)
    // a ticket for each, of which the ticket store keeps one.
    for (std::size_t j = 0; j < i; ++j) {
      auto const& earlier = batch.episodes[j];
      if (earlier.episode_no == e.episode_no && earlier.intent == e.intent && earlier.film_ref == e.film_ref) {
        return refuse(message, "episodes[" + std::to_string(i) + "] repeats episodes[" + std::to_string(j) + "]");
      }
    }
  }
  if (batch.union_info.empty()) {
    return refuse(message, "union_info is empty");
  }
  if (!is_valid_utf8(batch.union_info)) {
    return refuse(message, "union_info is not valid UTF-8");
  }
  if (batch.drm_kek.empty()) {
    return refuse(message, "drm_kek is empty");
  }
  if (!is_valid_utf8(batch.drm_kek)) {
    return refuse(message, "drm_kek is not valid UTF-8");
  }
  if (batch.viewer_ref) {
    if (batch.viewer_ref->empty()) {
      return refuse(message, "viewer_ref is empty (leave it unset instead)");
    }
    if (!is_valid_utf8(*batch.viewer_ref)) {
      return refuse(message, "viewer_ref is not valid UTF-8");
    }
  }
  return {};
}

void write_checked_ticket_batch(ticket_batch const& batch, std::span<std::size_t const> episodes, std::string& out) {
  std::size_t bound = 96 + escaped_bound(batch.union_info) + escaped_bound(batch.drm_kek) +
                      (batch.viewer_ref ? 16 + escaped_bound(*batch.viewer_ref) : 0);
  for (std::size_t const i : episodes) {
    bound += 64 + escaped_bound(batch.episodes[i].film_ref);
  }
  // Written through a pointer into storage sized once for the longest escaping: no capacity check per piece.
  out.resize(bound);
  char* p = write_raw(out.data(), R"({"episodes":[)");
  bool first = true;
  for (std::size_t const i : episodes) {
    auto const& e = batch.episodes[i];
    if (!std::exchange(first, false)) {
      *p++ = ',';
    }
    p = write_raw(p, R"({"film_ref":)");
    p = write_json_string(p, e.film_ref);
    p = write_raw(p, R"(,"episode_no":)");
    p = std::to_chars(p, p + 16, e.episode_no).ptr; // 16 bytes always hold an int32
    p = write_raw(p, R"(,"intent":")");
    p = write_raw(p, to_string(e.intent));
    p = write_raw(p, R"("})");
  }
  p = write_raw(p, R"(],"union_info":)");
  p = write_json_string(p, batch.union_info);
  p = write_raw(p, R"(,"drm_kek":)");
  p = write_json_string(p, batch.drm_kek);
  if (batch.viewer_ref) {
    p = write_raw(p, R"(,"viewer_ref":)");
    p = write_json_string(p, *batch.viewer_ref);
  }
  *p++ = '}';
  out.resize(static_cast<std::size_t>(p - out.data()));
}

std::error_code write_ticket_batch(ticket_batch const& batch, std::string& out, std::string* message) {
  out.clear();
  if (auto ec = check_ticket_batch(batch, message)) {
    return ec;
  }
  std::array<std::size_t, ticket_batch::max_episodes> all{};
  for (std::size_t i = 0; i < batch.episodes.size(); ++i) {
    all[i] = i;
  }
  write_checked_ticket_batch(batch, std::span<std::size_t const>(all.data(), batch.episodes.size()), out);
  return {};
}

} // namespace wandura::detail
