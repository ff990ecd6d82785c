// A Lua script run with EVALSHA: its SHA-1 is computed here once; on NOSCRIPT (a restarted or flushed Redis) it
// is sent once with EVAL, which runs it and caches it in Redis again. Not public API.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include <asio/awaitable.hpp>

#include "fallback_guard.hpp"
#include "wandura/fleet/redis_client.hpp"

namespace wandura::detail {

class redis_script {
public:
  /// @param access whether the script writes: what `run_or_fall_back` tells the guard (`redis_access`).
  redis_script(std::string_view source, redis_access access);

  /// Runs the script with `keys` and `args`: one round trip (two after NOSCRIPT), each within the client's
  /// command timeout. Completes as `redis_client::async_command` does, never throws. `compensate`, if set, goes
  /// with each command sent (see `redis_client::async_command`).
  [[nodiscard]] asio::awaitable<std::tuple<std::error_code, redis_reply>> run(redis_client& redis,
                                                                              std::span<std::string_view const> keys,
                                                                              std::span<std::string_view const> args,
                                                                              redis_compensation compensate = {}) const;

  /// `EVAL` of the script with `keys` and `args`, as a command to send later (a compensation): the source, not the
  /// SHA-1, so that it runs even on a Redis that lost its script cache meanwhile.
  [[nodiscard]] std::vector<std::string> eval_command(std::span<std::string const> keys,
                                                      std::span<std::string const> args) const;

  [[nodiscard]] std::string const& sha1() const noexcept { return sha1_; }
  [[nodiscard]] redis_access access() const noexcept { return access_; }

private:
  std::string_view source_;
  std::string sha1_;
  redis_access access_;
};

/// Whether Redis ran a script `run_or_fall_back` ended with.
enum class script_ran {
  no,    ///< not sent (the guard answered locally, no connection, the client refused it), or refused by Redis
         ///< with an error reply (not one the script itself raised)
  maybe, ///< sent, no reply (timed out, the connection broke, cancelled)
  yes,   ///< answered
};

/// Runs `script` unless `guard` says to answer locally. The reply when Redis answered with a reply `valid`
/// accepts; nothing otherwise: a fallback counted by `guard`. An error reply about this call's keys
/// (`concerns_one_call`) falls back for this call alone (`redis_turn::call_failed`); any other failure starts
/// or prolongs an outage (`redis_turn::failed`, one WARN line per outage). `compensate` undoes what
/// the script did when Redis runs it after all, once the caller answered locally or was cancelled. `ran`, if
/// given, says whether Redis may have run the script (set before the operation ends, with an exception too).
/// @throws wandura::error with `operation_aborted` when cancelled; `what` names the operation in its message.
[[nodiscard]] asio::awaitable<std::optional<redis_reply>>
run_or_fall_back(redis_script const& script, redis_client& redis, fallback_guard& guard,
                 std::span<std::string_view const> keys, std::span<std::string_view const> args,
                 bool (*valid)(redis_reply const&), std::string_view what, redis_compensation compensate = {},
                 script_ran* ran = nullptr);

} // namespace wandura::detail
