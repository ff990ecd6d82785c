// The ticket batch (docs/protocol.md §1, §2; ADR 0005 "Ticket batch") and its idempotency store (docs/protocol.md §1):
// validation, the decision of every item under the lock (catalogue, reuse, play before prefetch), the hold, issuing,
// the answer.
#include "emulator/json_writer.hpp"
#include "emulator/service.hpp"
#include "emulator/wire_format.hpp"

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>

namespace wandura::emulator::detail {
namespace {

/// What an idempotency entry takes besides its strings (the map node, the entry, its place in the eviction order),
/// roughly: counted so that many entries with tiny keys and answers are bounded in bytes too.
constexpr std::size_t idempotency_entry_overhead = 256;

/// Appends `field` to a key of several fields as its length, ':' and its bytes: no two lists of fields give one key,
/// whatever bytes they hold (a separator byte could be inside a client's field: with NUL as the separator, viewer
/// "v\0devC" on device "x" read as viewer "v" on device "devC\0x").
void append_field(std::string& key, std::string_view field) {
  key.append(std::to_string(field.size())).push_back(':');
  key.append(field);
}

} // namespace

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

/// A validated batch request. The views point into the request's parsed JSON (`http_request::json`).
struct service::batch_request {
  std::string_view union_info;
  std::string_view drm_kek;
  std::string_view viewer_ref;
  /// org, viewer_ref and union_info, each as `append_field` writes it; empty without a viewer_ref (then nothing is
  /// reused).
  std::string reuse_prefix;
  std::array<batch_item, max_items> items;
  std::size_t n = 0;

  [[nodiscard]] std::string reuse_key(batch_item const& it) const {
    auto key = reuse_prefix;
    append_field(key, it.film_ref);
    append_field(key, std::to_string(it.episode_no));
    append_field(key, it.intent);
    return key;
  }
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
  auto const body_digest = sha256(canonical);
  std::string store_key;
  append_field(store_key, org.org.id);
  append_field(store_key, key);

