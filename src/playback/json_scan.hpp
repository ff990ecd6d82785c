// The scanning helpers shared by the response readers (the ticket batch reader and the typed reads reader):
// simdjson On Demand over a padded body, keys matched in O(1), failures described with their place in the document
// ("items[2].ticket.expires_at"), and the parse driver `response_parser::run`. Not public API.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "playback/response_parser.hpp"
#include "wandura/error.hpp"

namespace wandura::detail::json_scan {
// Internal linkage on purpose: each reader's file gets its own copy, which GCC then inlines into its few callers as
// it did when the readers were one file (an inline function with external linkage is not, and costs ~1k
// instructions per ticket batch).
namespace {

namespace od = simdjson::ondemand;
using json_error = simdjson::error_code;

[[nodiscard]] constexpr bool is_json_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/// A cheap code of a key (length, first and last byte), so that readers can `switch` on keys in O(1). Distinct for
/// the keys of each reader (a clash would be a duplicate `case`, a compile error); every case still compares the
/// full text, so unknown keys with a known code are ignored as they should be.
[[nodiscard]] constexpr std::uint32_t key_hash(std::string_view s) noexcept {
  if (s.empty()) {
    return 0;
  }
  return (static_cast<std::uint32_t>(s.size()) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(s.front())) << 8) |
         static_cast<unsigned char>(s.back());
}

/// `key == literal`, with the length known at compile time so that the comparison is inlined.
template <std::size_t N> [[nodiscard]] bool is(std::string_view key, char const (&literal)[N]) noexcept {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

/// Where in the document a reader is, for messages: "items[2].ticket.expires_at". Built only on failure.
struct location {
  std::string_view parent; // e.g. "items", "videos"; empty at the top level
  std::size_t index = 0;   // meaningful when has_index
  bool has_index = false;
  std::string_view child; // e.g. "ticket"; empty when none

  [[nodiscard]] std::string path(std::string_view field) const {
    std::string out;
    out.reserve(parent.size() + child.size() + field.size() + 24);
    out.append(parent);
    if (has_index) {
      out.push_back('[');
      out.append(std::to_string(index));
      out.push_back(']');
    }
    if (!child.empty()) {
      if (!out.empty()) {
        out.push_back('.');
      }
      out.append(child);
    }
    if (!field.empty()) {
      if (!out.empty()) {
        out.push_back('.');
      }
      out.append(field);
    }
    return out;
  }
};

/// The failure state shared by the readers of one call. Every reader returns false after calling one of these.
class reader {
public:
  /// @param escapes whether the document has a backslash anywhere: when it has none, no string needs unescaping
  ///        and none is searched for one.
  explicit reader(std::string& message, std::vector<ticket>* spare_tickets = nullptr, bool escapes = true) noexcept
      : message_(message), spare_tickets_(spare_tickets), escapes_(escapes) {}

  /// Engages `slot` with a ticket whose strings keep the capacity of one dropped earlier, when there is one.
  void engage(std::optional<ticket>& slot) {
    if (slot) {
      return;
    }
    if (spare_tickets_ != nullptr && !spare_tickets_->empty()) {
      slot.emplace(std::move(spare_tickets_->back()));
      spare_tickets_->pop_back();
    } else {
      slot.emplace();
    }
  }

  /// Empties `slot`, keeping its ticket's storage for a later `engage` (a few at most).
  void drop(std::optional<ticket>& slot) {
    if (!slot) {
      return;
    }
    if (spare_tickets_ != nullptr && spare_tickets_->size() < ticket_batch::max_episodes * 2) {
      spare_tickets_->push_back(std::move(*slot));
    }
    slot.reset();
  }

  /// A value that breaks the API's rules (a range, a required field, a date): the value's own failure.
  bool fail(std::string text) {
    message_ = std::move(text);
    local_ = true;
    return false;
  }

  /// Whether the last failure was one value's own (a wrong type, a number out of range or malformed, a bad escape,
  /// a rule of the API) rather than the document's: after such a failure the iterator is still at a token boundary
  /// (simdjson reads a scalar whole or not at all, and leaving an object part-read is allowed: its parent skips the
  /// rest), so a reader of one element of a list may record it for that element and go on.
  [[nodiscard]] bool failure_is_local() const noexcept { return local_; }
  /// The last failure's message, taken (the reader's message is empty after it).
  [[nodiscard]] std::string take_message() noexcept { return std::exchange(message_, {}); }

  /// A failure of the document as a whole (its structure, its encoding): nothing after it can be read.
  bool fail_document(std::string text) {
    message_ = std::move(text);
    local_ = false;
    return false;
  }

  /// A simdjson error found while reading `field` at `where`.
  bool fail_json(location const& where, std::string_view field, json_error e, std::string_view expected = {}) {
    std::string path = where.path(field);
    std::string const prefix = path.empty() ? std::string() : path + ": ";
    switch (e) {
    case simdjson::INCORRECT_TYPE:
      return fail(prefix + (expected.empty() ? std::string("wrong type") : "expected " + std::string(expected)));
    case simdjson::NUMBER_OUT_OF_RANGE: return fail(prefix + "number out of range");
    case simdjson::NUMBER_ERROR: return fail(prefix + "malformed number");
    case simdjson::STRING_ERROR: return fail(prefix + "malformed string");
    // The document's own failures: stage 1 checks UTF-8 for the whole body, and the rest is its structure.
    case simdjson::UTF8_ERROR: return fail_document(prefix + "invalid UTF-8");
    case simdjson::DEPTH_ERROR: return fail_document(prefix + "nested too deeply");
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      // simdjson's "document ended early": a body cut short, or (its message does not say so) one whose last token
      // does not close its first, as when something follows the top-level object: `{} x`.
      return fail_document(prefix + "truncated or malformed JSON (an object or array is not closed, or something "
                                    "follows the top-level object)");
    default: return fail_document(prefix + "truncated or malformed JSON (" + simdjson::error_message(e) + ")");
    }
  }

  bool fail_missing(location const& where, std::string_view field) {
    std::string path = where.path({});
    return fail(path.empty() ? "missing " + std::string(field) : path + ": missing " + std::string(field));
  }

  bool fail_range(location const& where, std::string_view field, std::string_view range) {
    return fail(where.path(field) + ": out of range (" + std::string(range) + ")");
  }

  /// True when `v` is JSON null (optional fields treat it as absent). Sets `ok` false on a structural error.
  bool is_null(od::value& v, location const& where, std::string_view field, bool& ok) {
    od::json_type type{};
    if (auto e = v.type().get(type)) {
      ok = fail_json(where, field, e);
      return false;
    }
    ok = true;
    return type == od::json_type::null;
  }

  /// A string copied into `out`; null reads as empty. Returns false (with the message set) on failure.
  ///
  /// Fast path: a string without escapes is copied straight from the input (its bytes were validated as UTF-8 by
  /// simdjson's first stage); only strings with a backslash go through simdjson's unescaping.
  bool string(od::value& v, location const& where, std::string_view field, std::string& out) {
    std::string_view token = v.raw_json_token();
    while (!token.empty() && is_json_space(token.back())) {
      token.remove_suffix(1);
    }
    if (token.size() >= 2 && token.front() == '"' && token.back() == '"') {
      auto const inner = token.substr(1, token.size() - 2);
      if (!escapes_ || std::memchr(inner.data(), '\\', inner.size()) == nullptr) {
        out.clear(); // then append: a plain copy into the kept capacity (assign checks for overlap)
        out.append(inner.data(), inner.size());
        return true;
      }
    } else if (!token.empty() && token.front() == 'n') {
      bool null = false;
      if (auto e = v.is_null().get(null)) {
        return fail_json(where, field, e, "a string");
      }
      if (!null) {
        return fail_json(where, field, simdjson::INCORRECT_TYPE, "a string");
      }
      out.clear();
      return true;
    }
    std::string_view text;
    if (auto e = v.get_string().get(text)) {
      return fail_json(where, field, e, "a string");
    }
    out.assign(text.data(), text.size());
    return true;
  }

  /// A string, or an integer kept as its decimal text (for `error_code` and ids). Null reads as empty.
  bool string_or_integer(od::value& v, location const& where, std::string_view field, std::string& out) {
    od::json_type type{};
    if (auto e = v.type().get(type)) {
      return fail_json(where, field, e);
    }
    if (type == od::json_type::number) {
      std::int64_t n = 0;
      if (auto e = v.get_int64().get(n)) {
        return fail_json(where, field, e, "a string or an integer");
      }
      char buf[24];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
      (void)ec; // 24 bytes always hold an int64
      out.assign(buf, end);
      return true;
    }
    return string(v, where, field, out);
  }

  /// An integer in [lo, hi].
  ///
  /// Fast path: a token of 1 to 18 plain digits (a status, an episode number) is read in place. Anything else (a
  /// sign, a fraction, an exponent, a leading zero, a longer number, another type) goes through simdjson, which
  /// reads it or says exactly what is wrong.
  bool integer(od::value& v, location const& where, std::string_view field, std::int64_t lo, std::int64_t hi,
               std::int64_t& out) {
    std::string_view const token = v.raw_json_token(); // up to the next structural character, spaces included
    std::size_t n = 0;
    std::int64_t value = 0;
    while (n < token.size() && n < 18 && token[n] >= '0' && token[n] <= '9') {
      value = value * 10 + (token[n] - '0');
      ++n;
    }
    bool const plain = n > 0 && (n == token.size() || is_json_space(token[n])) && (n == 1 || token[0] != '0');
    if (plain) {
      out = value;
    } else if (auto e = v.get_int64().get(out)) {
      return fail_json(where, field, e, "an integer");
    }
    if (out < lo || out > hi) {
      return fail_range(where, field, std::to_string(lo) + ".." + std::to_string(hi));
    }
    return true;
  }

  bool boolean(od::value& v, location const& where, std::string_view field, bool& out) {
    bool ok = true;
    if (is_null(v, where, field, ok) || !ok) {
      out = false;
      return ok;
    }
    if (auto e = v.get_bool().get(out)) {
      return fail_json(where, field, e, "true or false");
    }
    return true;
  }

  /// Seconds in [0, 10^7], integer or fraction (rounded up). Null reads as absent.
  bool seconds(od::value& v, location const& where, std::string_view field, std::optional<std::chrono::seconds>& out) {
    bool ok = true;
    if (is_null(v, where, field, ok) || !ok) {
      out.reset();
      return ok;
    }
    double s = 0;
    if (auto e = v.get_double().get(s)) {
      return fail_json(where, field, e, "a number of seconds");
    }
    if (!(s >= 0.0 && s <= 1e7)) {
      return fail_range(where, field, "0..10000000 s");
    }
    out = std::chrono::seconds(static_cast<std::int64_t>(std::ceil(s)));
    return true;
  }

  /// Opens `v` as an object; `what` names it in the message.
  bool object(od::value& v, location const& where, std::string_view field, od::object& out) {
    if (auto e = v.get_object().get(out)) {
      return fail_json(where, field, e, "an object");
    }
    return true;
  }

  /// Whether the document has a backslash anywhere (else no string or key needs unescaping).
  [[nodiscard]] bool may_have_escapes() const noexcept { return escapes_; }

  bool array(od::value& v, location const& where, std::string_view field, od::array& out) {
    if (auto e = v.get_array().get(out)) {
      return fail_json(where, field, e, "an array");
    }
    return true;
  }

private:
  std::string& message_;
  std::vector<ticket>* spare_tickets_;
  bool escapes_;
  bool local_ = false; ///< of the last failure: see failure_is_local
};

/// Calls `on_field(key, value)` for every field of `obj`; stops at the first failure.
template <class OnField> bool for_each_field(reader& r, location const& where, od::object& obj, OnField&& on_field) {
  for (auto field_result : obj) {
    if (auto e = field_result.error()) {
      return r.fail_json(where, {}, e);
    }
    od::field& field = field_result.value_unsafe(); // checked above; no copy of the field

    // The key is read in place, without scanning it: it ends at the last quote before the ':' that precedes the
    // value (stage 1 and the object iterator proved that shape). The API's keys never use escapes; one spelled with
    // them ("pl\u0061yback") means what it spells and is unescaped first, into the parser's string buffer (only in
    // a document that has a backslash somewhere: one search of the body, made before).
    char const* const key_begin = field.key().raw();
    char const* end = field.value().raw_json_token().data() - 1;
    while (is_json_space(*end)) {
      --end;
    }
    --end; // the ':'
    while (is_json_space(*end)) {
      --end;
    }
    std::string_view key(key_begin, static_cast<std::size_t>(end - key_begin));
    if (r.may_have_escapes() && std::memchr(key.data(), '\\', key.size()) != nullptr) {
      // A key whose escapes do not unescape (`"x\q"`, a lone surrogate) names no field the reader knows: it keeps
      // its raw text and is skipped as any unknown key is, rather than failing the document. The failed unescape
      // leaves the iterator where it was.
      std::string_view unescaped;
      if (field.unescaped_key().get(unescaped) == simdjson::SUCCESS) {
        key = unescaped;
      }
    }
    if (!on_field(key, field.value())) {
      return false;
    }
  }
  return true;
}

/// Calls `on_element(index, value)` for every element of `arr`; stops at the first failure.
template <class OnElement>
bool for_each_element(reader& r, std::string_view name, od::array& arr, OnElement&& on_element) {
  std::size_t index = 0;
  for (auto element_result : arr) {
    if (auto e = element_result.error()) {
      return r.fail_json(location{name, index, true, {}}, {}, e);
    }
    od::value& element = element_result.value_unsafe(); // checked above; no copy of the value
    if (!on_element(index, element)) {
      return false;
    }
    ++index;
  }
  return true;
}

/// Parses `json` as one object and hands it to `read(reader&, object&)`; what a response_parser::parse_* does.
template <class Reader>
std::error_code run(simdjson::ondemand::parser& parser, std::string& message, std::vector<ticket>* spare_tickets,
                    simdjson::padded_string_view json, Reader&& read) {
  message.clear();
  // One search of the whole body instead of one per string: API bodies rarely escape anything.
  bool const escapes = std::memchr(json.data(), '\\', json.length()) != nullptr;
  reader r(message, spare_tickets, escapes);
  simdjson::ondemand::document doc;
  if (auto e = parser.iterate(json).get(doc)) {
    if (e == simdjson::EMPTY) {
      r.fail_document("empty body");
    } else {
      r.fail_json({}, {}, e);
    }
    return errc::invalid_response;
  }
  simdjson::ondemand::object obj;
  if (auto e = doc.get_object().get(obj)) {
    if (e == simdjson::INCORRECT_TYPE || e == simdjson::SCALAR_DOCUMENT_AS_VALUE) {
      r.fail_document("not a JSON object");
    } else {
      r.fail_json({}, {}, e);
    }
    return errc::invalid_response;
  }
  if (!read(r, obj)) {
    return errc::invalid_response;
  }
  char const* rest = nullptr;
  if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) {
    r.fail_document("trailing content after the JSON object");
    return errc::invalid_response;
  }
  return {};
}

} // namespace
} // namespace wandura::detail::json_scan
