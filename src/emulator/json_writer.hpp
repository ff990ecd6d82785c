// A minimal JSON text builder that appends to one std::string: no DOM, no allocation beyond the string's growth.
// Strings are escaped per RFC 8259 (quote, backslash, control characters as \u00XX); invalid UTF-8 is passed through
// unchanged, as the emulator only echoes what it was sent.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace wandura::emulator::detail {

class json_writer {
public:
  explicit json_writer(std::string& out) : out_(out) {}

  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  /// Writes `"name":`; the next value call writes the value.
  json_writer& key(std::string_view name) {
    separate();
    append_string(name);
    out_.push_back(':');
    after_key_ = true;
    return *this;
  }
  json_writer& value(std::string_view s) {
    separate();
    append_string(s);
    return *this;
  }
  json_writer& value(char const* s) { return value(std::string_view(s)); }
  json_writer& value(bool b) {
    separate();
    out_.append(b ? "true" : "false");
    return *this;
  }
  template <typename Integer>
  requires std::is_integral_v<Integer> &&(!std::is_same_v<Integer, bool>)json_writer& value(Integer n) {
    separate();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, n);
    out_.append(buf, r.ptr);
    return *this;
  }
  json_writer& value(double d) {
    separate();
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    out_.append(buf, r.ptr);
    return *this;
  }
  /// Appends already-serialised JSON as the next value.
  json_writer& raw(std::string_view json) {
    separate();
    out_.append(json);
    return *this;
  }

  template <typename T> json_writer& field(std::string_view name, T const& v) { return key(name).value(v); }

  static void append_string(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out.push_back('"');
    std::size_t run = 0;
    std::size_t i = 0;
    // Fast path, 8 bytes at a time: skip words with no quote, backslash or control byte (SWAR, "has zero byte").
    constexpr std::uint64_t ones = 0x0101010101010101ull;
    constexpr std::uint64_t highs = 0x8080808080808080ull;
    auto has_zero = [](std::uint64_t w) { return (w - ones) & ~w & highs; };
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      std::uint64_t special =
          has_zero(w ^ (ones * '"')) | has_zero(w ^ (ones * '\\')) | ((w - ones * 0x20) & ~w & highs);
      if (special != 0) {
        break;
      }
    }
    for (; i < s.size(); ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (!needs_escape(c)) {
        continue;
      }
      out.append(s.data() + run, i - run);
      run = i + 1;
      switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      default:
        out.append("\\u00");
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 0xF]);
      }
    }
    out.append(s.data() + run, s.size() - run);
    out.push_back('"');
  }

private:
  static constexpr bool needs_escape(unsigned char c) noexcept { return c < 0x20 || c == '"' || c == '\\'; }

  json_writer& open(char c) {
    separate();
    out_.push_back(c);
    first_ = true;
    return *this;
  }
  json_writer& close(char c) {
    out_.push_back(c);
    first_ = false;
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) {
      out_.push_back(',');
    }
    first_ = false;
  }
  void append_string(std::string_view s) { append_string(out_, s); }

  std::string& out_;
  bool first_ = true;
  bool after_key_ = false;
};

} // namespace wandura::emulator::detail
