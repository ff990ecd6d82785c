// The emulated API's dispatch (docs/protocol.md §1 endpoints), authentication, the read endpoints, fault rules and
// stats. The ticket batch and its idempotency store are in ticket_batch.cpp; the wire vocabulary is in wire_format.cpp.
#include "emulator/service.hpp"

#include "emulator/json_writer.hpp"
#include "emulator/wire_format.hpp"

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>

namespace wandura::emulator::detail {

service::service(config cfg, emulator_clock& clock) : cfg_(std::move(cfg)), clock_(clock) {
  if (cfg_.films.empty()) {
    cfg_.films = demo_catalogue();
  }
  auto now = clock_.now();
  orgs_.reserve(cfg_.orgs.size());
  for (std::size_t i = 0; i < cfg_.orgs.size(); ++i) {
    auto const& o = cfg_.orgs[i];
    auto const& l = o.limits;
    double over = cfg_.overshoot;
    orgs_.push_back(org_state{o, continuous_bucket(l.playback, over, now), continuous_bucket(l.catalog, over, now),
                              fixed_window(l.creatives, over), fixed_window(l.videos, over),
                              fixed_window(l.video, over), fixed_window(l.config, over)});
    for (auto const& key : o.keys) {
      key_to_org_.emplace(key, i);
    }
  }
  for (std::size_t i = 0; i < cfg_.films.size(); ++i) {
    films_.emplace(cfg_.films[i].film_ref, i);
  }
  videos_ = demo_videos();
  creatives_ = demo_creatives();
  faults_ = cfg_.faults;
  rng_.seed(cfg_.seed ? *cfg_.seed : std::random_device{}());
}

std::string service::random_token(std::size_t chars) {
  static constexpr char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out(chars, '0');
  std::uint64_t bits = 0;
  int left = 0;
  for (auto& c : out) {
    if (left < 6) {
      bits = rng_();
      left = 64;
    }
    c = alphabet[(bits & 0x3F) % 36];
    bits >>= 6;
    left -= 6;
  }
  return out;
}

std::string service::next_request_id() {
  std::lock_guard lock(mutex_);
  return "req_" + random_token(20);
}

http_reply service::error_reply(int status, std::string_view error_code, std::string_view message,
                                std::string_view reason, std::string_view extra_headers) {
  http_reply r;
  r.status = status;
  auto request_id = next_request_id();
  json_writer w(r.body);
  w.begin_object().field("error", message.empty() ? message_for(error_code) : message).field("error_code", error_code);
  if (!reason.empty()) {
    w.field("reason", reason);
  }
  w.field("request_id", request_id).end_object();
  append_header(r.headers, "X-Request-Id", request_id);
  r.headers.append(extra_headers);
  return r;
}

service::org_state* service::authenticate(http_request const& req) {
  if (!req.has_authorization) {
    return nullptr;
  }
  std::string_view auth = req.authorization;
  constexpr std::string_view bearer = "bearer ";
  if (auth.size() <= bearer.size()) {
    return nullptr;
  }
  for (std::size_t i = 0; i < bearer.size(); ++i) {
    char c = auth[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != bearer[i]) {
      return nullptr;
    }
  }
  auto key = auth.substr(bearer.size());
  std::lock_guard lock(mutex_);
  auto it = key_to_org_.find(key);
  return it == key_to_org_.end() ? nullptr : &orgs_[it->second];
}

service::film_lookup service::lookup_film(std::string_view film_ref, bool stale_db, time_point now) {
  film_lookup out;
  auto const f = films_.find(film_ref);
  if (stale_db) {
    auto const* good = last_good_.find(film_ref);
    if (good == nullptr || now - *good > stale_limit) {
      out.result = lookup_result::unavailable;
      return out;
    }
    out.age = std::chrono::duration_cast<std::chrono::seconds>(now - *good);
  } else if (f != films_.end()) {
    // Only films of the catalogue are remembered: an unknown ref is any bytes a client sent (up to 64 KiB), and
    // remembering those let refused requests grow the server by gigabytes. In stale mode an unknown film is
    // therefore unavailable, as any film without a recent answer is.
    last_good_.put(f->first, now, now + stale_limit);
  }
  if (f == films_.end()) {
    out.result = lookup_result::not_found;
  } else {
    out.result = lookup_result::found;
    out.f = &cfg_.films[f->second];
  }
  return out;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  if (d.count() > 0) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(d);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<http_reply> service::handle(http_request const& req, bool stale_db, std::chrono::milliseconds delay) {
  auto path = req.path();
  std::optional<counter> c;
  std::string_view rest;
  bool is_post = false;
  if (path == "/v1/playback/tickets") {
    c = counter::playback;
    is_post = true;
  } else if (path.starts_with("/v1/catalog/films/") && path.size() > 18) {
    c = counter::catalog;
    rest = path.substr(18);
  } else if (path == "/v1/creatives") {
    c = counter::creatives;
  } else if (path == "/v1/videos") {
    c = counter::videos;
  } else if (path.starts_with("/v1/videos/") && path.size() > 11) {
    c = counter::video;
    rest = path.substr(11);
  } else if (path == "/v1/config") {
    c = counter::config;
  }
  if (!c || rest.find('/') != std::string_view::npos) {
    co_return error_reply(404, "not_found", "No such endpoint.");
  }
  // The ref is one path segment, percent-encoded as clients write it (a `%2F` stays inside the ref).
  std::optional<std::string> const ref = percent_decode(rest);
  if (!ref) {
    co_return error_reply(400, "invalid_request", "Malformed percent-encoding in the request path.");
  }
  // HEAD is answered as GET (RFC 9110 §9.3.2); the connection sends the headers alone.
  if ((is_post && req.method != "POST") || (!is_post && req.method != "GET" && req.method != "HEAD")) {
    std::string allow = is_post ? "Allow: POST\r\n" : "Allow: GET, HEAD\r\n";
    co_return error_reply(405, "invalid_request", "Method not allowed on this endpoint.", {}, allow);
  }
  org_state* org = authenticate(req);
  if (org == nullptr) {
    co_return error_reply(401, "unauthorized", {});
  }
  {
    std::lock_guard lock(mutex_);
    ++requests_[static_cast<std::size_t>(*c)];
  }
  if (is_post) {
    co_return co_await handle_tickets(req, *org, stale_db, delay);
  }
  co_await sleep_for(delay);
  co_return handle_get(*c, *ref, *org, stale_db);
}

http_reply service::rate_limited_reply(counter c, org_state& org, std::uint32_t retry_after) {
  std::string headers;
  append_header(headers, "Retry-After", retry_after);
  append_header(headers, "X-RateLimit-Limit", org.org.limits.of(c));
  append_header(headers, "X-RateLimit-Window", 60u);
  std::string message = "Too many " + std::string(to_string(c)) +
                        " requests for this account. This is an abuse ceiling, not a quota - if a normal "
                        "integration reaches it, contact us and it will be raised.";
  return error_reply(429, "rate_limited", message, {}, headers);
}

/// Takes one unit of a read counter; the `Retry-After` in seconds when there is none.
std::optional<std::uint32_t> service::take_read_unit(counter c, org_state& org, time_point now) {
  bool ok = false;
  switch (c) {
  case counter::catalog:
    if (org.catalog.try_take(1, now)) {
      return std::nullopt;
    }
    return retry_after_seconds(org.catalog.seconds_until(1, now));
  case counter::creatives: ok = org.creatives.try_take(now); break;
  case counter::videos: ok = org.videos.try_take(now); break;
  case counter::video: ok = org.video.try_take(now); break;
  case counter::config: ok = org.config.try_take(now); break;
  case counter::playback: break;
  }
  if (ok) {
    return std::nullopt;
  }
  return retry_after_seconds(fixed_window::seconds_to_next_minute(now));
}

http_reply service::handle_get(counter c, std::string_view rest, org_state& org, bool stale_db) {
  auto now = clock_.now();
  std::unique_lock lock(mutex_);
  if (auto retry_after = take_read_unit(c, org, now)) {
    lock.unlock();
    return rate_limited_reply(c, org, *retry_after);
  }
  http_reply r;
  auto request_id = "req_" + random_token(20);
  append_header(r.headers, "X-Request-Id", request_id);
  json_writer w(r.body);
  switch (c) {
  case counter::catalog: {
    auto found = lookup_film(rest, stale_db, now);
    if (found.result == lookup_result::unavailable) {
      lock.unlock();
      return error_reply(503, "service_unavailable", "The catalogue database is slow and no recent answer is cached.",
                         {}, "Retry-After: 1\r\n");
    }
    if (found.result == lookup_result::not_found) {
      lock.unlock();
      return error_reply(404, "not_found", "No such film.");
    }
    if (stale_db) {
      append_header(r.headers, "Age", static_cast<std::uint64_t>(found.age.count()));
    }
    w.begin_object()
        .field("film_ref", found.f->film_ref)
        .field("title", found.f->title)
        .field("episodes", found.f->episodes)
        .field("entitled", found.f->entitled)
        .field("request_id", request_id)
        .end_object();
    break;
  }
  case counter::video: {
    auto it = std::find_if(videos_.begin(), videos_.end(), [&](auto const& v) { return v.video_ref == rest; });
    if (it == videos_.end()) {
      lock.unlock();
      return error_reply(404, "not_found", "No such video.");
    }
    w.begin_object()
        .field("video_ref", it->video_ref)
        .field("title", it->title)
        .field("url", it->url)
        .field("request_id", request_id)
        .end_object();
    break;
  }
  case counter::creatives:
  case counter::videos: write_list(c, r.body, request_id); break;
  case counter::config: write_config(r.body, org, request_id); break;
  case counter::playback: break;
  }
  return r;
}

/// `GET /v1/creatives` or `GET /v1/videos`: the whole list.
void service::write_list(counter c, std::string& body, std::string_view request_id) const {
  json_writer w(body);
  if (c == counter::creatives) {
    w.begin_object().key("creatives").begin_array();
    for (auto const& cr : creatives_) {
      w.begin_object().field("creative_id", cr.creative_id).field("url", cr.url).end_object();
    }
  } else {
    w.begin_object().key("videos").begin_array();
    for (auto const& v : videos_) {
      w.begin_object().field("video_ref", v.video_ref).field("title", v.title).field("url", v.url).end_object();
    }
  }
  w.end_array().field("request_id", request_id).end_object();
}

/// `GET /v1/config`: the organisation's limits, window and refill model per counter.
void service::write_config(std::string& body, org_state const& org, std::string_view request_id) {
  json_writer w(body);
  auto const& l = org.org.limits;
  w.begin_object().field("org_id", org.org.id).key("limits").begin_object();
  for (std::size_t i = 0; i < counter_count; ++i) {
    auto cc = static_cast<counter>(i);
    w.field(to_string(cc), l.of(cc));
  }
  w.end_object().field("window_s", 60).key("refill").begin_object();
  for (std::size_t i = 0; i < counter_count; ++i) {
    auto cc = static_cast<counter>(i);
    w.field(to_string(cc), (cc == counter::playback || cc == counter::catalog) ? "continuous" : "fixed_minute");
  }
  w.end_object().field("request_id", request_id).end_object();
}

// ---- faults and stats ---------------------------------------------------------------------------------------------

std::optional<fault_rule> service::take_fault(std::string_view path) {
  std::lock_guard lock(mutex_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    auto const& p = it->path;
    bool matches = p.empty() || p == "*" || path == p ||
                   (path.size() > p.size() && path.starts_with(p) && (p.back() == '/' || path[p.size()] == '/'));
    if (!matches) {
      continue;
    }
    if (it->probability && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= *it->probability) {
      continue;
    }
    fault_rule hit = *it;
    if (it->count) {
      if (--*it->count == 0) {
        faults_.erase(it);
      }
    }
    ++stats_.faults_injected;
    return hit;
  }
  return std::nullopt;
}

http_reply service::fault_reply(fault_rule const& rule, http_request const& req) {
  auto code = rule.error_code.empty() ? error_code_for(rule.status) : std::string_view(rule.error_code);
  std::string headers;
  if (rule.retry_after) {
    append_header(headers, "Retry-After", *rule.retry_after);
  }
  if (rule.status == 429) {
    // The limit of the organisation whose key made the request; a fault answers before authentication, so without
    // a known key it is the default (first) organisation's.
    org_state const* org = authenticate(req);
    auto const& l = (org != nullptr ? org->org : cfg_.orgs.front()).limits;
    auto path = req.path();
    counter c = path.starts_with("/v1/playback")    ? counter::playback
                : path.starts_with("/v1/catalog")   ? counter::catalog
                : path.starts_with("/v1/creatives") ? counter::creatives
                : path == "/v1/videos"              ? counter::videos
                : path.starts_with("/v1/videos/")   ? counter::video
                                                    : counter::config;
    append_header(headers, "X-RateLimit-Limit", l.of(c));
    append_header(headers, "X-RateLimit-Window", 60u);
  }
  http_reply r = error_reply(rule.status, code, "Injected by an emulator fault rule.", {}, headers);
  // A well-formed ticket batch always gets its items back (docs/protocol.md §1), each with the injected status; a
  // 200 gets the error body alone (items of status 200 would be grants without tickets).
  if (req.path() == "/v1/playback/tickets" && rule.status != 200) {
    simdjson::dom::array episodes;
    if (req.json->parse(req.body.data(), req.body.size(), true)["episodes"].get_array().get(episodes) ==
            simdjson::SUCCESS &&
        episodes.size() >= 1 && episodes.size() <= max_items) {
      std::string items;
      json_writer w(items);
      w.begin_array();
      for (auto e : episodes) {
        std::string_view film_ref;
        std::uint64_t episode_no = 0;
        std::string_view intent;
        if (e["film_ref"].get_string().get(film_ref) != simdjson::SUCCESS ||
            e["episode_no"].get_uint64().get(episode_no) != simdjson::SUCCESS ||
            e["intent"].get_string().get(intent) != simdjson::SUCCESS) {
          return r;
        }
        w.begin_object()
            .field("film_ref", film_ref)
            .field("episode_no", episode_no)
            .field("intent", intent)
            .field("status", rule.status)
            .field("error_code", code);
        if (rule.retry_after) {
          w.field("retry_after", *rule.retry_after);
        }
        w.end_object();
      }
      w.end_array();
      r.body.pop_back(); // the closing brace
      r.body.append(",\"items\":").append(items).push_back('}');
    }
  }
  return r;
}

void service::install_faults(std::vector<fault_rule> rules) {
  for (std::size_t i = 0; i < rules.size(); ++i) {
    check_fault_rule(rules[i], "rules[" + std::to_string(i) + "]");
  }
  std::lock_guard lock(mutex_);
  // Every request scans the rules: their number is bounded, and a script that would pass the bound is refused whole.
  if (rules.size() > max_fault_rules - faults_.size()) {
    throw config_error("rules: at most " + std::to_string(max_fault_rules) + " fault rules may be installed at once (" +
                       std::to_string(faults_.size()) + " are, " + std::to_string(rules.size()) + " more given)");
  }
  for (auto& r : rules) {
    faults_.push_back(std::move(r));
  }
}

std::size_t service::clear_faults() {
  std::lock_guard lock(mutex_);
  auto n = faults_.size();
  faults_.clear();
  return n;
}

void service::note_response(int status) {
  std::lock_guard lock(mutex_);
  ++stats_.responses[status];
}

stats_snapshot service::stats() const {
  std::lock_guard lock(mutex_);
  stats_snapshot s = stats_;
  for (std::size_t i = 0; i < counter_count; ++i) {
    s.requests[std::string(to_string(static_cast<counter>(i)))] = requests_[i];
  }
  return s;
}

std::string service::stats_json() const {
  auto s = stats();
  std::string out;
  json_writer w(out);
  w.begin_object()
      .field("tickets_counted", s.tickets_counted)
      .field("tickets_reused", s.tickets_reused)
      .field("tickets_shed", s.tickets_shed)
      .field("held_play", s.held_play)
      .key("requests")
      .begin_object();
  for (auto const& [name, count] : s.requests) {
    w.field(name, count);
  }
  w.end_object().key("responses").begin_object();
  for (auto const& [status, count] : s.responses) {
    w.field(std::to_string(status), count);
  }
  w.end_object()
      .field("idempotent_replays", s.idempotent_replays)
      .field("faults_injected", s.faults_injected)
      .end_object();
  return out;
}

} // namespace wandura::emulator::detail
