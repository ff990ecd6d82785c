#include "wandura/playback/detail/response_parser.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "wandura/error.hpp"

namespace wandura::detail {
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

  bool fail(std::string text) {
    message_ = std::move(text);
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
    case simdjson::UTF8_ERROR: return fail(prefix + "invalid UTF-8");
    case simdjson::STRING_ERROR: return fail(prefix + "malformed string");
    case simdjson::DEPTH_ERROR: return fail(prefix + "nested too deeply");
    default: return fail(prefix + "truncated or malformed JSON (" + simdjson::error_message(e) + ")");
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
};

/// Calls `on_field(key, value)` for every field of `obj`; stops at the first failure.
template <class OnField> bool for_each_field(reader& r, location const& where, od::object& obj, OnField&& on_field) {
  for (auto field_result : obj) {
    if (auto e = field_result.error()) {
      return r.fail_json(where, {}, e);
    }
    od::field& field = field_result.value_unsafe(); // checked above; no copy of the field

    // The key is read in place, without scanning it: it ends at the last quote before the ':' that precedes the
    // value (stage 1 and the object iterator proved that shape). Keys are matched as written; the API's keys never
    // use escapes, and a key spelled with them reads as unknown.
    char const* const key_begin = field.key().raw();
    char const* end = field.value().raw_json_token().data() - 1;
    while (is_json_space(*end)) {
      --end;
    }
    --end; // the ':'
    while (is_json_space(*end)) {
      --end;
    }
    std::string_view const key(key_begin, static_cast<std::size_t>(end - key_begin));
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

bool read_ticket(reader& r, location const& where, od::value& v, ticket& out) {
  od::object obj;
  if (!r.object(v, where, {}, obj)) {
    return false;
  }
  // Cleared field by field, so that a reused result keeps its strings' capacity.
  out.ticket_id.clear();
  out.manifest_url.clear();
  out.license_url.clear();
  out.expires_at = {};
  out.expires_at_text.clear();
  out.drm_payload.clear();
  bool has_expires = false;
  bool ok = for_each_field(r, where, obj, [&](std::string_view key, od::value& value) {
    switch (key_hash(key)) {
    case key_hash("ticket_id"):
      if (is(key, "ticket_id")) {
        return r.string(value, where, key, out.ticket_id);
      }
      break;
    case key_hash("manifest_url"):
      if (is(key, "manifest_url")) {
        return r.string(value, where, key, out.manifest_url);
      }
      break;
    case key_hash("license_url"):
      if (is(key, "license_url")) {
        return r.string(value, where, key, out.license_url);
      }
      break;
    case key_hash("drm_payload"):
      if (is(key, "drm_payload")) {
        return r.string(value, where, key, out.drm_payload);
      }
      break;
    case key_hash("expires_at"):
      if (is(key, "expires_at")) {
        if (!r.string(value, where, key, out.expires_at_text)) {
          return false;
        }
        if (out.expires_at_text.empty()) {
          return true; // null: reported as missing below
        }
        auto when = parse_rfc3339(out.expires_at_text);
        if (!when) {
          return r.fail(where.path(key) + ": not an RFC 3339 date-time within the clock's range");
        }
        out.expires_at = *when;
        has_expires = true;
        return true;
      }
      break;
    default: break;
    }
    return true; // unknown field: ignored
  });
  if (!ok) {
    return false;
  }
  if (out.ticket_id.empty()) {
    return r.fail_missing(where, "ticket_id");
  }
  if (!has_expires) {
    return r.fail_missing(where, "expires_at");
  }
  return true;
}

/// Resets every field but keeps the strings' capacity, for reuse of a result object.
void reset_item(ticket_item_result& item) noexcept {
  item.film_ref.clear();
  item.episode_no = 0;
  item.intent = intent::play;
  item.intent_text.clear();
  item.outcome = item_outcome::failed;
  item.status = 0;
  item.reused = false;
  item.error_code.clear();
  item.reason.clear();
  item.retry_after.reset();
  item.error = {};
}

bool read_item(reader& r, std::size_t index, od::value& v, ticket_item_result& item) {
  location const where{"items", index, true, {}};
  od::object obj;
  if (!r.object(v, where, {}, obj)) {
    return false;
  }
  reset_item(item);
  bool has_ticket = false;
  bool has_film = false;
  bool has_episode = false;
  bool has_intent = false;
  bool has_status = false;
  bool ok = for_each_field(r, where, obj, [&](std::string_view key, od::value& value) {
    std::int64_t n = 0;
    switch (key_hash(key)) {
    case key_hash("film_ref"):
      if (is(key, "film_ref")) {
        has_film = true;
        return r.string(value, where, key, item.film_ref);
      }
      break;
    case key_hash("episode_no"):
      if (is(key, "episode_no")) {
        if (!r.integer(value, where, key, 1, std::numeric_limits<std::int32_t>::max(), n)) {
          return false;
        }
        item.episode_no = static_cast<std::int32_t>(n);
        has_episode = true;
        return true;
      }
      break;
    case key_hash("intent"):
      if (is(key, "intent")) {
        if (!r.string(value, where, key, item.intent_text)) {
          return false;
        }
        item.intent = intent_from_string(item.intent_text);
        if (item.intent != intent::other) {
          item.intent_text.clear();
        }
        has_intent = true;
        return true;
      }
      break;
    case key_hash("status"):
      if (is(key, "status")) {
        if (!r.integer(value, where, key, 100, 599, n)) {
          return false;
        }
        item.status = static_cast<int>(n);
        has_status = true;
        return true;
      }
      break;
    case key_hash("reused"):
      if (is(key, "reused")) {
        return r.boolean(value, where, key, item.reused);
      }
      break;
    case key_hash("ticket"):
      if (is(key, "ticket")) {
        bool not_null = true;
        if (r.is_null(value, where, key, not_null) || !not_null) {
          has_ticket = false;
          return not_null;
        }
        r.engage(item.ticket);
        has_ticket = true;
        return read_ticket(r, location{"items", index, true, "ticket"}, value, *item.ticket);
      }
      break;
    case key_hash("error_code"):
      if (is(key, "error_code")) {
        return r.string_or_integer(value, where, key, item.error_code);
      }
      break;
    case key_hash("reason"):
      if (is(key, "reason")) {
        return r.string(value, where, key, item.reason);
      }
      break;
    case key_hash("retry_after"):
      if (is(key, "retry_after")) {
        return r.seconds(value, where, key, item.retry_after);
      }
      break;
    default: break;
    }
    return true; // unknown field (or the human-readable "error"): ignored
  });
  if (!ok) {
    return false;
  }
  if (!has_ticket) {
    r.drop(item.ticket);
  }
  if (!has_film) {
    return r.fail_missing(where, "film_ref");
  }
  if (!has_episode) {
    return r.fail_missing(where, "episode_no");
  }
  if (!has_intent) {
    return r.fail_missing(where, "intent");
  }
  if (!has_status) {
    return r.fail_missing(where, "status");
  }
  auto const c = classify_item(item.status, item.error_code, item.reason, item.intent);
  item.outcome = c.outcome;
  item.error = c.error;
  if (item.outcome == item_outcome::granted) {
    if (!item.ticket) {
      return r.fail(where.path({}) + ": status " + std::to_string(item.status) + " without a ticket");
    }
  } else {
    r.drop(item.ticket); // a ticket is present exactly when granted
  }
  return true;
}

bool read_video_fields(reader& r, location const& where, od::object& obj, video& out) {
  out = video{};
  bool ok = for_each_field(r, where, obj, [&](std::string_view key, od::value& value) {
    switch (key_hash(key)) {
    case key_hash("video_ref"):
      if (is(key, "video_ref")) {
        return r.string_or_integer(value, where, key, out.video_ref);
      }
      break;
    case key_hash("title"):
      if (is(key, "title")) {
        return r.string(value, where, key, out.title);
      }
      break;
    case key_hash("url"):
      if (is(key, "url")) {
        return r.string(value, where, key, out.url);
      }
      break;
    default: break;
    }
    return true;
  });
  if (ok && out.video_ref.empty()) {
    return r.fail_missing(where, "video_ref");
  }
  return ok;
}

bool read_video_object(reader& r, location const& where, od::value& v, video& out) {
  od::object obj;
  return r.object(v, where, {}, obj) && read_video_fields(r, where, obj, out);
}

bool read_creative_object(reader& r, location const& where, od::value& v, creative& out) {
  od::object obj;
  if (!r.object(v, where, {}, obj)) {
    return false;
  }
  out = creative{};
  bool ok = for_each_field(r, where, obj, [&](std::string_view key, od::value& value) {
    switch (key_hash(key)) {
    case key_hash("creative_id"):
      if (is(key, "creative_id")) {
        return r.string_or_integer(value, where, key, out.creative_id);
      }
      break;
    case key_hash("url"):
      if (is(key, "url")) {
        return r.string(value, where, key, out.url);
      }
      break;
    default: break;
    }
    return true;
  });
  if (ok && out.creative_id.empty()) {
    return r.fail_missing(where, "creative_id");
  }
  return ok;
}

} // namespace

simdjson::padded_string_view response_parser::padded(std::string_view body) {
  scratch_.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  scratch_.assign(body.data(), body.size());
  return simdjson::padded_string_view(scratch_.data(), scratch_.size(), scratch_.capacity());
}

template <class Reader> std::error_code response_parser::run(simdjson::padded_string_view json, Reader&& read) {
  message_.clear();
  // One search of the whole body instead of one per string: API bodies rarely escape anything.
  bool const escapes = std::memchr(json.data(), '\\', json.length()) != nullptr;
  reader r(message_, &spare_tickets_, escapes);
  od::document doc;
  if (auto e = parser_.iterate(json).get(doc)) {
    if (e == simdjson::EMPTY) {
      r.fail("empty body");
    } else {
      r.fail_json({}, {}, e);
    }
    return errc::invalid_response;
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    if (e == simdjson::INCORRECT_TYPE || e == simdjson::SCALAR_DOCUMENT_AS_VALUE) {
      r.fail("not a JSON object");
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
    r.fail("trailing content after the JSON object");
    return errc::invalid_response;
  }
  return {};
}

simdjson::padded_string_view response_parser::padded(response_body const& body) noexcept {
  return simdjson::padded_string_view(body.data(), body.size(), body.capacity());
}

std::error_code response_parser::read_ticket_batch(simdjson::padded_string_view json, ticket_batch_result& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out.request_id.clear();
    std::size_t count = 0; // items read; earlier items of `out` are reused in place, the rest dropped at the end
    bool has_items = false;
    bool ok = for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      switch (key_hash(key)) {
      case key_hash("request_id"):
        if (is(key, "request_id")) {
          return r.string(value, {}, key, out.request_id);
        }
        break;
      case key_hash("items"):
        if (is(key, "items")) {
          od::array items;
          if (!r.array(value, {}, key, items)) {
            return false;
          }
          has_items = true;
          count = 0;
          return for_each_element(r, "items", items, [&](std::size_t index, od::value& element) {
            auto& item = index < out.items.size() ? out.items[index] : out.items.emplace_back();
            count = index + 1;
            return read_item(r, index, element, item);
          });
        }
        break;
      default: break; // the flat error fields of a non-200 batch, and anything newer
      }
      return true;
    });
    out.items.resize(count);
    if (ok && !has_items) {
      return r.fail_missing({}, "items");
    }
    return ok;
  });
}

