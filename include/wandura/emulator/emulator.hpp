// The Wandura API emulator: an in-process HTTP/1.1 server that reproduces the playback API of docs/protocol.md §1, its
// behaviour under load (docs/protocol.md §2 "Rate limit") and the admin API of docs/protocol.md §4.
//
// It shares no code path with the client (docs/adr/0001-architecture.md): it speaks plain HTTP on a loopback socket,
// so it tests the SDK, `curl` or any other client alike. Tests and examples start it on an ephemeral port:
//
//     auto emu = wandura::emulator::server::start({});          // defaults: key "test-key", demo catalogue
//     // ... point a client at emu->base_url() ...
//     auto s = emu->stats();                                     // what the server counted
//     emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"status","status":503,"count":2}]})");
//     emu->stop();                                               // also done by the destructor
//
// The design (rate model, clock, idempotency store, fault semantics) is recorded in docs/adr/0005-emulator.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wandura::emulator {

/// The rate-limit counters of docs/protocol.md §1. Each organisation has one of each; a runaway job on one never blocks
/// another.
enum class counter {
  playback,  ///< `POST /v1/playback/tickets`, counts tickets granted; continuous refill.
  catalog,   ///< `GET /v1/catalog/films/{film_ref}`, counts requests; continuous refill.
  creatives, ///< `GET /v1/creatives`, counts requests; fixed UTC minute.
  videos,    ///< `GET /v1/videos`, counts requests; fixed UTC minute.
  video,     ///< `GET /v1/videos/{video_ref}`, counts requests; fixed UTC minute.
  config,    ///< `GET /v1/config`, counts requests; fixed UTC minute.
};

/// Number of `counter` values.
inline constexpr std::size_t counter_count = 6;

/// The counter's name as the wire and the stats use it ("playback", "catalog", ...).
[[nodiscard]] std::string_view to_string(counter c) noexcept;

/// Per-minute limits of one organisation (docs/protocol.md §4 defaults). `playback` is in tickets, the others in
/// requests.
struct limits {
  std::uint32_t playback = 6000;
  std::uint32_t catalog = 1200;
  std::uint32_t creatives = 600;
  std::uint32_t videos = 600;
  std::uint32_t video = 600;
  std::uint32_t config = 600;

  /// The limit of counter `c`.
  [[nodiscard]] std::uint32_t of(counter c) const noexcept;
};

/// An organisation: its API keys share its limits (adding keys never raises them, docs/protocol.md §2). Its
/// idempotency keys and reusable tickets are its own: the organisations of one configuration each need an id and
/// keys of their own (`server::start` refuses two of one id, two without one, or a key two list).
struct organisation {
  std::string id = "org_demo";
  std::vector<std::string> keys = {"test-key"};
  emulator::limits limits{};
};

/// A film of the catalogue. Episodes are numbered 1..episodes; asking past the last gets `404 not_ready`.
struct film {
  std::string film_ref;
  std::string title{};
  std::uint32_t episodes = 1;
  /// When false, every ticket item for this film gets `403 not_entitled`.
  bool entitled = true;
};

/// The kinds of scripted fault of docs/protocol.md §4.
enum class fault_kind {
  status,          ///< Answer with `status` without executing: the error body (`Retry-After` when given), and for
                   ///< a well-formed ticket batch its items too, each with that status, as the API answers a batch
                   ///< (docs/protocol.md §1). A client reads such an answer item by item, as it reads the API's.
  delay,           ///< Execute slowly: after authentication and after the idempotency key is registered, wait `ms`
                   ///< before deciding (a repeat meanwhile gets `409 idempotency_in_progress`).
  reset,           ///< Execute, send the headers and half of the body, then reset the connection.
  drop_after_read, ///< Read the whole request, then close without replying and without executing.
  truncate,        ///< Execute, then send a well-framed response whose JSON body is cut in half.
  garbage,         ///< Execute, then send a well-framed response whose body is not JSON.
  huge,            ///< Execute, then send the real JSON body padded with `bytes` of filler in an extra field.
  slow_body,       ///< Execute, then drip the body at `bytes_per_s`.
  stale_db,        ///< Handle the request as if the database were slow: catalog and licence checks come from the
                   ///< last good answer (at most 5 min old, docs/protocol.md §2), else `503 service_unavailable`.
  unreadable_item, ///< Execute, then send the answer with the `item`-th element of its `items` made unreadable: its
                   ///< `status` written as a string (`"status":"200"`), the rest of the body intact. An answer
                   ///< without that item (another path, fewer items) is sent as it is; the rule has hit it all the
                   ///< same (its `count` is used, `faults_injected` counts it).
};