  std::uint64_t generation = 0;
  if (auto answered = begin_idempotent(store_key, body_digest, generation)) {
    co_return std::move(*answered);
  }
  bool granted = false;
  http_reply reply;
  try {
    reply = co_await execute_batch(req, org, stale_db, delay, granted);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (auto it = idempotency_.find(store_key); it != idempotency_.end()) {
      forget_idempotency(it);
    }
    throw;
  }
  finish_idempotent(store_key, generation, reply, granted);
  co_return reply;
}

/// Looks the key up: a conflict, a request still running or a replay is answered here; otherwise the key is
/// registered as running (its `generation` returned) and nullopt says "execute it".
std::optional<http_reply> service::begin_idempotent(std::string const& store_key, sha256_digest const& body_digest,
                                                    std::uint64_t& generation) {
  std::unique_lock lock(mutex_);
  auto now = clock_.now();
  purge_idempotency(now);
  auto it = idempotency_.find(store_key);
  if (it != idempotency_.end() && now - it->second.created >= idempotency_memory) {
    forget_idempotency(it);
    it = idempotency_.end();
  }
  if (it != idempotency_.end()) {
    if (it->second.digest != body_digest) {
      lock.unlock();
      return error_reply(409, "idempotency_conflict", {});
    }
    if (it->second.running) {
      lock.unlock();
      return error_reply(409, "idempotency_in_progress",
                         "A request with this idempotency key is still running. Retry shortly.", {},
                         "Retry-After: 1\r\n");
    }
    ++stats_.idempotent_replays;
    http_reply replay = it->second.reply;
    replay.headers.append("Idempotency-Replayed: true\r\n");
    return replay;
  }
  generation = ++idempotency_generation_;
  idempotency_entry entry;
  entry.digest = body_digest;
  entry.generation = generation;
  entry.created = now;
  // The key is held twice (map and eviction order), plus what the nodes themselves take.
  entry.cost = 2 * store_key.size() + idempotency_entry_overhead;
  idempotency_bytes_ += entry.cost;
  idempotency_.emplace(store_key, std::move(entry));
  idempotency_order_.emplace_back(generation, store_key);
  return std::nullopt;
}

/// Stores the first execution's answer for replays, or (docs/protocol.md §1) releases the key when it failed: 5xx or
/// 429 with nothing granted.
void service::finish_idempotent(std::string const& store_key, std::uint64_t generation, http_reply const& reply,
                                bool granted) {
  std::lock_guard lock(mutex_);
  auto it = idempotency_.find(store_key);
  if (it == idempotency_.end() || it->second.generation != generation) {
    return;
  }
  bool const failed = (reply.status >= 500 || reply.status == 429) && !granted;
  if (failed) {
    forget_idempotency(it);
    return;
  }
  it->second.running = false;
  it->second.reply = reply;
  std::size_t const reply_cost = reply.body.size() + reply.headers.size();
  it->second.cost += reply_cost;
  idempotency_bytes_ += reply_cost;
  // The bounds hold after every store, not only when the next key arrives.
  purge_idempotency(clock_.now());
}

void service::forget_idempotency(string_map<idempotency_entry>::iterator it) {
  idempotency_bytes_ -= it->second.cost;
  idempotency_.erase(it);
}

void service::purge_idempotency(time_point now) {
  while (!idempotency_order_.empty()) {
    auto& [generation, key] = idempotency_order_.front();
    auto it = idempotency_.find(key);
    bool stale_record = it == idempotency_.end() || it->second.generation != generation;
    bool expired = !stale_record && now - it->second.created >= idempotency_memory;
    bool over = idempotency_order_.size() > max_idempotency_entries || idempotency_bytes_ > max_idempotency_bytes;
    if (!stale_record && !expired && !over) {
      break;
    }
    if (!stale_record && (expired || (over && !it->second.running))) {
      forget_idempotency(it);
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
  batch_request batch;
  if (auto refused = read_batch(req, org, batch)) {
    co_return std::move(*refused);
  }
  // Decide every item under the lock: catalogue, reuse, then play before prefetch (docs/protocol.md §4).
  auto hold = std::chrono::duration<double>::zero();
  {
    std::lock_guard lock(mutex_);
    auto now = clock_.now();
    decide_catalogue(batch, stale_db, now);
    hold = decide_plays(batch, org.playback, now);
    decide_prefetches(batch, org.playback, now);
  }
  if (hold > std::chrono::duration<double>::zero()) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(hold));
    co_await timer.async_wait(asio::use_awaitable);
  }
  std::string const request_id = issue_granted(batch);
  co_return batch_reply(batch, org, request_id, granted_any);
}

/// Validates the body (400 `invalid_request`, nothing counted): nullopt when it is a well-formed batch.
std::optional<http_reply> service::read_batch(http_request const& req, org_state const& org, batch_request& out) {
  simdjson::dom::element doc;
  if (auto err = req.json->parse(req.body.data(), req.body.size(), true).get(doc); err != simdjson::SUCCESS) {
    return error_reply(400, "invalid_request", "The body is not valid JSON.");
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    return error_reply(400, "invalid_request", "The body must be a JSON object.");
  }
  auto required_string = [&](std::string_view name, std::string_view& value) {
    return root[name].get_string().get(value) == simdjson::SUCCESS && !value.empty();
  };
  if (!required_string("union_info", out.union_info)) {
    return error_reply(400, "invalid_request", "union_info is required (a non-empty string).");
  }
  if (!required_string("drm_kek", out.drm_kek)) {
    return error_reply(400, "invalid_request", "drm_kek is required (a non-empty string).");
  }
  if (auto v = root["viewer_ref"]; v.error() == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_string().get(out.viewer_ref) != simdjson::SUCCESS) {
      return error_reply(400, "invalid_request", "viewer_ref must be a string.");
    }
  }
  simdjson::dom::array episodes;
  if (root["episodes"].get_array().get(episodes) != simdjson::SUCCESS) {
    return error_reply(400, "invalid_request", "episodes is required (an array of 1-3 items).");
  }
  if (episodes.size() == 0 || episodes.size() > max_items) {
    return error_reply(400, "invalid_request", "episodes must have 1-3 items.");
  }
  for (auto e : episodes) {
    auto& it = out.items[out.n++];
    simdjson::dom::object o;
    std::uint64_t ep = 0;
    if (e.get_object().get(o) != simdjson::SUCCESS ||
        o["film_ref"].get_string().get(it.film_ref) != simdjson::SUCCESS || it.film_ref.empty()) {
      return error_reply(400, "invalid_request", "Each episode needs a non-empty film_ref.");
    }
    if (o["episode_no"].get_uint64().get(ep) != simdjson::SUCCESS || ep == 0 || ep > UINT32_MAX) {
      return error_reply(400, "invalid_request",
                         "Each episode needs an episode_no, a whole number from 1 to 4294967295.");
    }
    it.episode_no = static_cast<std::uint32_t>(ep);
    if (o["intent"].get_string().get(it.intent) != simdjson::SUCCESS ||
        (it.intent != "play" && it.intent != "prefetch")) {
      return error_reply(400, "invalid_request", "Each episode needs an intent of \"play\" or \"prefetch\".");
    }
    it.play = it.intent == "play";
  }
  if (!out.viewer_ref.empty()) {
    append_field(out.reuse_prefix, org.org.id);
    append_field(out.reuse_prefix, out.viewer_ref);
    append_field(out.reuse_prefix, out.union_info);
  }
  return std::nullopt;
}

