// Configuration parsing (docs/protocol.md §4 file format and fault rules) and the demo catalogue.
#include "wandura/emulator/emulator.hpp"

#include "emulator/catalogue.hpp"
#include "emulator/service.hpp"

#include <simdjson.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

namespace wandura::emulator {

std::string_view to_string(counter c) noexcept {
  switch (c) {
  case counter::playback: return "playback";
  case counter::catalog: return "catalog";
  case counter::creatives: return "creatives";
  case counter::videos: return "videos";
  case counter::video: return "video";
  case counter::config: return "config";
  }
  return "unknown";
}

std::uint32_t limits::of(counter c) const noexcept {
  switch (c) {
  case counter::playback: return playback;
  case counter::catalog: return catalog;
  case counter::creatives: return creatives;
  case counter::videos: return videos;
  case counter::video: return video;
  case counter::config: return config;
  }
  return 0;
}

std::string_view to_string(fault_kind k) noexcept {
  switch (k) {
  case fault_kind::status: return "status";
  case fault_kind::delay: return "delay";
  case fault_kind::reset: return "reset";
  case fault_kind::drop_after_read: return "drop_after_read";
  case fault_kind::truncate: return "truncate";
  case fault_kind::garbage: return "garbage";
  case fault_kind::huge: return "huge";
  case fault_kind::slow_body: return "slow_body";
  case fault_kind::stale_db: return "stale_db";
  case fault_kind::unreadable_item: return "unreadable_item";
  }
  return "unknown";
}

namespace detail {

void check_fault_rule(fault_rule const& r, std::string const& where) {
  auto const fail_at = [&](char const* field, std::string_view what) {
    throw config_error(where + "." + field + ": " + std::string(what));
  };
  if (to_string(r.kind) == "unknown") {
    fail_at("kind", "not a fault kind");
  }
  if (r.status < 200 || r.status > 599) { // a 1xx is interim, never the answer to a request
    fail_at("status", "expected a final HTTP status (200-599)");
  }
  if (r.retry_after && *r.retry_after > 86400) {
    fail_at("retry_after", "must be at most 86400");
  }
  if (r.ms > 600000) {
    fail_at("ms", "must be at most 600000");
  }
  if (r.bytes > (std::uint64_t{1} << 30)) {
    fail_at("bytes", "must be at most 1073741824");
  }
  if (r.bytes_per_s == 0 || r.bytes_per_s > (std::uint64_t{1} << 30)) {
    fail_at("bytes_per_s", r.bytes_per_s == 0 ? "must be at least 1" : "must be at most 1073741824");
  }
  if (r.item > 1000) {
    fail_at("item", "must be at most 1000");
  }
  if (r.count && *r.count == 0) {
    fail_at("count", "must be at least 1 (leave `count` out for a rule that hits every matching request)");
  }
  if (r.probability && !(*r.probability >= 0.0 && *r.probability <= 1.0)) {
    fail_at("probability", "must be in [0,1]");
  }
}

void check_config(config const& cfg) {
  if (cfg.threads == 0) {
    throw config_error("threads: must be at least 1");
  }
  if (!(cfg.overshoot >= 0.0 && cfg.overshoot <= 1.0)) {
    throw config_error("overshoot: must be in [0,1]");
  }
  if (cfg.hold_window < std::chrono::milliseconds::zero() || cfg.hold_window > std::chrono::minutes(1)) {
    throw config_error("hold_window: must be 0-60000 ms");
  }
  // 0 is not "no timeout" (it would close every connection before its first reply), and a day is the most: far
  // past it, the deadline's arithmetic on the steady clock overflows into the past and does the same.
  if (cfg.idle_timeout < std::chrono::milliseconds(1) || cfg.idle_timeout > std::chrono::hours(24)) {
    throw config_error("idle_timeout: must be at least 1 ms and at most 86400000 ms (a day)");
  }
  if (cfg.ticket_ttl_s > 7 * 86400) { // far past it, expires_at wraps into the past
    throw config_error("ticket_ttl_s: must be at most 604800 (a week)");
  }
  for (std::size_t i = 0; i < cfg.films.size(); ++i) {
    std::string const where = "films[" + std::to_string(i) + "]";
    if (cfg.films[i].film_ref.empty()) {
      throw config_error(where + ".film_ref: missing or empty");
    }
    if (cfg.films[i].episodes == 0 || cfg.films[i].episodes > 100000) {
      throw config_error(where + ".episodes: a film has 1-100000 episodes");
    }
  }
  // Each film, organisation and key once: the server finds films and keys by name, and keeps each organisation's
  // idempotency keys and reusable tickets under its id, so two organisations of one id (two without one are both
  // `org_demo`) would answer each other's keys with each other's tickets.
  if (cfg.orgs.empty()) {
    throw config_error("orgs: at least one organisation is needed");
  }
  if (cfg.faults.size() > max_fault_rules) {
    throw config_error("faults: at most " + std::to_string(max_fault_rules) + " fault rules may be installed, not " +
                       std::to_string(cfg.faults.size()));
  }
  string_map<std::size_t> seen;
  for (std::size_t i = 0; i < cfg.films.size(); ++i) {
    if (auto const [at, fresh] = seen.emplace(cfg.films[i].film_ref, i); !fresh) {
      throw config_error("films[" + std::to_string(i) + "].film_ref: \"" + cfg.films[i].film_ref + "\" is films[" +
                         std::to_string(at->second) + "]'s too");
    }
  }
  seen.clear();
  for (std::size_t i = 0; i < cfg.orgs.size(); ++i) {
    if (auto const [at, fresh] = seen.emplace(cfg.orgs[i].id, i); !fresh) {
      throw config_error("orgs[" + std::to_string(i) + "].id: \"" + cfg.orgs[i].id + "\" is orgs[" +
                         std::to_string(at->second) + "]'s too (\"" + organisation{}.id +
                         "\" when left out): each organisation needs an id of its own");
    }
  }
  for (std::size_t i = 0; i < cfg.orgs.size(); ++i) {
    if (cfg.orgs[i].keys.empty()) {
      throw config_error("orgs[" + std::to_string(i) +
                         "].keys: missing or empty: no request could reach the organisation");
    }
    for (auto const& key : cfg.orgs[i].keys) {
      // Sent as `Authorization: Bearer <key>`: a control byte cannot be in a header value, and white space at its
      // ends is not part of one (RFC 9110 §5.5), so such a key could never be used.
      auto const control = [](char ch) { return (ch >= 0 && ch < 0x20) || ch == 0x7F; };
      if (key.empty() || std::any_of(key.begin(), key.end(), control) || key.front() == ' ' || key.back() == ' ') {
        throw config_error("orgs[" + std::to_string(i) +
                           "].keys: a key is sent in a header: not empty, no control bytes, no space at its ends");
      }
    }
    static constexpr std::array counters = {counter::playback, counter::catalog, counter::creatives,
                                            counter::videos,   counter::video,   counter::config};
    for (auto c : counters) {
      if (auto const limit = cfg.orgs[i].limits.of(c); limit == 0 || limit > 100000000) {
        throw config_error("orgs[" + std::to_string(i) + "].limits." + std::string(to_string(c)) +
                           (limit == 0 ? ": must be at least 1" : ": must be at most 100000000"));
      }
    }
  }
  seen.clear(); // each key well-formed (above): now each of one organisation
  for (std::size_t i = 0; i < cfg.orgs.size(); ++i) {
    for (auto const& key : cfg.orgs[i].keys) {
      if (auto const [at, fresh] = seen.emplace(key, i); !fresh && at->second != i) {
        throw config_error("orgs[" + std::to_string(i) + "].keys: key \"" + key + "\" is orgs[" +
                           std::to_string(at->second) + "]'s too: a key names one organisation");
      }
    }
  }
  for (std::size_t i = 0; i < cfg.faults.size(); ++i) {
    check_fault_rule(cfg.faults[i], "faults[" + std::to_string(i) + "]");
  }
}

} // namespace detail

namespace {

using simdjson::dom::element;

[[noreturn]] void fail(std::string const& where, std::string_view what) {
  throw config_error(where + ": " + std::string(what));
}

/// A key the reader of `at`'s object does not know: refused, not ignored, so that a misspelt key (`fualts`, `stauts`)
/// cannot leave a fault or a limit out without a word. `known` lists the keys it takes.
[[noreturn]] void unknown_key(std::string const& at, std::string_view known) {
  fail(at, "unknown key (known: " + std::string(known) + ")");
}

std::uint64_t get_unsigned(element e, std::string const& where, std::uint64_t max) {
  std::uint64_t v = 0;
  if (e.get_uint64().get(v) != simdjson::SUCCESS) {
    // Accept 12.0 as 12, as some config writers emit doubles.
    double d = 0;
    if (e.get_double().get(d) != simdjson::SUCCESS || d < 0 || d != std::floor(d) || d > 1.8e19) {
      fail(where, "expected an unsigned integer");
    }
    v = static_cast<std::uint64_t>(d);
  }
  if (v > max) {
    fail(where, "must be at most " + std::to_string(max));
  }
  return v;
}

double get_number(element e, std::string const& where) {
  double d = 0;
  if (e.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d)) {
    fail(where, "expected a number");
  }
  return d;
}

std::string get_string(element e, std::string const& where) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) {
    fail(where, "expected a string");
  }
  return std::string(s);
}