/// The kind's name on the wire ("status", "delay", ...).
[[nodiscard]] std::string_view to_string(fault_kind k) noexcept;

/// One scripted fault. It matches requests whose path equals `path` or continues it with `/...`; an empty path or
/// `*` matches every API path (admin paths never). Without `count` and `probability` it hits every match.
struct fault_rule {
  std::string path;
  fault_kind kind = fault_kind::status;
  /// `status`: the HTTP status to answer with, 200-599 (a 1xx is not an answer and is refused). A 204 or 304 is
  /// sent without a body or `Content-Length` (RFC 9110 §6.4.1).
  int status = 503;
  /// `status`: the `Retry-After` header (seconds) and per-item `retry_after`; none when empty.
  std::optional<std::uint32_t> retry_after{};
  /// `status`: overrides the `error_code` the status implies (`503` -> `service_unavailable`, ...).
  std::string error_code{};
  /// `delay`: milliseconds to wait.
  std::uint32_t ms = 0;
  /// `huge`: bytes of padding.
  std::uint64_t bytes = 1u << 20;
  /// `slow_body`: drip rate in bytes per second (at least 1).
  std::uint64_t bytes_per_s = 1024;
  /// `unreadable_item`: which element of `items` (from 0; at most 1000).
  std::uint32_t item = 0;
  /// How many matching requests the rule hits; none = unlimited (or governed by `probability`).
  std::optional<std::uint64_t> count{};
  /// Chance in [0,1] that a matching request is hit, drawn from the emulator's seeded generator.
  std::optional<double> probability{};
};

/// Everything the emulator serves. Every field has the default of docs/protocol.md §4.
struct config {
  /// Organisations and their keys. Default: `org_demo` with key `test-key` and the default limits.
  std::vector<organisation> orgs = {organisation{}};
  /// The catalogue. Empty = the demo catalogue (about 50 films of 1-40 episodes, `the-heiress-returns` has 12).
  std::vector<film> films{};
  /// Lifetime of issued tickets in seconds, at most 604,800 (a week).
  std::uint32_t ticket_ttl_s = 1800;
  /// Faults installed at start (at most 1000, as for `server::install_faults`).
  std::vector<fault_rule> faults{};
  /// Seed of every random choice (ticket ids, request ids, fault probabilities). None = seeded from the OS.
  std::optional<std::uint64_t> seed{};
  /// When true the clock starts at the real UTC time and moves only through `server::advance_clock` or
  /// `POST /_emulator/clock`; play requests are then never held (they get 429 instead).
  bool manual_clock = false;
  /// Address to listen on. The admin API answers loopback peers only: 127.0.0.0/8 and ::1, and an IPv4 loopback
  /// peer of a dual-stack `::` socket (which appears as 127.0.0.1 mapped into IPv6).
  std::string host = "127.0.0.1";
  /// Port to listen on; 0 picks a free one (read it back with `server::port`).
  std::uint16_t port = 0;
  /// Threads running the server's io_context (at least 1). One thread = one core.
  unsigned threads = 1;
  /// How far a burst may overshoot a limit before 429 starts, as a fraction of the limit (docs/protocol.md §1: up to
  /// ~2.5 %). 0 makes the counters exact, which tests of the arithmetic prefer.
  double overshoot = 0.025;
  /// Longest time a play item is held waiting for room before it is refused (docs/protocol.md §2: about 0.5 s).
  std::chrono::milliseconds hold_window{500};
  /// Connections idle this long (no byte read or written, and no request being answered) are closed, and so are
  /// those whose request has not fully arrived this long after its first byte. A request worked on for longer (a
  /// `delay` fault, a held play) still gets its answer, unless its client closes its side meanwhile: the socket is
  /// then closed (within 250 ms for a delay fault), and the work goes on. 1 ms to 86,400,000 ms (a day): 0 does not
  /// mean "no timeout".
  std::chrono::milliseconds idle_timeout{60000};
};

