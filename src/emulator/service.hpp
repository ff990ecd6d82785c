// The emulated API behind the HTTP layer: organisations and keys, rate-limit counters, the ticket batch with
// shedding, holding and reuse, the idempotency store, the catalogue with its stale-database mode, fault rules and
// stats. The HTTP layer (connection.cpp) parses requests and writes replies; everything the API decides is here:
// service.cpp (dispatch, authentication, reads, faults, stats) and ticket_batch.cpp (the ticket batch and its
// idempotency store).
//
// Thread safety: every public member may be called from any thread; state is guarded by one mutex, never held
// across a suspension point (a held play waits on a steady_timer with the mutex released).
#pragma once

#include "wandura/emulator/emulator.hpp"

#include "emulator/catalogue.hpp"
#include "emulator/clock.hpp"
#include "emulator/expiring_map.hpp"
#include "emulator/rate_limiter.hpp"

#include <asio/awaitable.hpp>
#include <simdjson.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace wandura::emulator::detail {

/// The ranges of a typed fault rule, as the JSON forms read them (a known kind, status 200-599, `bytes_per_s` at
/// least 1, a `count` at least 1, a `probability` in [0,1], ...). `where` names it in the message (`faults[2]`).
/// @throws config_error naming the first field out of range.
void check_fault_rule(fault_rule const& r, std::string const& where);
/// The ranges of a typed configuration, as its JSON form reads them: `threads` at least 1, at least one
/// organisation, each with an id and keys of its own and limits 1-100,000,000, `overshoot` in [0,1], `hold_window`
/// 0-60 s, `idle_timeout` 1 ms to a day, `ticket_ttl_s` at most a week, each film a `film_ref` of its own and
/// 1-100,000 episodes, at most `max_fault_rules` fault rules and every rule's ranges (`check_fault_rule`).
/// server::start and parse_config call it, so the two forms accept the same. @throws config_error.
void check_config(config const& cfg);

/// docs/protocol.md §2: a reused ticket must have at least this long left.
inline constexpr auto reuse_margin = std::chrono::minutes(5);
/// docs/protocol.md §2: in stale_db mode answers may be this old.
inline constexpr auto stale_limit = std::chrono::minutes(5);
/// docs/protocol.md §1: idempotency keys are remembered this long.
inline constexpr auto idempotency_memory = std::chrono::hours(24);
/// Bounds on the in-memory stores (when full, the entry of no use soonest goes first).
inline constexpr std::size_t max_idempotency_entries = 100000;
inline constexpr std::size_t max_reuse_entries = 200000;
/// The reusable tickets are bounded in bytes too (their keys and fields), since a key holds the client's viewer_ref
/// and union_info (up to 64 KiB together): 200,000 of those would be 13 GiB. An ordinary ticket with its key counts
/// 400-600 bytes, so this bound binds only for tickets of long refs; past either bound the ticket of no use soonest
/// is forgotten first, and its identity's next ask gets a fresh ticket (docs/protocol.md §4).
inline constexpr std::size_t max_reuse_bytes = std::size_t{128} * 1024 * 1024;
inline constexpr std::size_t max_last_good_entries = 100000;
/// The idempotency store is bounded in bytes too (keys and stored answers), since an answer quotes the film refs of
/// its request: 100,000 answers of up to 64 KiB each would be 6 GiB. With ordinary answers (1-2 KB) this bound keeps
/// some 40,000 keys, many minutes of any test's retries; past either bound the oldest finished keys are forgotten
/// first (docs/protocol.md §4).
inline constexpr std::size_t max_idempotency_bytes = std::size_t{64} * 1024 * 1024;
/// docs/protocol.md §4: at most this many fault rules are installed at once (each request scans them).
inline constexpr std::size_t max_fault_rules = 1000;
/// docs/protocol.md §2: prefetch is shed below this fraction of the playback limit.
inline constexpr double shed_level = 0.20;
/// docs/protocol.md §1: at most this many episodes in one ticket batch.
inline constexpr std::size_t max_items = 3;

