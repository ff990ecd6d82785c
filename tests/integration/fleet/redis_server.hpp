// A private redis-server for a test: on a free loopback port, no persistence, in a temporary directory; paused
// (SIGSTOP), resumed (SIGCONT), killed (SIGKILL) and restarted on the same port by the test.
#pragma once

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace test_support {

class redis_server {
public:
  /// The redis-server binary on PATH (or $WANDURA_REDIS_SERVER), if any: tests skip only when this is empty.
  static std::optional<std::string> find_binary();

  /// Starts a server on a free loopback port and waits (at most 5 s) until it answers PING.
  /// @throws std::runtime_error when it cannot be started.
  /// @param extra_args appended to the command line, e.g. {"--requirepass", "secret"}.
  explicit redis_server(std::string binary, std::vector<std::string> extra_args = {});
  ~redis_server();
  redis_server(redis_server const&) = delete;
  redis_server& operator=(redis_server const&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  /// The server's process id (-1 after `kill`): for a benchmark that reads its CPU time.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  void pause() const;  ///< SIGSTOP: the server keeps its sockets and answers nothing (Redis "slow").
  void resume() const; ///< SIGCONT.
  void kill();         ///< SIGKILL and reap: connections reset, the port refuses (Redis "down").
  void start();        ///< starts again on the same port and waits until it answers PING.

private:
  std::string binary_;
  std::vector<std::string> extra_args_;
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

/// A free TCP port on 127.0.0.1 (bound and released; a race with another process is possible but unlikely).
std::uint16_t free_loopback_port();

} // namespace test_support
