#include "emulator/service.hpp"

#include "emulator/json_writer.hpp"

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>

namespace wandura::emulator::detail {

namespace {

/// SPEC §2: a reused ticket must have at least this long left.
constexpr auto reuse_margin = std::chrono::minutes(5);
/// SPEC §2: in stale_db mode answers may be this old.
constexpr auto stale_limit = std::chrono::minutes(5);
/// SPEC §1: idempotency keys are remembered this long.
constexpr auto idempotency_memory = std::chrono::hours(24);
/// Bounds on the in-memory stores (the oldest entries go first).
constexpr std::size_t max_idempotency_entries = 100000;
constexpr std::size_t max_reuse_entries = 200000;
constexpr std::size_t max_last_good_entries = 100000;
/// SPEC §2: prefetch is shed below this fraction of the playback limit.
constexpr double shed_level = 0.20;
constexpr std::size_t max_items = 3;

std::string_view error_code_for(int status) noexcept {
  switch (status) {
  case 400: return "invalid_request";
  case 401: return "unauthorized";
  case 403: return "not_entitled";
  case 404: return "not_found";
  case 409: return "idempotency_conflict";
  case 429: return "rate_limited";
  case 503: return "service_unavailable";
  default: return status >= 500 ? "internal" : "invalid_request";
  }
}

std::string_view message_for(std::string_view error_code) noexcept {
  if (error_code == "rate_limited") {
    return "Too many requests for this account. This is an abuse ceiling, not a quota.";
  }
  if (error_code == "service_unavailable") {
    return "The ticket could not be issued in time. Retry after Retry-After.";
  }
  if (error_code == "not_ready") {
    return "The episode is past the film's last episode.";
  }
  if (error_code == "not_entitled") {
    return "This organisation is not entitled to the film.";
  }
  if (error_code == "not_found") {
    return "Not found.";
  }
  if (error_code == "unauthorized") {
    return "Missing or unknown API key.";
  }
  if (error_code == "idempotency_conflict") {
    return "The idempotency key was already used with a different request body.";
  }
  if (error_code == "internal") {
    return "Internal error.";
  }
  return "The request was not accepted.";
}

void append_header(std::string& headers, std::string_view name, std::uint64_t value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  headers.append(name).append(": ").append(buf, r.ptr).append("\r\n");
}

void append_header(std::string& headers, std::string_view name, std::string_view value) {
  headers.append(name).append(": ").append(value).append("\r\n");
}

/// Serialises a JSON value with object keys sorted and no white space, so that two texts of the same JSON value
/// (SPEC §4: "key order and white space ignored") give the same bytes.
void canonical_json(simdjson::dom::element e, std::string& out) {
  using simdjson::dom::element_type;
  switch (e.type()) {
  case element_type::OBJECT: {
    std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
    simdjson::dom::object object = e.get_object().value_unsafe();
    for (auto [k, v] : object) {
      fields.emplace_back(k, v);
    }
    std::stable_sort(fields.begin(), fields.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    out.push_back('{');
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i != 0) {
        out.push_back(',');
      }
      json_writer::append_string(out, fields[i].first);
      out.push_back(':');
      canonical_json(fields[i].second, out);
    }
    out.push_back('}');
    break;
  }
  case element_type::ARRAY: {
    out.push_back('[');
    bool first = true;
    simdjson::dom::array array = e.get_array().value_unsafe();
    for (auto v : array) {
      if (!first) {
        out.push_back(',');
      }
      first = false;
      canonical_json(v, out);
    }
    out.push_back(']');
    break;
  }
  case element_type::STRING: json_writer::append_string(out, e.get_string().value_unsafe()); break;
  case element_type::INT64: out.append(std::to_string(e.get_int64().value_unsafe())); break;
  case element_type::UINT64: out.append(std::to_string(e.get_uint64().value_unsafe())); break;
  case element_type::DOUBLE: {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, e.get_double().value_unsafe());
    out.append(buf, r.ptr);
    break;
  }
  case element_type::BOOL: out.append(e.get_bool().value_unsafe() ? "true" : "false"); break;
  case element_type::NULL_VALUE: out.append("null"); break;
  }
}