bool get_bool(element e, std::string const& where) {
  bool b = false;
  if (e.get_bool().get(b) != simdjson::SUCCESS) {
    fail(where, "expected true or false");
  }
  return b;
}

/// Every object the configuration and the fault rules are read from comes through here: a key given twice is
/// refused as strictly as an unknown one (JSON leaves duplicates to the reader, and the last would silently win).
simdjson::dom::object get_object(element e, std::string const& where) {
  simdjson::dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) {
    fail(where, "expected an object");
  }
  std::unordered_set<std::string_view> seen;
  for (auto [k, v] : o) {
    if (!seen.insert(k).second) {
      fail((where == "json" ? "" : where + ".") + std::string(k), "given twice");
    }
  }
  return o;
}

simdjson::dom::array get_array(element e, std::string const& where) {
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) {
    fail(where, "expected an array");
  }
  return a;
}

fault_kind parse_kind(std::string const& s, std::string const& where) {
  static constexpr std::array kinds = {
      fault_kind::status,   fault_kind::delay,          fault_kind::reset, fault_kind::drop_after_read,
      fault_kind::truncate, fault_kind::garbage,        fault_kind::huge,  fault_kind::slow_body,
      fault_kind::stale_db, fault_kind::unreadable_item};
  for (auto k : kinds) {
    if (to_string(k) == s) {
      return k;
    }
  }
  fail(where, "unknown fault kind \"" + s + "\"");
}