std::error_code response_parser::read_error_body(simdjson::padded_string_view json, error_body& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out = error_body{};
    return for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      switch (key_hash(key)) {
      case key_hash("error"):
        if (is(key, "error")) {
          return r.string(value, {}, key, out.message);
        }
        break;
      case key_hash("error_code"):
        if (is(key, "error_code")) {
          return r.string_or_integer(value, {}, key, out.error_code);
        }
        break;
      case key_hash("reason"):
        if (is(key, "reason")) {
          return r.string(value, {}, key, out.reason);
        }
        break;
      case key_hash("request_id"):
        if (is(key, "request_id")) {
          return r.string(value, {}, key, out.request_id);
        }
        break;
      default: break;
      }
      return true;
    });
  });
}

std::error_code response_parser::read_org_config(simdjson::padded_string_view json, org_config& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out = org_config{};
    return for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      switch (key_hash(key)) {
      case key_hash("org_id"):
        if (is(key, "org_id")) {
          return r.string_or_integer(value, {}, key, out.org_id);
        }
        break;
      case key_hash("limits"):
        if (is(key, "limits")) {
          od::object limits;
          if (!r.object(value, {}, key, limits)) {
            return false;
          }
          location const where{"limits", 0, false, {}};
          return for_each_field(r, where, limits, [&](std::string_view counter, od::value& limit) {
            std::int64_t n = 0;
            if (!r.integer(limit, where, counter, 0, std::numeric_limits<std::int64_t>::max(), n)) {
              return false;
            }
            out.limits.push_back(counter_limit{std::string(counter), n});
            return true;
          });
        }
        break;
      default: break;
      }
      return true;
    });
  });
}