/// Catalogue and licence check, then reuse, for every item (docs/protocol.md §2 rows "not ready", "reuse", "database
/// slow").
void service::decide_catalogue(batch_request& batch, bool stale_db, time_point now) {
  for (std::size_t i = 0; i < batch.n; ++i) {
    auto& it = batch.items[i];
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
    } else if (!batch.reuse_prefix.empty()) {
      auto const* r = reuse_.find(batch.reuse_key(it));
      if (r != nullptr && r->expires_at - now >= reuse_margin) {
        it.status = 200;
        it.reused = true;
        it.ticket = *r;
      }
    }
  }
}

/// Play items take one unit each; one that would wait at most the hold window (real clock only) reserves its
/// unit and is held. Returns how long to hold.
std::chrono::duration<double> service::decide_plays(batch_request& batch, continuous_bucket& bucket, time_point now) {
  auto hold = std::chrono::duration<double>::zero();
  double const hold_s = std::chrono::duration<double>(cfg_.hold_window).count();
  for (std::size_t i = 0; i < batch.n; ++i) {
    auto& it = batch.items[i];
    if (it.status != 0 || !it.play) {
      continue;
    }
    if (bucket.try_take(1, now)) {
      it.grant = true;
      continue;
    }
    double wait = bucket.seconds_until(1, now);
    if (!clock_.manual() && wait <= hold_s) {
      // docs/protocol.md §2: a play arriving a few hundred ms before room returns is held, then granted. The unit is
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
  return hold;
}

/// Prefetch is never held: granted while at least 20 % of the limit is left after the plays, else shed.
void service::decide_prefetches(batch_request& batch, continuous_bucket& bucket, time_point now) {
  double const floor_units = shed_level * bucket.limit();
  for (std::size_t i = 0; i < batch.n; ++i) {
    auto& it = batch.items[i];
    if (it.status != 0 || it.play) {
      continue;
    }
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

/// Issues the granted tickets (counting them) and remembers them for reuse; returns the request id.
std::string service::issue_granted(batch_request& batch) {
  std::lock_guard lock(mutex_);
  auto now = clock_.now();
  std::string request_id = "req_" + random_token(20);
  for (std::size_t i = 0; i < batch.n; ++i) {
    auto& it = batch.items[i];
    if (it.reused) {
      ++stats_.tickets_reused;
    }
    if (!it.grant) {
      continue;
    }
    it.status = 200;
    it.ticket = issue_ticket(it.film_ref, it.episode_no, batch.union_info, batch.drm_kek, now);
    ++stats_.tickets_counted;
    if (it.held) {
      ++stats_.held_play;
    }
    if (!batch.reuse_prefix.empty()) {
      reuse_.put(batch.reuse_key(it), it.ticket, it.ticket.expires_at - reuse_margin);
    }
  }
  return request_id;
}

namespace {

/// Each item of the answer: the ticket when 200, else its error code, reason and `retry_after`.
template <typename Item> void write_items(json_writer& w, Item const* items, std::size_t n) {
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
  w.end_array();
}

} // namespace

/// The answer: whole-request status (docs/protocol.md §1): 200 if anything was granted or reused; else 429 if every
/// item was refused for rate; else 503 if an item could not be issued in time; else the first item's status.
http_reply service::batch_reply(batch_request const& batch, org_state const& org, std::string const& request_id,
                                bool& granted_any) {
  auto const& items = batch.items;
  bool any_ok = false;
  bool all_rate = true;
  bool any_503 = false;
  bool all_shed = true;
  std::optional<std::uint32_t> min_retry;
  for (std::size_t i = 0; i < batch.n; ++i) {
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
  http_reply r;
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
  write_items(w, items.data(), batch.n);
  w.end_object();

  append_header(r.headers, "X-Request-Id", request_id);
  if ((r.status == 429 || r.status == 503) && min_retry) {
    append_header(r.headers, "Retry-After", *min_retry);
  }
  if (r.status == 429) {
    append_header(r.headers, "X-RateLimit-Limit", org.org.limits.playback);
    append_header(r.headers, "X-RateLimit-Window", 60u);
  }
  return r;
}

} // namespace wandura::emulator::detail