fault_rule parse_rule(element e, std::string const& where) {
  fault_rule r;
  bool has_kind = false;
  for (auto [k, v] : get_object(e, where)) {
    std::string at = where + "." + std::string(k);
    if (k == "path") {
      r.path = get_string(v, at);
    } else if (k == "kind") {
      r.kind = parse_kind(get_string(v, at), at);
      has_kind = true;
    } else if (k == "status") {
      r.status = static_cast<int>(get_unsigned(v, at, 599));
    } else if (k == "retry_after") {
      r.retry_after = static_cast<std::uint32_t>(get_unsigned(v, at, 86400));
    } else if (k == "error_code") {
      r.error_code = get_string(v, at);
    } else if (k == "ms") {
      r.ms = static_cast<std::uint32_t>(get_unsigned(v, at, 600000));
    } else if (k == "bytes") {
      r.bytes = get_unsigned(v, at, std::uint64_t{1} << 30);
    } else if (k == "bytes_per_s") {
      r.bytes_per_s = get_unsigned(v, at, std::uint64_t{1} << 30);
    } else if (k == "item") {
      r.item = static_cast<std::uint32_t>(get_unsigned(v, at, 1000));
    } else if (k == "count") {
      r.count = get_unsigned(v, at, std::uint64_t{1} << 53);
    } else if (k == "probability") {
      r.probability = get_number(v, at);
    } else {
      unknown_key(at, "path, kind, status, retry_after, error_code, ms, bytes, bytes_per_s, item, count, probability");
    }
  }
  if (!has_kind) {
    fail(where + ".kind", "missing");
  }
  detail::check_fault_rule(r, where);
  return r;
}

std::vector<fault_rule> parse_rules_array(element e, std::string const& where) {
  std::vector<fault_rule> rules;
  std::size_t i = 0;
  for (auto rule : get_array(e, where)) {
    rules.push_back(parse_rule(rule, where + "[" + std::to_string(i++) + "]"));
  }
  return rules;
}

element parse_document(simdjson::dom::parser& parser, std::string_view json) {
  element doc;
  simdjson::padded_string padded(json);
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    fail("json", simdjson::error_message(err));
  }
  return doc;
}

limits parse_limits(element e, std::string const& where) {
  limits l;
  for (auto [k, v] : get_object(e, where)) {
    std::string at = where + "." + std::string(k);
    auto value = [&] { return static_cast<std::uint32_t>(get_unsigned(v, at, 100000000)); }; // >= 1: check_config
    if (k == "playback") {
      l.playback = value();
    } else if (k == "catalog") {
      l.catalog = value();
    } else if (k == "creatives") {
      l.creatives = value();
    } else if (k == "videos") {
      l.videos = value();
    } else if (k == "video") {
      l.video = value();
    } else if (k == "config") {
      l.config = value();
    } else {
      unknown_key(at, "playback, catalog, creatives, videos, video, config");
    }
  }
  return l;
}

} // namespace

std::vector<fault_rule> parse_fault_rules(std::string_view json) {
  simdjson::dom::parser parser;
  element doc = parse_document(parser, json);
  if (doc.is_array()) {
    return parse_rules_array(doc, "rules");
  }
  std::optional<std::vector<fault_rule>> rules;
  for (auto [k, v] : get_object(doc, "json")) {
    if (k != "rules") {
      unknown_key(std::string(k), "rules");
    }
    rules = parse_rules_array(v, "rules");
  }
  if (!rules) {
    fail("rules", "missing");
  }
  return std::move(*rules);
}

