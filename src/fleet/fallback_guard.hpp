// The degrade-never-block state that every shared-state class keeps: whether Redis is worth asking now, how many
// answers came from local state, the one WARN line per outage, and which failures are an outage at all (a script's
// error about the keys of one call is not). An operation asks the guard for a turn (`redis_turn`) and reports through
// it how Redis answered. Not public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "wandura/fleet/fallback.hpp"

namespace wandura::detail {

/// Whether an error reply to a script concerns the keys of that one call, not Redis: the script ran and stopped on
/// what one of its keys held (`WRONGTYPE`, a value a command or the Lua arithmetic refused: code `ERR` or
/// `WRONGTYPE`, raised inside the script, which Redis marks with `@user_script:`). False for every other failure:
/// no reply (timeout, reset, refused connection), a reply before the script ran (`LOADING`, `BUSY`, `NOSCRIPT`,
/// `ERR unknown command`), and a server state raised inside it (`OOM`, `READONLY`, `NOPERM`, `MISCONF`, an ACL's
/// `ERR The user executing the script can't ...`), which every other call would meet too. @param ec how the command
/// completed; @param reply_text the error reply's text.
[[nodiscard]] bool concerns_one_call(std::error_code ec, std::string_view reply_text) noexcept;

/// What an operation does in Redis. A Redis may answer reads and refuse writes (a read-only replica, `OOM` under
/// `noeviction`, an ACL): an outage that a refused write opened is ended by a write answered, never by a read.
enum class redis_access {
  read, ///< reads only (`MGET`, a read-only script): an answer ends an outage that a read opened
  write ///< writes (a script that stores, takes or erases): an answer ends every outage
};

class redis_turn;

/// @par Thread safety
/// None of its own: a part uses its guard, and the turns it hands out, on its Redis client's executor only.
class fallback_guard {
public:
  /// The most often `redis_turn::call_failed` writes a line: the first of such failures, then at most one a minute.
  static constexpr std::chrono::minutes call_failure_log_interval{1};

  /// @param what the class, e.g. "ticket_cache"; @param server `host:port/db`, without credentials.
  /// @param key_kind what the class's keys hold, e.g. "viewer bucket": named in `redis_turn::call_failed`'s line.
  fallback_guard(std::string what, std::string server, fallback_options options, std::string key_kind);

  /// A turn that is true when the operation should ask Redis: no outage, or this operation is the outage's probe:
  /// the first operation that could end it (`access` at least that of the failure that opened it) once
  /// `probe_interval` passed since the last failure, while no other probe is in flight. Never after the client was
  /// closed (`asio::error::shut_down`). A false turn counts a fallback: the caller answers locally. A true one
  /// obliges the caller to report the outcome through it (`redis_turn`).
  [[nodiscard]] redis_turn ask_redis(std::chrono::steady_clock::time_point now, redis_access access);

  /// Redis answered an operation that takes no turn (the ticket cache's read of every key, which nothing awaits):
  /// ends an outage as an answered turn of `access` would, with its INFO line. Without it a part whose operations
  /// all find their answers locally once Redis is back (a ticket cache whose replica of keys answers every lookup)
  /// would stay `degraded` with nothing left to probe Redis.
  void answered_without_turn(redis_access access) { redis_answered(access); }

  /// Answers that came from local state since construction.
  [[nodiscard]] std::uint64_t fallbacks() const noexcept { return fallbacks_; }
  /// True while the class answers locally.
  [[nodiscard]] bool degraded() const noexcept { return degraded_; }
  /// How many operations reported a failure (`redis_turn::failed` or `call_failed`), and with what error the latest
  /// (none before the first): whether an operation that fell back was sent, and how it failed.
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }
  [[nodiscard]] std::error_code last_failure() const noexcept { return last_failure_; }

private:
  friend class redis_turn;

  // What a turn reports (`redis_turn`), and its end without an outcome. `probe`: the turn is the outage's probe;
  // only the probe's end (with an outcome or without) frees the place of the probe in flight. An operation let
  // through before the outage began that ends meanwhile leaves the probe's place alone.
  void redis_answered(redis_access access);
  void redis_not_asked(bool probe) noexcept { probing_ = probing_ && !probe; }
  void redis_failed(std::error_code ec, std::chrono::steady_clock::time_point now, redis_access access, bool probe,
                    std::string_view refusal);
  void call_failed(std::error_code ec, std::chrono::steady_clock::time_point now, bool probe, std::string_view refusal);

