// The degrade-never-block state that every shared-state class keeps: whether Redis is worth asking now, how many
// answers came from local state, and the one WARN line per outage. Not public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "wandura/fleet/fallback.hpp"

namespace wandura::detail {

class fallback_guard {
public:
  /// @param what the class, e.g. "ticket_cache"; @param server `host:port/db`, without credentials.
  fallback_guard(std::string what, std::string server, fallback_options options);

  /// True when the operation should ask Redis: it answered last time, or `probe_interval` passed since it failed;
  /// never after the client was closed (`asio::error::shut_down`). False counts a fallback: the caller answers
  /// locally.
  [[nodiscard]] bool ask_redis(std::chrono::steady_clock::time_point now);
  /// Redis answered: ends an outage (one INFO line).
  void redis_answered();
  /// Redis failed with `ec`: counts a fallback, starts an outage (one WARN line) or prolongs it. With
  /// `asio::error::shut_down` (the fleet was shut down) the part answers locally from then on, without a line:
  /// the fleet logs the shutdown once for all its parts.
  /// @param refusal the text of Redis's error reply, if it answered one (`NOAUTH ...`, `NOPERM ...`, `OOM ...`,
  ///        `READONLY ...`): quoted in the WARN line (one bounded, printable line), which would otherwise say only
  ///        that Redis answered an error, not which. The arguments Redis echoes after an unknown command (", with
  ///        args beginning with: ...": envelopes, viewer keys) are left out.
  void redis_failed(std::error_code ec, std::chrono::steady_clock::time_point now, std::string_view refusal = {});

  /// Answers that came from local state since construction.
  [[nodiscard]] std::uint64_t fallbacks() const noexcept { return fallbacks_; }
  /// True while the class answers locally.
  [[nodiscard]] bool degraded() const noexcept { return degraded_; }
  /// How many times `redis_failed` was called, and with what error the latest time (none before the first): whether
  /// an operation that fell back was sent, and how it failed.
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }
  [[nodiscard]] std::error_code last_failure() const noexcept { return last_failure_; }

private:
  std::string what_;
  std::string server_;
  fallback_options options_;
  bool degraded_ = false;
  bool shut_down_ = false;
  std::chrono::steady_clock::time_point retry_at_{};
  std::uint64_t fallbacks_ = 0;
  std::uint64_t fallbacks_at_outage_ = 0;
  std::uint64_t failures_ = 0;
  std::error_code last_failure_;
};

} // namespace wandura::detail
