#include "redis_script.hpp"

#include <array>
#include <vector>

#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <openssl/sha.h>

#include "wandura/error.hpp"

namespace wandura::detail {

redis_script::redis_script(std::string_view source, redis_access access) : source_(source), access_(access) {
  std::array<unsigned char, SHA_DIGEST_LENGTH> digest{};
  SHA1(reinterpret_cast<unsigned char const*>(source.data()), source.size(), digest.data());
  constexpr std::string_view hex = "0123456789abcdef";
  sha1_.reserve(digest.size() * 2);
  for (unsigned char byte : digest) {
    sha1_.push_back(hex[byte >> 4U]);
    sha1_.push_back(hex[byte & 0x0FU]);
  }
}

asio::awaitable<std::tuple<std::error_code, redis_reply>> redis_script::run(redis_client& redis,
                                                                            std::span<std::string_view const> keys,
                                                                            std::span<std::string_view const> args,
                                                                            redis_compensation compensate) const {
  std::string const key_count = std::to_string(keys.size());
  std::array<std::string_view, 16> small{};
  std::vector<std::string_view> large;
  std::size_t const argc = 3 + keys.size() + args.size();
  std::span<std::string_view> argv = small;
  if (argc > small.size()) {
    large.resize(argc);
    argv = large;
  }
  argv = argv.first(argc);
  argv[0] = "EVALSHA";
  argv[1] = sha1_;
  argv[2] = key_count;
  std::copy(keys.begin(), keys.end(), argv.begin() + 3);
  std::copy(args.begin(), args.end(), argv.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));
  constexpr auto token = asio::experimental::as_tuple(asio::use_awaitable);
  auto outcome = co_await redis.async_command(argv, compensate, token);
  auto const& [ec, reply] = outcome;
  if (ec == fleet_errc::server_error && reply.text.starts_with("NOSCRIPT")) {
    argv[0] = "EVAL";
    argv[1] = source_;
    outcome = co_await redis.async_command(argv, std::move(compensate), token);
  }
  co_return outcome;
}

std::vector<std::string> redis_script::eval_command(std::span<std::string const> keys,
                                                    std::span<std::string const> args) const {
  std::vector<std::string> command;
  command.reserve(3 + keys.size() + args.size());
  command.emplace_back("EVAL");
  command.emplace_back(source_);
  command.push_back(std::to_string(keys.size()));
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

namespace {
/// Whether Redis may have run a command that ended with `ec` and `reply` (redis_client::async_command's errors).
script_ran ran_with(std::error_code ec, redis_reply const& reply) noexcept {
  if (!ec) {
    return script_ran::yes;
  }
  if (ec == fleet_errc::server_error) {
    // An error the script raised (Redis names it `user_script`) may come after a write of it; any other refused
    // the command (NOSCRIPT, OOM, READONLY, BUSY, LOADING, NOPERM).
    return std::string_view(reply.text).find("user_script") != std::string_view::npos ? script_ran::maybe
                                                                                      : script_ran::no;
  }
  if (ec == fleet_errc::overloaded || ec == errc::invalid_argument) {
    return script_ran::no; // refused by the client before it was sent
  }
  if (ec == errc::connect_failed) {
    return script_ran::no; // no connection: refused, or within the backoff after a failed connect
  }
  // Timeouts, a broken connection (one whose AUTH or SELECT went unanswered within the connect timeout included: the
  // command was written behind them), cancelled; a refused AUTH or SELECT (the commands pipelined behind them may
  // have run, as the user already logged in or in database 0); the client closed with the command written.
  return script_ran::maybe;
}
} // namespace

asio::awaitable<std::optional<redis_reply>> run_or_fall_back(redis_script const& script, redis_client& redis,
                                                             fallback_guard& guard,
                                                             std::span<std::string_view const> keys,
                                                             std::span<std::string_view const> args,
                                                             bool (*valid)(redis_reply const&), std::string_view what,
                                                             redis_compensation compensate, script_ran* ran) {
  // Cancelled (with the reply, or by Asio at the co_await when already cancelled) or out of memory, the operation
  // ends without an outcome, and `turn` releases its probe as it goes.
  auto turn = guard.ask_redis(std::chrono::steady_clock::now(), script.access());
  if (!turn) {
    co_return std::nullopt;
  }
  script_ran unused = script_ran::no;
  script_ran& outcome = ran != nullptr ? *ran : unused;
  outcome = script_ran::maybe; // until the command ends: cancelled, it may have been written
  auto [ec, reply] = co_await script.run(redis, keys, args, std::move(compensate));
  outcome = ran_with(ec, reply);
  if (ec == asio::error::operation_aborted) {
    throw error(ec, std::string(what) + ": cancelled");
  }
  if (!ec && valid(reply)) {
    turn.answered();
    co_return std::move(reply);
  }
  auto const failure = ec ? ec : make_error_code(fleet_errc::unexpected_reply);
  std::string_view const refusal = reply.is_error() ? std::string_view(reply.text) : std::string_view();
  if (concerns_one_call(failure, refusal)) {
    turn.call_failed(failure, std::chrono::steady_clock::now(), refusal); // this call only: Redis is fine
  } else {
    turn.failed(failure, std::chrono::steady_clock::now(), refusal);
  }
  co_return std::nullopt;
}

} // namespace wandura::detail