/// The demo catalogue served when `config::films` is empty (docs/protocol.md §4): about 50 films of 1-40 episodes each,
/// `the-heiress-returns` (12 episodes) first. Deterministic: the same on every run, whatever the seed.
[[nodiscard]] std::vector<film> demo_catalogue();

/// A configuration file, the body of `POST /_emulator/faults` or a command-line value was not acceptable.
/// `what()` names the offending field, e.g. `orgs[0].limits.playback: expected an unsigned integer`.
class config_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Reads a configuration in the JSON format of docs/protocol.md §4 (`orgs`, `films`, `ticket_ttl_s`, `faults`) plus the
/// emulator's own optional fields `seed`, `overshoot` (fraction), `hold_window_ms` and `idle_timeout_ms`. Fields left
/// out keep their defaults; a limit left out keeps its default; `films`, when given, replaces the demo catalogue.
/// Read strictly, unlike the API's bodies: a key no reader knows, at any level, is refused (a misspelt `fualts` or
/// `stauts` would otherwise leave a fault out without a word), and so is a key given twice in one object.
/// @throws config_error when the text is not JSON, a field has the wrong type or range, a key is unknown (the
///         message names it and the keys known there) or given twice, `films` is empty, or the configuration is
///         inconsistent as `server::start` refuses it (two organisations of one id, a key two list, a film listed
///         twice, ...).
[[nodiscard]] config parse_config(std::string_view json);

/// The most bytes `load_config_file` reads: 16 MiB.
inline constexpr std::size_t max_config_file_bytes = std::size_t{16} << 20U;

/// Reads the file at `path` and parses it as `parse_config` does. Blocking (one `read` per 64 KiB); like
/// `parse_config` and `parse_fault_rules`, it keeps no state and may be called from any thread at once.
/// @throws config_error starting with `path`: the system's reason it cannot be read (no such file, a directory, no
///         permission), a file over `max_config_file_bytes` (`/dev/zero` included), or `parse_config`'s error.
[[nodiscard]] config load_config_file(std::string const& path);

/// Reads the body of `POST /_emulator/faults`: `{"rules":[...]}` (a bare array is accepted too).
/// @throws config_error when a rule has an unknown kind, an unknown key or one given twice, or a field has the wrong
///         type or range.
[[nodiscard]] std::vector<fault_rule> parse_fault_rules(std::string_view json);

/// What the server counted since it started (docs/protocol.md §4 `GET /_emulator/stats`).
struct stats_snapshot {
  /// Tickets granted and counted against a playback limit (held plays included, reused excluded).
  std::uint64_t tickets_counted = 0;
  /// Ticket items answered with a ticket already issued (`"reused": true`), counting 0.
  std::uint64_t tickets_reused = 0;
  /// Prefetch items refused with reason `prefetch_shed`.
  std::uint64_t tickets_shed = 0;
  /// Play items that waited for room (at most `hold_window`) and were then granted.
  std::uint64_t held_play = 0;
  /// Authorised API requests per counter name, refused ones included. A request answered by a fault rule's status
  /// or dropped by one never reached the API and is not here: `faults_injected` counts it (and `responses` the
  /// status); a delayed one is.
  std::map<std::string, std::uint64_t> requests;
  /// API responses by HTTP status (admin calls excluded).
  std::map<int, std::uint64_t> responses;
  /// Responses replayed from the idempotency store (`Idempotency-Replayed: true`).
  std::uint64_t idempotent_replays = 0;
  /// Requests a scripted fault hit.
  std::uint64_t faults_injected = 0;
};

