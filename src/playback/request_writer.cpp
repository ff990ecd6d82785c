#include "playback/request_writer.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>

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

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  if (!has_non_ascii(text) && !needs_escape_ascii(text)) { // the usual id or ref: copied as it is
    out.append(text);
    out.push_back('"');
    return;
  }
  std::size_t run_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto const c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      continue;
    }
    out.append(text.data() + run_start, i - run_start);
    run_start = i + 1;
    switch (c) {
    case '"': out.append("\\\""); break;
    case '\\': out.append("\\\\"); break;
    case '\b': out.append("\\b"); break;
    case '\f': out.append("\\f"); break;
    case '\n': out.append("\\n"); break;
    case '\r': out.append("\\r"); break;
    case '\t': out.append("\\t"); break;
    default: {
      char const escape[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
      out.append(escape, sizeof escape);
    }
    }
  }
  out.append(text.data() + run_start, text.size() - run_start);
  out.push_back('"');
}

std::error_code write_ticket_batch(ticket_batch const& batch, std::string& out, std::string* message) {
  out.clear();
  if (batch.episodes.empty()) {
    return refuse(message, "episodes is empty");
  }
  if (batch.episodes.size() > ticket_batch::max_episodes) {
    return refuse(message, "more than 3 episodes (" + std::to_string(batch.episodes.size()) + ")");
  }
  std::size_t bound = 96 + escaped_bound(batch.union_info) + escaped_bound(batch.drm_kek);
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
    bound += 64 + escaped_bound(e.film_ref);
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
    bound += 16 + escaped_bound(*batch.viewer_ref);
  }

  out.reserve(bound);
  out.append(R"({"episodes":[)");
  for (std::size_t i = 0; i < batch.episodes.size(); ++i) {
    auto const& e = batch.episodes[i];
    if (i != 0) {
      out.push_back(',');
    }
    out.append(R"({"film_ref":)");
    append_json_string(out, e.film_ref);
    out.append(R"(,"episode_no":)");
    char digits[16];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, e.episode_no);
    (void)ec; // 16 bytes always hold an int32
    out.append(digits, end);
    out.append(R"(,"intent":")");
    out.append(to_string(e.intent));
    out.append(R"("})");
  }
  out.append(R"(],"union_info":)");
  append_json_string(out, batch.union_info);
  out.append(R"(,"drm_kek":)");
  append_json_string(out, batch.drm_kek);
  if (batch.viewer_ref) {
    out.append(R"(,"viewer_ref":)");
    append_json_string(out, *batch.viewer_ref);
  }
  out.push_back('}');
  return {};
}

} // namespace wandura::detail