std::array<unsigned char, 32> sha256(std::string_view data) {
  // Fetched once: OpenSSL 3's one-shot SHA256() fetches the algorithm (under a lock) on every call.
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  std::array<unsigned char, 32> digest{};
  if (md == nullptr || EVP_Digest(data.data(), data.size(), digest.data(), nullptr, md, nullptr) != 1) {
    SHA256(reinterpret_cast<unsigned char const*>(data.data()), data.size(), digest.data());
  }
  return digest;
}

std::string base64(unsigned char const* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  auto written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

/// Percent-encodes everything but RFC 3986 unreserved characters, for film refs placed in URLs.
std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xF]);
    }
  }
  return out;
}

std::tm utc_tm(time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return tm;
}

bool visible_ascii(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x21 && c <= 0x7E; });
}

} // namespace

std::string rfc3339(time_point t) {
  std::tm tm = utc_tm(t);
  char buf[32];
  auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {buf, n};
}

std::string http_date(time_point t) {
  std::tm tm = utc_tm(t);
  char buf[40];
  auto n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return {buf, n};
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 413: return "Payload Too Large";
  case 425: return "Too Early";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Status";
  }
}

service::service(config cfg, emulator_clock& clock) : cfg_(std::move(cfg)), clock_(clock) {
  if (cfg_.orgs.empty()) {
    throw config_error("orgs: at least one organisation is needed");
  }
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
      if (key.empty()) {
        throw config_error("orgs[" + std::to_string(i) + "].keys: an API key may not be empty");
      }
      if (!key_to_org_.emplace(key, i).second) {
        throw config_error("orgs[" + std::to_string(i) + "].keys: key \"" + key + "\" belongs to two organisations");
      }
    }
  }
  for (std::size_t i = 0; i < cfg_.films.size(); ++i) {
    auto const& f = cfg_.films[i];
    if (f.episodes == 0) {
      throw config_error("films[" + std::to_string(i) + "].episodes: a film has at least one episode");
    }
    if (!films_.emplace(f.film_ref, i).second) {
      throw config_error("films[" + std::to_string(i) + "].film_ref: \"" + f.film_ref + "\" is listed twice");
    }
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
  if (stale_db) {
    auto it = last_good_.find(film_ref);
    if (it == last_good_.end() || now - it->second > stale_limit) {
      out.result = lookup_result::unavailable;
      return out;
    }
    out.age = std::chrono::duration_cast<std::chrono::seconds>(now - it->second);
  } else {
    if (auto it = last_good_.find(film_ref); it != last_good_.end()) {
      it->second = now;
    } else {
      if (last_good_.size() >= max_last_good_entries) {
        std::erase_if(last_good_, [&](auto const& kv) { return now - kv.second > stale_limit; });
        if (last_good_.size() >= max_last_good_entries) {
          last_good_.erase(last_good_.begin());
        }
      }
      last_good_.emplace(std::string(film_ref), now);
    }
  }
  auto f = films_.find(film_ref);
  if (f == films_.end()) {
    out.result = lookup_result::not_found;
  } else {
    out.result = lookup_result::found;
    out.f = &cfg_.films[f->second];
  }
  return out;
}

