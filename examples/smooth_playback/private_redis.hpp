// The private redis-server of `--shared-state auto`: on a free loopback port, without persistence (`--save ''
// --appendonly no`), in a temporary directory, stopped when the run ends, on error too (SIGINT and SIGTERM unwind to
// the destructor, interrupt.hpp), and killed by the kernel when the thread that started it ends (PR_SET_PDEATHSIG):
// after a SIGKILL of the demo only the directory is left.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace demo {

class private_redis {
public:
  /// `$WANDURA_REDIS_SERVER`, else `redis-server` on PATH; nullopt when there is none.
  [[nodiscard]] static std::optional<std::string> find_binary();

  /// Starts it and waits (at most 5 s) until it answers PING. Construct it on a thread that lives as long as the
  /// run (the main thread): the server dies with that thread.
  /// @throws std::runtime_error when there is no redis-server (the message says how to get one) or it does not
  ///         answer in time.
  private_redis();
  private_redis(private_redis const&) = delete;
  private_redis& operator=(private_redis const&) = delete;
  /// Stops it (SIGKILL: nothing is kept) and removes its directory.
  ~private_redis();

  [[nodiscard]] std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  /// SIGKILL now, as a crash would: its clients see their connections reset and the port refuse.
  void kill() noexcept;
  [[nodiscard]] bool killed() const noexcept { return pid_ <= 0; }

private:
  void cleanup() noexcept; ///< `kill` and remove the directory.

  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

} // namespace demo