/// A running emulator: a listening socket served by its own io_context thread(s), so that a test can drive a
/// client on another io_context or thread.
///
/// @par Thread safety
/// Every member function may be called from any thread, concurrently with requests being served, except that
/// `stop` (and the destructor) must not be called from the server's own threads: it joins them.
///
/// @par Cancellation
/// The API is synchronous; nothing here takes a completion token. Requests in flight when `stop` is called are
/// abandoned (their connections are closed), and a play held for room is dropped without a ticket.
class server {
public:
  /// Binds `cfg.host:cfg.port`, starts `cfg.threads` threads serving it and returns once it accepts connections.
  /// @throws config_error when `cfg` is inconsistent (no organisation, two of one id, a key two organisations list
  ///         or one no header can carry: empty, a control byte, a space at an end; a film listed twice, more than
  ///         1000 fault rules) or a field is
  ///         out of the range its JSON form allows (no thread, a limit of 0, an `overshoot` outside [0,1], an
  ///         `idle_timeout` outside 1 ms to a day, a `ticket_ttl_s` over a week, a film without a `film_ref` or
  ///         without episodes, a fault rule of no known kind or with a status outside 200-599, ...).
  /// @throws std::system_error when the address cannot be bound; `what()` names it ("cannot listen on 127.0.0.1:8787:
  /// ...").
  [[nodiscard]] static std::unique_ptr<server> start(config cfg);

  /// Stops the server (see `stop`).
  ~server();
  server(server const&) = delete;
  server& operator=(server const&) = delete;

  /// The port it listens on (the chosen one when `config::port` was 0).
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// `http://HOST:PORT` without a trailing slash.
  [[nodiscard]] std::string base_url() const;
  /// A consistent copy of the counters of `GET /_emulator/stats`.
  [[nodiscard]] stats_snapshot stats() const;
  /// The same JSON text `GET /_emulator/stats` returns.
  [[nodiscard]] std::string stats_json() const;

  /// Appends scripted fault rules, as `POST /_emulator/faults` does. Rules are tried in order; the first that hits a
  /// request applies, and only one applies per request. At most 1000 rules are installed at once.
  /// @throws config_error when the JSON is not a valid rule list, or when its rules would make more than 1000
  ///         installed (nothing is installed then).
  void install_faults(std::string_view json);
  /// Appends typed fault rules.
  /// @throws config_error when a rule is out of the ranges its JSON form allows, or when they would make more than
  ///         1000 installed (nothing is installed then).
  void install_faults(std::vector<fault_rule> rules);
  /// Removes every fault rule, as `DELETE /_emulator/faults` does.
  void clear_faults();

  /// Moves the manual clock forward, as `POST /_emulator/clock` does. Refill, fixed windows, ticket expiry and the
  /// idempotency memory all follow it. A negative `by` is ignored here: the clock never runs backwards (the HTTP
  /// endpoint, reading a number from a request, refuses one with 400 instead).
  /// @throws std::logic_error when the server was not started with `manual_clock`.
  /// @throws std::system_error with `std::errc::invalid_argument` when `by` would move the clock past
  ///         2200-01-01T00:00:00Z (`milliseconds::max()` does); the clock is then left where it was.
  void advance_clock(std::chrono::milliseconds by);
  /// The emulator's current UTC time.
  [[nodiscard]] std::chrono::system_clock::time_point now() const;

  /// Closes the listening socket and every connection, then joins the threads. Requests in flight are abandoned.
  /// Idempotent; the destructor calls it.
  /// @throws std::logic_error when called from one of the server's own threads.
  void stop();

  struct impl;

private:
  explicit server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace wandura::emulator