namespace {

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  if (d.count() > 0) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(d);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

} // namespace

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
  if ((is_post && req.method != "POST") || (!is_post && req.method != "GET")) {
    std::string allow = is_post ? "Allow: POST\r\n" : "Allow: GET\r\n";
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
  co_return handle_get(*c, rest, *org, stale_db);
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

http_reply service::handle_get(counter c, std::string_view rest, org_state& org, bool stale_db) {
  auto now = clock_.now();
  std::unique_lock lock(mutex_);
  bool ok = false;
  std::uint32_t retry_after = 1;
  switch (c) {
  case counter::catalog:
    ok = org.catalog.try_take(1, now);
    retry_after = ok ? 0 : retry_after_seconds(org.catalog.seconds_until(1, now));
    break;
  case counter::creatives: ok = org.creatives.try_take(now); break;
  case counter::videos: ok = org.videos.try_take(now); break;
  case counter::video: ok = org.video.try_take(now); break;
  case counter::config: ok = org.config.try_take(now); break;
  case counter::playback: break;
  }
  if (!ok) {
    if (c != counter::catalog) {
      retry_after = retry_after_seconds(fixed_window::seconds_to_next_minute(now));
    }
    lock.unlock();
    return rate_limited_reply(c, org, retry_after);
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
  case counter::creatives:
    w.begin_object().key("creatives").begin_array();
    for (auto const& cr : creatives_) {
      w.begin_object().field("creative_id", cr.creative_id).field("url", cr.url).end_object();
    }
    w.end_array().field("request_id", request_id).end_object();
    break;
  case counter::videos:
    w.begin_object().key("videos").begin_array();
    for (auto const& v : videos_) {
      w.begin_object().field("video_ref", v.video_ref).field("title", v.title).field("url", v.url).end_object();
    }
    w.end_array().field("request_id", request_id).end_object();
    break;
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
  case counter::config: {
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
    break;
  }
  case counter::playback: break;
  }
  return r;
}

// ---- ticket batches ----------------------------------------------------------------------------------------------

struct service::batch_item {
  std::string_view film_ref;
  std::uint32_t episode_no = 0;
  bool play = true;
  std::string_view intent;
  int status = 0; // 0 = still to decide
  std::string_view error_code;
  std::string_view reason;
  std::optional<std::uint32_t> retry_after;
  bool reused = false;
  bool grant = false; // a new ticket is to be issued
  bool held = false;
  issued_ticket ticket;
};

asio::awaitable<http_reply> service::handle_tickets(http_request const& req, org_state& org, bool stale_db,
                                                    std::chrono::milliseconds delay) {
  if (!req.has_idempotency_key) {
    bool granted = false;
    co_return co_await execute_batch(req, org, stale_db, delay, granted);
  }
  std::string_view key = req.idempotency_key;
  if (key.empty() || key.size() > 200 || !visible_ascii(key)) {
    co_return error_reply(400, "invalid_request",
                          "Idempotency-Key must be 1-200 visible ASCII characters (0x21-0x7E), without spaces.");
  }
  // "The same body" is the same JSON value; a body that is not JSON is compared byte for byte.
  std::string canonical;
  simdjson::dom::element doc;
  if (req.json->parse(req.body.data(), req.body.size(), true).get(doc) == simdjson::SUCCESS) {
    canonical_json(doc, canonical);
  } else {
    canonical = req.body;
  }
  auto digest = sha256(canonical);
  auto store_key = org.org.id;
  store_key.push_back('\0');
  store_key.append(key);

  std::uint64_t generation = 0;
  {
    std::unique_lock lock(mutex_);
    auto now = clock_.now();
    purge_idempotency(now);
    auto it = idempotency_.find(store_key);
    if (it != idempotency_.end() && now - it->second.created >= idempotency_memory) {
      idempotency_.erase(it);
      it = idempotency_.end();
    }
    if (it != idempotency_.end()) {
      if (it->second.digest != digest) {
        lock.unlock();
        co_return error_reply(409, "idempotency_conflict", {});
      }
      if (it->second.running) {
        lock.unlock();
        co_return error_reply(409, "idempotency_in_progress",
                              "A request with this idempotency key is still running. Retry shortly.", {},
                              "Retry-After: 1\r\n");
      }
      ++stats_.idempotent_replays;
      http_reply replay = it->second.reply;
      replay.headers.append("Idempotency-Replayed: true\r\n");
      co_return replay;
    }
    generation = ++idempotency_generation_;
    idempotency_entry entry;
    entry.digest = digest;
    entry.generation = generation;
    entry.created = now;
    idempotency_.emplace(store_key, std::move(entry));
    idempotency_order_.emplace_back(generation, store_key);
  }

  bool granted = false;
  http_reply reply;
  try {
    reply = co_await execute_batch(req, org, stale_db, delay, granted);
  } catch (...) {
    std::lock_guard lock(mutex_);
    idempotency_.erase(store_key);
    throw;
  }
  {
    std::lock_guard lock(mutex_);
    auto it = idempotency_.find(store_key);
    if (it != idempotency_.end() && it->second.generation == generation) {
      // Seed 004: a failed first attempt (5xx or 429 with nothing granted) releases the key.
      bool failed = (reply.status >= 500 || reply.status == 429) && !granted;
      if (failed) {
        idempotency_.erase(it);
      } else {
        it->second.running = false;
        it->second.reply = reply;
      }
    }
  }
  co_return reply;
}

void service::purge_idempotency(time_point now) {
  while (!idempotency_order_.empty()) {
    auto& [generation, key] = idempotency_order_.front();
    auto it = idempotency_.find(key);
    bool stale_record = it == idempotency_.end() || it->second.generation != generation;
    bool expired = !stale_record && now - it->second.created >= idempotency_memory;
    bool over = idempotency_order_.size() > max_idempotency_entries;
    if (!stale_record && !expired && !over) {
      break;
    }
    if (!stale_record && (expired || (over && !it->second.running))) {
      idempotency_.erase(it);
    } else if (!stale_record) {
      break; // never evict a running request; it ends soon
    }
    idempotency_order_.pop_front();
  }
}

service::issued_ticket service::issue_ticket(std::string_view film_ref, std::uint32_t episode_no,
                                             std::string_view union_info, std::string_view drm_kek, time_point now) {
  issued_ticket t;
  t.ticket_id = "tkt_" + random_token(24);
  auto ref = url_encode(film_ref);
  t.manifest_url = "https://cdn.wandura.example/v1/films/" + ref + "/episodes/" + std::to_string(episode_no) +
                   "/manifest.mpd?ticket=" + t.ticket_id;
  t.license_url = "https://license.wandura.example/v1/widevine/" + t.ticket_id;
  // A payload bound to the device: a digest of the device key, the device id and the ticket.
  std::string material;
  material.append(drm_kek).push_back('\n');
  material.append(union_info).push_back('\n');
  material.append(t.ticket_id);
  auto d = sha256(material);
  t.drm_payload = base64(d.data(), d.size());
  t.expires_at = now + std::chrono::seconds(cfg_.ticket_ttl_s);
  // Tickets issued in the same second share the text; formatting it is the costliest part of a ticket.
  auto second = std::chrono::floor<std::chrono::seconds>(t.expires_at.time_since_epoch()).count();
  if (second != expires_text_second_) {
    expires_text_second_ = second;
    expires_text_ = rfc3339(t.expires_at);
  }
  t.expires_at_text = expires_text_;
  return t;
}

asio::awaitable<http_reply> service::execute_batch(http_request const& req, org_state& org, bool stale_db,
                                                   std::chrono::milliseconds delay, bool& granted_any) {
  co_await sleep_for(delay);
  // --- validate (400 invalid_request; nothing counted) ---
  simdjson::dom::element doc;
  if (auto err = req.json->parse(req.body.data(), req.body.size(), true).get(doc); err != simdjson::SUCCESS) {
    co_return error_reply(400, "invalid_request", "The body is not valid JSON.");
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    co_return error_reply(400, "invalid_request", "The body must be a JSON object.");
  }
  auto required_string = [&](std::string_view name, std::string_view& out) {
    return root[name].get_string().get(out) == simdjson::SUCCESS && !out.empty();
  };
  std::string_view union_info;
  std::string_view drm_kek;
  std::string_view viewer_ref;
  if (!required_string("union_info", union_info)) {
    co_return error_reply(400, "invalid_request", "union_info is required (a non-empty string).");
  }
  if (!required_string("drm_kek", drm_kek)) {
    co_return error_reply(400, "invalid_request", "drm_kek is required (a non-empty string).");
  }
  if (auto v = root["viewer_ref"]; v.error() == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_string().get(viewer_ref) != simdjson::SUCCESS) {
      co_return error_reply(400, "invalid_request", "viewer_ref must be a string.");
    }
  }
  simdjson::dom::array episodes;
  if (root["episodes"].get_array().get(episodes) != simdjson::SUCCESS) {
    co_return error_reply(400, "invalid_request", "episodes is required (an array of 1-3 items).");
  }
  if (episodes.size() == 0 || episodes.size() > max_items) {
    co_return error_reply(400, "invalid_request", "episodes must have 1-3 items.");
  }
  std::array<batch_item, max_items> items;
  std::size_t n = 0;
  for (auto e : episodes) {
    auto& it = items[n++];
    simdjson::dom::object o;
    std::uint64_t ep = 0;
    if (e.get_object().get(o) != simdjson::SUCCESS ||
        o["film_ref"].get_string().get(it.film_ref) != simdjson::SUCCESS || it.film_ref.empty()) {
      co_return error_reply(400, "invalid_request", "Each episode needs a non-empty film_ref.");
    }
    if (o["episode_no"].get_uint64().get(ep) != simdjson::SUCCESS || ep == 0 || ep > UINT32_MAX) {
      co_return error_reply(400, "invalid_request", "Each episode needs an episode_no of at least 1.");
    }
    it.episode_no = static_cast<std::uint32_t>(ep);
    if (o["intent"].get_string().get(it.intent) != simdjson::SUCCESS ||
        (it.intent != "play" && it.intent != "prefetch")) {
      co_return error_reply(400, "invalid_request", "Each episode needs an intent of \"play\" or \"prefetch\".");
    }
    it.play = it.intent == "play";
  }

  // --- decide every item under the lock: catalogue, reuse, then play before prefetch (SPEC §4) ---
  auto hold = std::chrono::duration<double>::zero();
  std::string reuse_prefix;
  {
    std::lock_guard lock(mutex_);
    auto now = clock_.now();
    if (!viewer_ref.empty()) {
      reuse_prefix.append(org.org.id).push_back('\0');
      reuse_prefix.append(viewer_ref).push_back('\0');
      reuse_prefix.append(union_info).push_back('\0');
    }
    for (std::size_t i = 0; i < n; ++i) {
      auto& it = items[i];
      auto found = lookup_film(it.film_ref, stale_db, now);
      if (found.result == lookup_result::unavailable) {
        it.status = 503;
        it.error_code = "service_unavailable";
        it.retry_after = 1;
      } else if (found.result == lookup_result::not_found) {
        it.status = 404;
        it.error_code = "not_found";
      } else if (!found.f->entitled) {
        it.status = 403;
        it.error_code = "not_entitled";
      } else if (it.episode_no > found.f->episodes) {
        it.status = 404;
        it.error_code = "not_ready";
      } else if (!reuse_prefix.empty()) {
        auto key = reuse_prefix;
        key.append(it.film_ref).push_back('\0');
        key.append(std::to_string(it.episode_no)).push_back('\0');
        key.append(it.intent);
        auto r = reuse_.find(key);
        if (r != reuse_.end() && r->second.expires_at - now >= reuse_margin) {
          it.status = 200;
          it.reused = true;
          it.ticket = r->second;
        }
      }
    }
    auto& bucket = org.playback;
    double const hold_s = std::chrono::duration<double>(cfg_.hold_window).count();
    for (std::size_t i = 0; i < n; ++i) {
      auto& it = items[i];
      if (it.status != 0 || !it.play) {
        continue;
      }
      if (bucket.try_take(1, now)) {
        it.grant = true;
        continue;
      }
      double wait = bucket.seconds_until(1, now);
      if (!clock_.manual() && wait <= hold_s) {
        // Seed 001: a play arriving a few hundred ms before room returns is held, then granted. The unit is
        // reserved now so that nobody else is granted it meanwhile.
        bucket.reserve(1, now);
        it.grant = true;
        it.held = true;
        hold = std::max(hold, std::chrono::duration<double>(wait));
        continue;
      }
      it.status = 429;
      it.error_code = "rate_limited";
      it.retry_after = retry_after_seconds(wait);
    }
    double const floor_units = shed_level * bucket.limit();
    for (std::size_t i = 0; i < n; ++i) {
      auto& it = items[i];
      if (it.status != 0 || it.play) {
        continue;
      }
      // Prefetch is never held: granted while at least 20 % of the limit is left, else shed.
      if (bucket.remaining(now) >= floor_units && bucket.try_take(1, now)) {
        it.grant = true;
        continue;
      }
      it.status = 429;
      it.error_code = "rate_limited";
      it.reason = "prefetch_shed";
      it.retry_after = retry_after_seconds(bucket.seconds_until_above(floor_units, now));
      ++stats_.tickets_shed;
    }
  }

  if (hold > std::chrono::duration<double>::zero()) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(hold));
    co_await timer.async_wait(asio::use_awaitable);
  }

  // --- issue the granted tickets and write the answer ---
  http_reply r;
  std::string request_id;
  {
    std::lock_guard lock(mutex_);
    auto now = clock_.now();
    request_id = "req_" + random_token(20);
    for (std::size_t i = 0; i < n; ++i) {
      auto& it = items[i];
      if (it.reused) {
        ++stats_.tickets_reused;
      }
      if (!it.grant) {
        continue;
      }
      it.status = 200;
      it.ticket = issue_ticket(it.film_ref, it.episode_no, union_info, drm_kek, now);
      ++stats_.tickets_counted;
      if (it.held) {
        ++stats_.held_play;
      }
      if (!reuse_prefix.empty()) {
        if (reuse_.size() >= max_reuse_entries) {
          std::erase_if(reuse_, [&](auto const& kv) { return kv.second.expires_at - now < reuse_margin; });
          if (reuse_.size() >= max_reuse_entries) {
            reuse_.erase(reuse_.begin());
          }
        }
        auto key = reuse_prefix;
        key.append(it.film_ref).push_back('\0');
        key.append(std::to_string(it.episode_no)).push_back('\0');
        key.append(it.intent);
        reuse_.insert_or_assign(std::move(key), it.ticket);
      }
    }
  }

  // Whole-request status (SPEC §1): 200 if anything was granted or reused; else 429 if every item was refused
  // for rate; else 503 if an item could not be issued in time; else the first item's status.
  bool any_ok = false;
  bool all_rate = true;
  bool any_503 = false;
  bool all_shed = true;
  std::optional<std::uint32_t> min_retry;
  for (std::size_t i = 0; i < n; ++i) {
    auto const& it = items[i];
    any_ok = any_ok || it.status == 200;
    all_rate = all_rate && it.status == 429;
    all_shed = all_shed && it.reason == "prefetch_shed";
    any_503 = any_503 || it.status == 503;
    if (it.retry_after && (!min_retry || *it.retry_after < *min_retry)) {
      min_retry = it.retry_after;
    }
  }
  granted_any = any_ok;
  r.status = any_ok ? 200 : all_rate ? 429 : any_503 ? 503 : items[0].status;

  json_writer w(r.body);
  w.begin_object().field("request_id", request_id);
  if (r.status != 200) {
    std::string_view code = r.status == 429   ? "rate_limited"
                            : r.status == 503 ? "service_unavailable"
                                              : items[0].error_code;
    w.field("error", r.status == 429 && all_shed
                         ? std::string_view("Prefetch requests are paused while your playback traffic is "
                                            "close to its ceiling - tickets for viewers who pressed play "
                                            "are still issued.")
                         : message_for(code))
        .field("error_code", code);
    if (r.status == 429 && all_shed) {
      w.field("reason", "prefetch_shed");
    }
  }
  w.key("items").begin_array();
  for (std::size_t i = 0; i < n; ++i) {
    auto const& it = items[i];
    w.begin_object()
        .field("film_ref", it.film_ref)
        .field("episode_no", it.episode_no)
        .field("intent", it.intent)
        .field("status", it.status);
    if (it.status == 200) {
      w.field("reused", it.reused)
          .key("ticket")
          .begin_object()
          .field("ticket_id", it.ticket.ticket_id)
          .field("manifest_url", it.ticket.manifest_url)
          .field("license_url", it.ticket.license_url)
          .field("expires_at", it.ticket.expires_at_text)
          .field("drm_payload", it.ticket.drm_payload)
          .end_object();
    } else {
      w.field("error_code", it.error_code);
      if (!it.reason.empty()) {
        w.field("reason", it.reason);
      }
      if (it.retry_after) {
        w.field("retry_after", *it.retry_after);
      }
    }
    w.end_object();
  }
  w.end_array().end_object();

  append_header(r.headers, "X-Request-Id", request_id);
  if ((r.status == 429 || r.status == 503) && min_retry) {
    append_header(r.headers, "Retry-After", *min_retry);
  }
  if (r.status == 429) {
    append_header(r.headers, "X-RateLimit-Limit", org.org.limits.playback);
    append_header(r.headers, "X-RateLimit-Window", 60u);
  }
  co_return r;
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
    auto const& l = cfg_.orgs.front().limits;
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
  // A well-formed ticket batch always gets its items back (SPEC §1), each with the injected status.
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
  std::lock_guard lock(mutex_);
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