/// Waits `d` on the current coroutine's executor (no wait when `d` is zero).
asio::awaitable<void> sleep_for(std::chrono::milliseconds d);

/// One parsed HTTP request, as the HTTP layer hands it over.
struct http_request {
  std::string_view method;
  std::string target;
  std::string authorization;
  std::string idempotency_key;
  bool has_authorization = false;
  bool has_idempotency_key = false;
  std::string body;
  bool keep_alive = true;
  bool peer_is_loopback = false;
  /// A scratch parser owned by the connection (simdjson parsers are not thread-safe).
  simdjson::dom::parser* json = nullptr;

  /// The path part of the target (without `?query`).
  [[nodiscard]] std::string_view path() const noexcept {
    std::string_view t = target;
    return t.substr(0, t.find('?'));
  }
};

/// What the API answers; the HTTP layer adds Date, Content-Type, Content-Length and Connection.
struct http_reply {
  int status = 200;
  /// Extra header lines, each ending in CRLF (`Retry-After: 2\r\n`).
  std::string headers;
  std::string body;
};

/// The reason phrase of an HTTP status ("Too Many Requests").
std::string_view reason_phrase(int status) noexcept;

class service {
public:
  /// `cfg` as check_config accepts it (server::start checks it first).
  service(config cfg, emulator_clock& clock);

  [[nodiscard]] config const& cfg() const noexcept { return cfg_; }
  [[nodiscard]] emulator_clock& clock() noexcept { return clock_; }

  /// Handles one API request (`/v1/...`). `stale_db` serves catalog and licence checks from the last good answer;
  /// `delay` makes the execution slow: it waits after authentication and after the idempotency key is registered
  /// (so a repeat meanwhile gets `409 idempotency_in_progress`), before anything is decided or counted.
  asio::awaitable<http_reply> handle(http_request const& req, bool stale_db, std::chrono::milliseconds delay);

  /// Finds the first fault rule that hits a request to `path`, consuming one of its `count`.
  std::optional<fault_rule> take_fault(std::string_view path);
  /// The answer of a `status` fault (before authentication and idempotency).
  http_reply fault_reply(fault_rule const& rule, http_request const& req);

  void install_faults(std::vector<fault_rule> rules);
  std::size_t clear_faults();
  /// Counts an API response by status.
  void note_response(int status);

  [[nodiscard]] stats_snapshot stats() const;
  [[nodiscard]] std::string stats_json() const;

  /// A fresh `req_...` identifier.
  std::string next_request_id();

  /// A flat error reply `{"error":..,"error_code":..,"reason":..,"request_id":..}`.
  http_reply error_reply(int status, std::string_view error_code, std::string_view message,
                         std::string_view reason = {}, std::string_view extra_headers = {});

private:
  struct org_state {
    organisation org;
    continuous_bucket playback;
    continuous_bucket catalog;
    fixed_window creatives;
    fixed_window videos;
    fixed_window video;
    fixed_window config;
  };

  struct issued_ticket {
    std::string ticket_id;
    std::string manifest_url;
    std::string license_url;
    std::string drm_payload;
    time_point expires_at;
    std::string expires_at_text; // RFC 3339
  };
  /// What an issued ticket holds outside itself, counted against `max_reuse_bytes`.
  struct ticket_bytes {
    std::size_t operator()(issued_ticket const& t) const noexcept {
      return t.ticket_id.size() + t.manifest_url.size() + t.license_url.size() + t.drm_payload.size() +
             t.expires_at_text.size();
    }
  };

  struct idempotency_entry {
    std::array<unsigned char, 32> digest{};
    bool running = true;
    std::uint64_t generation = 0;
    time_point created;
    http_reply reply;
    /// What the entry counts against `max_idempotency_bytes`.
    std::size_t cost = 0;
  };