std::error_code response_parser::read_film(simdjson::padded_string_view json, film& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out = film{};
    bool ok = for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      switch (key_hash(key)) {
      case key_hash("film_ref"):
        if (is(key, "film_ref")) {
          return r.string(value, {}, key, out.film_ref);
        }
        break;
      case key_hash("title"):
        if (is(key, "title")) {
          return r.string(value, {}, key, out.title);
        }
        break;
      case key_hash("episodes"):
        if (is(key, "episodes")) {
          od::json_type type{};
          if (auto e = value.type().get(type)) {
            return r.fail_json({}, key, e);
          }
          if (type == od::json_type::array) {
            od::array list;
            if (!r.array(value, {}, key, list)) {
              return false;
            }
            std::int64_t count = 0;
            bool listed = for_each_element(r, "episodes", list, [&](std::size_t, od::value&) {
              ++count;
              return true;
            });
            if (!listed) {
              return false;
            }
            if (count > std::numeric_limits<std::int32_t>::max()) {
              return r.fail_range({}, key, "at most 2^31-1 episodes");
            }
            out.episode_count = static_cast<std::int32_t>(count);
            return true;
          }
          std::int64_t n = 0;
          if (!r.integer(value, {}, key, 0, std::numeric_limits<std::int32_t>::max(), n)) {
            return false;
          }
          out.episode_count = static_cast<std::int32_t>(n);
          return true;
        }
        break;
      default: break;
      }
      return true;
    });
    if (ok && out.film_ref.empty()) {
      return r.fail_missing({}, "film_ref");
    }
    return ok;
  });
}

