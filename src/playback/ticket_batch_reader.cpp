// The ticket batch reader: `POST /v1/playback/tickets` responses into `ticket_batch_result` (docs/protocol.md §1), on
// the hot path of every ticket call.
#include "playback/json_scan.hpp"

namespace wandura::detail {
namespace {

using namespace json_scan;

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
  item.detail.clear();
}

/// Which required fields of an item were there.
struct item_fields_seen {
  bool ticket = false;
  bool film = false;
  bool episode = false;
  bool intent = false;
  bool status = false;
};

/// Reads one field of an item into `item`; unknown fields (and the human-readable "error") are ignored.
bool read_item_field(reader& r, location const& where, std::size_t index, std::string_view key, od::value& value,
                     ticket_item_result& item, item_fields_seen& seen) {
  std::int64_t n = 0;
  switch (key_hash(key)) {
  case key_hash("film_ref"):
    if (is(key, "film_ref")) {
      seen.film = true;
      return r.string(value, where, key, item.film_ref);
    }
    break;
  case key_hash("episode_no"):
    if (is(key, "episode_no")) {
      if (!r.integer(value, where, key, 1, std::numeric_limits<std::int32_t>::max(), n)) {
        return false;
      }
      item.episode_no = static_cast<std::int32_t>(n);
      seen.episode = true;
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
      seen.intent = true;
      return true;
    }
    break;
  case key_hash("status"):
    if (is(key, "status")) {
      if (!r.integer(value, where, key, 100, 599, n)) {
        return false;
      }
      item.status = static_cast<int>(n);
      seen.status = true;
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
        seen.ticket = false;
        return not_null;
      }
      r.engage(item.ticket);
      seen.ticket = true;
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
}

/// After an item's fields: the required ones are there, and a ticket is present exactly when granted.
bool finish_item(reader& r, location const& where, item_fields_seen const& seen, ticket_item_result& item) {
  if (!seen.ticket) {
    r.drop(item.ticket);
  }
  if (!seen.film) {
    return r.fail_missing(where, "film_ref");
  }
  if (!seen.episode) {
    return r.fail_missing(where, "episode_no");
  }
  if (!seen.intent) {
    return r.fail_missing(where, "intent");
  }
  if (!seen.status) {
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

/// An item that could not be read is failed on its own (ticket_result.hpp, `unreadable_item`): its fields as far as
/// they were read, no ticket, and what was wrong in `detail`.
void fail_item(reader& r, std::string why, ticket_item_result& item) {
  r.drop(item.ticket);
  item.outcome = item_outcome::failed;
  item.error = make_error_code(errc::invalid_response);
  item.error_code = unreadable_item_code;
  item.detail = std::move(why);
}

/// Reads one element of `items`. A failure of the item's own (a field's type or range, a required field missing, a
/// ticket that does not match the status) fails that item alone and returns true; one of the document fails the
/// whole body and returns false.
bool read_item(reader& r, std::size_t index, od::value& v, ticket_item_result& item) {
  location const where{"items", index, true, {}};
  reset_item(item);
  std::string problem; // the first of the item's own failures
  od::object obj;
  if (!r.object(v, where, {}, obj)) {
    if (!r.failure_is_local()) {
      return false;
    }
    fail_item(r, r.take_message(), item);
    return true;
  }
  item_fields_seen seen;
  bool const ok = for_each_field(r, where, obj, [&](std::string_view key, od::value& value) {
    if (read_item_field(r, where, index, key, value, item, seen)) {
      return true;
    }
    if (!r.failure_is_local()) {
      return false;
    }
    std::string why = r.take_message();
    if (problem.empty()) {
      problem = std::move(why);
    }
    return true; // the item's other fields are still read: film, episode and intent match it to the request
  });
  if (!ok) {
    return false;
  }
  if (problem.empty() && !finish_item(r, where, seen, item)) {
    problem = r.take_message(); // finish_item fails only for the item's own rules
  }
  if (!problem.empty()) {
    fail_item(r, std::move(problem), item);
  }
  return true;
}

} // namespace

std::error_code response_parser::read_ticket_batch(simdjson::padded_string_view json, ticket_batch_result& out) {
  return json_scan::run(parser_, message_, &spare_tickets_, json, [&](reader& r, od::object& obj) {
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

} // namespace wandura::detail