  /// Outcome of one film lookup: found, not found, or (stale mode) no answer recent enough.
  enum class lookup_result { found, not_found, unavailable };
  struct film_lookup {
    lookup_result result = lookup_result::not_found;
    film const* f = nullptr;
    std::chrono::seconds age{0};
  };

  struct batch_item;
  struct batch_request;
  using sha256_digest = std::array<unsigned char, 32>;

  org_state* authenticate(http_request const& req);
  film_lookup lookup_film(std::string_view film_ref, bool stale_db, time_point now);

  // ticket_batch.cpp
  asio::awaitable<http_reply> handle_tickets(http_request const& req, org_state& org, bool stale_db,
                                             std::chrono::milliseconds delay);
  std::optional<http_reply> begin_idempotent(std::string const& store_key, sha256_digest const& body_digest,
                                             std::uint64_t& generation);
  void finish_idempotent(std::string const& store_key, std::uint64_t generation, http_reply const& reply, bool granted);
  asio::awaitable<http_reply> execute_batch(http_request const& req, org_state& org, bool stale_db,
                                            std::chrono::milliseconds delay, bool& granted_any);
  std::optional<http_reply> read_batch(http_request const& req, org_state const& org, batch_request& out);
  void decide_catalogue(batch_request& batch, bool stale_db, time_point now);
  std::chrono::duration<double> decide_plays(batch_request& batch, continuous_bucket& bucket, time_point now);
  void decide_prefetches(batch_request& batch, continuous_bucket& bucket, time_point now);
  std::string issue_granted(batch_request& batch);
  static http_reply batch_reply(batch_request const& batch, org_state const& org, std::string const& request_id,
                                bool& granted_any);

  // service.cpp: reads
  http_reply handle_get(counter c, std::string_view rest, org_state& org, bool stale_db);
  std::optional<std::uint32_t> take_read_unit(counter c, org_state& org, time_point now);
  void write_list(counter c, std::string& body, std::string_view request_id) const;
  static void write_config(std::string& body, org_state const& org, std::string_view request_id);
  http_reply rate_limited_reply(counter c, org_state& org, std::uint32_t retry_after);
  issued_ticket issue_ticket(std::string_view film_ref, std::uint32_t episode_no, std::string_view union_info,
                             std::string_view drm_kek, time_point now);
  std::string random_token(std::size_t chars);
  void purge_idempotency(time_point now);
  void forget_idempotency(string_map<idempotency_entry>::iterator it);

  config cfg_;
  emulator_clock& clock_;

  mutable std::mutex mutex_;
  std::vector<org_state> orgs_;
  string_map<std::size_t> key_to_org_;
  string_map<std::size_t> films_;
  std::vector<open_video> videos_;
  std::vector<creative> creatives_;
  /// When each film of the catalogue was last answered by the "database": the stale_db mode's cache.
  expiring_map<time_point, time_point> last_good_{max_last_good_entries};
  /// Tickets by org, viewer_ref, union_info, film, episode and intent (docs/protocol.md §2 reuse).
  expiring_map<issued_ticket, time_point, ticket_bytes> reuse_{max_reuse_entries, max_reuse_bytes};
  /// Idempotency records by org and key; `idempotency_order_` evicts them oldest first (24 h, bounded).
  string_map<idempotency_entry> idempotency_;
  std::deque<std::pair<std::uint64_t, std::string>> idempotency_order_;
  std::uint64_t idempotency_generation_ = 0;
  /// The sum of the entries' `cost`.
  std::size_t idempotency_bytes_ = 0;
  std::vector<fault_rule> faults_;
  std::mt19937_64 rng_;
  std::int64_t expires_text_second_ = -1;
  std::string expires_text_;
  stats_snapshot stats_;
  std::array<std::uint64_t, counter_count> requests_{};
};

/// The RFC 3339 UTC form `2026-11-30T11:00:00Z` of `t`.
std::string rfc3339(time_point t);
/// The HTTP-date form `Mon, 30 Nov 2026 11:00:00 GMT` of `t`.
std::string http_date(time_point t);

} // namespace wandura::emulator::detail