  std::string what_;
  std::string server_;
  fallback_options options_;
  std::string key_kind_;
  bool degraded_ = false;
  bool shut_down_ = false;
  redis_access outage_access_ = redis_access::read; ///< of the failure that opened the outage
  bool probing_ = false;                            ///< a probe of the outage is in flight
  std::chrono::steady_clock::time_point retry_at_{};
  std::uint64_t fallbacks_ = 0;
  std::uint64_t fallbacks_at_outage_ = 0;
  std::uint64_t failures_ = 0;
  std::error_code last_failure_;
  std::uint64_t call_failures_unlogged_ = 0;
  std::chrono::steady_clock::time_point call_failure_logged_at_{};
  bool call_failure_logged_ = false;
};

/// An operation's turn to ask Redis, handed out by `fallback_guard::ask_redis`: true when the operation asks Redis,
/// false when it answers locally (a fallback, counted already). A true turn obliges the caller to report how Redis
/// answered, once: `answered`, `failed` or `call_failed`. A turn that ends without an outcome (the operation was
/// cancelled, or it threw: a cancellation Asio throws at the `co_await`, out of memory) releases the probe in flight
/// if it is the probe, so that the next operation may probe: a probe that never reported would leave its part
/// answering locally for good. One that reported leaves the guard alone when it ends.
///
/// @par Thread safety
/// As its guard's: used where the guard is, on the part's Redis client executor.
/// @par Lifetime
/// Must not outlive the guard that handed it out. Moved, the outcome is owed by the new owner; the moved-from turn
/// is false and owes nothing.
class [[nodiscard]] redis_turn {
public:
  redis_turn(redis_turn&& other) noexcept
      : guard_(std::exchange(other.guard_, nullptr)), access_(other.access_), probe_(other.probe_) {}
  redis_turn& operator=(redis_turn&& other) noexcept;
  redis_turn(redis_turn const&) = delete;
  redis_turn& operator=(redis_turn const&) = delete;
  /// Without an outcome reported: releases the probe in flight, when this turn is it.
  ~redis_turn();

  /// True while the operation asks Redis and has not reported the outcome yet.
  explicit operator bool() const noexcept { return guard_ != nullptr; }

  // Each of the three below reports the outcome and ends the turn (false from then on); on a false turn it does
  // nothing.

  /// Redis answered: ends an outage that an operation of this turn's kind or a lesser one opened (one INFO line); a
  /// read answered leaves an outage that a refused write opened as it is.
  void answered();
  /// Redis failed the operation with `ec`: counts a fallback, starts an outage (one WARN line) or prolongs it (a
  /// write failed in an outage a read opened makes it a write's). With `asio::error::shut_down` (the fleet was shut
  /// down) the part answers locally from then on, without a line: the fleet logs the shutdown once for all its
  /// parts.
  /// @param now when it failed: the next probe comes `probe_interval` after it.
  /// @param refusal the text of Redis's error reply, if it answered one (`NOAUTH ...`, `NOPERM ...`, `OOM ...`,
  ///        `READONLY ...`): quoted in the WARN line (one bounded, printable line), which would otherwise say only
  ///        that Redis answered an error, not which. The arguments Redis echoes after an unknown command (", with
  ///        args beginning with: ...": envelopes, viewer keys) are left out.
  void failed(std::error_code ec, std::chrono::steady_clock::time_point now, std::string_view refusal = {});
  /// Redis answered the call with an error about that call's keys (`concerns_one_call`): counts a fallback and a
  /// failure for that call alone; Redis is still asked by the next call (no outage, `degraded` unchanged). Writes
  /// a WARN line naming the keys' kind and quoting the reply (never a key: a viewer_ref stays out of the log), at
  /// most one per `fallback_guard::call_failure_log_interval`, saying how many such calls the previous line left
  /// unsaid.
  void call_failed(std::error_code ec, std::chrono::steady_clock::time_point now, std::string_view refusal);

private:
  friend class fallback_guard;
  redis_turn(fallback_guard* guard, redis_access access, bool probe) noexcept
      : guard_(guard), access_(access), probe_(probe) {}

  fallback_guard* guard_; ///< null when the operation answers locally, or once the outcome is reported
  redis_access access_;
  bool probe_; ///< the outage's probe: its end frees the probe's place
};

} // namespace wandura::detail
