#include "resilience/error_body.hpp"

#include <simdjson.h>

namespace wandura::detail {

static_assert(body_padding == simdjson::SIMDJSON_PADDING,
              "response_body must keep exactly the padding simdjson reads past the end");

namespace {

/// Copies a string or a number field as text; anything else leaves `out` unchanged.
void read_text(simdjson::ondemand::value value, std::string& out) {
  simdjson::ondemand::json_type type{};
  if (value.type().get(type) != simdjson::SUCCESS) {
    return;
  }
  if (type == simdjson::ondemand::json_type::string) {
    std::string_view text;
    if (value.get_string().get(text) == simdjson::SUCCESS) {
      out.assign(text);
    }
  } else if (type == simdjson::ondemand::json_type::number) {
    std::string_view raw = value.raw_json_token();
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
      raw.remove_suffix(1);
    }
    out.assign(raw);
  }
}

} // namespace

error_body parse_error_body(response_body const& body) {
  error_body result;
  if (body.empty()) {
    return result;
  }
  // One parser per thread, reused; nothing suspends while it is in use.
  thread_local simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(body.data(), body.size(), body.capacity()).get(doc) != simdjson::SUCCESS) {
    return result;
  }
  simdjson::ondemand::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) {
    return result;
  }
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) {
      return result; // truncated or malformed: keep what was read
    }
    simdjson::ondemand::value value;
    if (field.value().get(value) != simdjson::SUCCESS) {
      return result;
    }
    if (key == "error_code") {
      read_text(value, result.error_code);
    } else if (key == "reason") {
      read_text(value, result.reason);
    } else if (key == "error") {
      read_text(value, result.message);
    } else if (key == "request_id") {
      read_text(value, result.request_id);
    }
  }
  return result;
}

} // namespace wandura::detail