namespace {

/// The text of the file at `path`, or a config_error naming it and the system's reason or the bound it is over.
std::string read_config_file(std::string const& path) {
  auto const refuse = [&](std::string const& why) { throw config_error(path + ": " + why); };
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    refuse(std::strerror(errno));
  }
  struct closer {
    int fd;
    explicit closer(int f) : fd(f) {}
    closer(closer const&) = delete;
    closer& operator=(closer const&) = delete;
    ~closer() { ::close(fd); }
  } const closing(fd);
  std::string text;
  std::array<char, 65536> chunk{};
  for (;;) {
    ssize_t const n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      refuse(std::strerror(errno));
    }
    if (n == 0) {
      return text;
    }
    if (text.size() + static_cast<std::size_t>(n) > max_config_file_bytes) {
      refuse("over " + std::to_string(max_config_file_bytes >> 20U) + " MiB");
    }
    text.append(chunk.data(), static_cast<std::size_t>(n));
  }
}

} // namespace

config load_config_file(std::string const& path) {
  std::string const text = read_config_file(path);
  try {
    return parse_config(text);
  } catch (config_error const& e) {
    throw config_error(path + ": " + e.what());
  }
}

config parse_config(std::string_view json) {
  simdjson::dom::parser parser;
  element doc = parse_document(parser, json);
  config cfg;
  for (auto [k, v] : get_object(doc, "json")) {
    std::string at(k);
    if (k == "orgs") {
      cfg.orgs.clear();
      std::size_t i = 0;
      for (auto o : get_array(v, at)) {
        std::string where = "orgs[" + std::to_string(i++) + "]";
        organisation org;
        org.keys.clear();
        for (auto [ok, ov] : get_object(o, where)) {
          std::string oat = where + "." + std::string(ok);
          if (ok == "id") {
            org.id = get_string(ov, oat);
          } else if (ok == "keys") {
            for (auto key : get_array(ov, oat)) {
              org.keys.push_back(get_string(key, oat));
            }
          } else if (ok == "limits") {
            org.limits = parse_limits(ov, oat);
          } else {
            unknown_key(oat, "id, keys, limits");
          }
        }
        cfg.orgs.push_back(std::move(org));
      }
    } else if (k == "films") {
      std::size_t i = 0;
      for (auto f : get_array(v, at)) {
        std::string where = "films[" + std::to_string(i++) + "]";
        film fm;
        for (auto [fk, fv] : get_object(f, where)) {
          std::string fat = where + "." + std::string(fk);
          if (fk == "film_ref") {
            fm.film_ref = get_string(fv, fat);
          } else if (fk == "title") {
            fm.title = get_string(fv, fat);
          } else if (fk == "episodes") {
            fm.episodes = static_cast<std::uint32_t>(get_unsigned(fv, fat, 100000));
          } else if (fk == "entitled") {
            fm.entitled = get_bool(fv, fat);
          } else {
            unknown_key(fat, "film_ref, title, episodes, entitled");
          }
        }
        if (fm.film_ref.empty()) {
          fail(where + ".film_ref", "missing or empty");
        }
        if (fm.title.empty()) {
          fm.title = detail::title_from_ref(fm.film_ref);
        }
        cfg.films.push_back(std::move(fm));
      }
      if (i == 0) {
        fail(at, "empty: give at least one film, or leave films out for the demo catalogue");
      }
    } else if (k == "ticket_ttl_s") {
      cfg.ticket_ttl_s = static_cast<std::uint32_t>(get_unsigned(v, at, 7 * 86400));
    } else if (k == "faults") {
      cfg.faults = parse_rules_array(v, at);
    } else if (k == "seed") {
      cfg.seed = get_unsigned(v, at, UINT64_MAX);
    } else if (k == "overshoot") {
      cfg.overshoot = get_number(v, at); // in [0,1]: check_config
    } else if (k == "hold_window_ms") {
      cfg.hold_window = std::chrono::milliseconds(get_unsigned(v, at, 60000));
    } else if (k == "idle_timeout_ms") {
      cfg.idle_timeout = std::chrono::milliseconds(get_unsigned(v, at, 86400000));
      if (cfg.idle_timeout.count() == 0) { // not "no timeout": it would close every connection before its reply
        fail(at, "must be at least 1");
      }
    } else {
      unknown_key(at, "orgs, films, ticket_ttl_s, faults, seed, overshoot, hold_window_ms, idle_timeout_ms");
    }
  }
  detail::check_config(cfg);
  return cfg;
}

} // namespace wandura::emulator