std::error_code response_parser::read_videos(simdjson::padded_string_view json, std::vector<video>& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out.clear();
    bool has_list = false;
    bool ok = for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      if (!is(key, "videos")) {
        return true;
      }
      od::array list;
      if (!r.array(value, {}, key, list)) {
        return false;
      }
      has_list = true;
      return for_each_element(r, "videos", list, [&](std::size_t index, od::value& element) {
        return read_video_object(r, location{"videos", index, true, {}}, element, out.emplace_back());
      });
    });
    if (ok && !has_list) {
      return r.fail_missing({}, "videos");
    }
    return ok;
  });
}

std::error_code response_parser::read_video(simdjson::padded_string_view json, video& out) {
  return run(json, [&](reader& r, od::object& obj) { return read_video_fields(r, {}, obj, out); });
}

std::error_code response_parser::read_creatives(simdjson::padded_string_view json, std::vector<creative>& out) {
  return run(json, [&](reader& r, od::object& obj) {
    out.clear();
    bool has_list = false;
    bool ok = for_each_field(r, {}, obj, [&](std::string_view key, od::value& value) {
      if (!is(key, "creatives")) {
        return true;
      }
      od::array list;
      if (!r.array(value, {}, key, list)) {
        return false;
      }
      has_list = true;
      return for_each_element(r, "creatives", list, [&](std::size_t index, od::value& element) {
        return read_creative_object(r, location{"creatives", index, true, {}}, element, out.emplace_back());
      });
    });
    if (ok && !has_list) {
      return r.fail_missing({}, "creatives");
    }
    return ok;
  });
}

// The public overloads: a response_body is read in place, a string_view through the padded scratch copy.
std::error_code response_parser::parse_ticket_batch(response_body const& body, ticket_batch_result& out) {
  return read_ticket_batch(padded(body), out);
}
std::error_code response_parser::parse_ticket_batch(std::string_view body, ticket_batch_result& out) {
  return read_ticket_batch(padded(body), out);
}
std::error_code response_parser::parse_error_body(response_body const& body, error_body& out) {
  return read_error_body(padded(body), out);
}
std::error_code response_parser::parse_error_body(std::string_view body, error_body& out) {
  return read_error_body(padded(body), out);
}
std::error_code response_parser::parse_org_config(response_body const& body, org_config& out) {
  return read_org_config(padded(body), out);
}
std::error_code response_parser::parse_org_config(std::string_view body, org_config& out) {
  return read_org_config(padded(body), out);
}
std::error_code response_parser::parse_film(response_body const& body, film& out) {
  return read_film(padded(body), out);
}
std::error_code response_parser::parse_film(std::string_view body, film& out) {
  return read_film(padded(body), out);
}
std::error_code response_parser::parse_videos(response_body const& body, std::vector<video>& out) {
  return read_videos(padded(body), out);
}
std::error_code response_parser::parse_videos(std::string_view body, std::vector<video>& out) {
  return read_videos(padded(body), out);
}
std::error_code response_parser::parse_video(response_body const& body, video& out) {
  return read_video(padded(body), out);
}
std::error_code response_parser::parse_video(std::string_view body, video& out) {
  return read_video(padded(body), out);
}
std::error_code response_parser::parse_creatives(response_body const& body, std::vector<creative>& out) {
  return read_creatives(padded(body), out);
}
std::error_code response_parser::parse_creatives(std::string_view body, std::vector<creative>& out) {
  return read_creatives(padded(body), out);
}

} // namespace wandura::detail
