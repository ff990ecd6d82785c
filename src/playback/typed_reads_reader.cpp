// The typed reads reader: config, film, videos and creatives responses into their values (docs/protocol.md §1
// endpoints).
#include <string>
#include <unordered_map>

#include "playback/json_scan.hpp"

namespace wandura::detail {
namespace {

using namespace json_scan;

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

std::error_code response_parser::read_org_config(simdjson::padded_string_view json, org_config& out) {
  return json_scan::run(parser_, message_, &spare_tickets_, json, [&](reader& r, od::object& obj) {
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
          out.limits.clear(); // a repeated key: the last one counts
          // Where each counter is in `out.limits`: a counter named twice keeps its place and takes the last value,
          // which `limit()` and the admission gate then both read (a linear search would be quadratic in a body of
          // many counters).
          std::unordered_map<std::string, std::size_t> place;
          location const where{"limits", 0, false, {}};
          return for_each_field(r, where, limits, [&](std::string_view counter, od::value& limit) {
            std::int64_t n = 0;
            if (!r.integer(limit, where, counter, 0, std::numeric_limits<std::int64_t>::max(), n)) {
              return false;
            }
            auto const [at, fresh] = place.try_emplace(std::string(counter), out.limits.size());
            if (fresh) {
              out.limits.push_back(counter_limit{at->first, n});
            } else {
              out.limits[at->second].per_minute = n;
            }
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
  return json_scan::run(parser_, message_, &spare_tickets_, json, [&](reader& r, od::object& obj) {
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
          if (type == od::json_type::null) {
            return true; // absent, as any optional field's null
          }
          if (type == od::json_type::array) {
            od::array list;
            if (!r.array(value, {}, key, list)) {
              return false;
            }
            std::int64_t count = 0;
            bool listed = for_each_element(r, "episodes", list, [&](std::size_t index, od::value& element) {
              // One episode each: an object (its fields are not read) or a number. Anything else is not an episode.
              od::json_type element_type{};
              location const at{"episodes", index, true, {}};
              if (auto e = element.type().get(element_type)) {
                return r.fail_json(at, {}, e);
              }
              if (element_type != od::json_type::object && element_type != od::json_type::number) {
                return r.fail_json(at, {}, simdjson::INCORRECT_TYPE, "an object or a number");
              }
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
  return json_scan::run(parser_, message_, &spare_tickets_, json, [&](reader& r, od::object& obj) {
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
      out.clear(); // a repeated key: the last one counts
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
  return json_scan::run(parser_, message_, &spare_tickets_, json,
                        [&](reader& r, od::object& obj) { return read_video_fields(r, {}, obj, out); });
}

std::error_code response_parser::read_creatives(simdjson::padded_string_view json, std::vector<creative>& out) {
  return json_scan::run(parser_, message_, &spare_tickets_, json, [&](reader& r, od::object& obj) {
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
      out.clear(); // a repeated key: the last one counts
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

} // namespace wandura::detail
