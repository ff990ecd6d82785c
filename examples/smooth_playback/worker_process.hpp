// One worker process of a fleet run, seen from its parent: this program started again (posix_spawn of
// /proc/self/exe) with the hidden `--worker K` option. Its stdin is a pipe from the parent, which sends the run's
// time 0 on it; its fd 3 is a pipe to the parent, on which it writes lines: `ready`, `progress ...`, `warn ...`,
// then `report {json}` or `error ...`. Its stdout and stderr are the parent's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace demo {

/// The fd a worker writes its lines to.
inline constexpr int worker_report_fd = 3;

/// @par Thread safety
/// Not thread-safe: one thread drives all the workers (with `poll` on their `report_fd`s).
class worker_process {
public:
  /// Starts `program` with `args` (without argv[0]) and `env` added to this process's environment.
  /// @throws std::system_error when the pipes or the process cannot be made.
  worker_process(std::string const& program, std::vector<std::string> const& args, std::vector<std::string> const& env);
  worker_process(worker_process const&) = delete;
  worker_process& operator=(worker_process const&) = delete;
  /// Kills the process (SIGKILL) if it still runs, and reaps it.
  ~worker_process();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// The read end of its line pipe, for `poll`; -1 once it reached end of file.
  [[nodiscard]] int report_fd() const noexcept { return report_fd_; }

  /// Writes `line` and a newline to its stdin. @throws std::system_error when it cannot (the worker is gone; the
  /// caller ignores SIGPIPE).
  void send(std::string const& line);

  /// Reads what is available without blocking and appends the complete lines to `lines`. Returns false once the
  /// worker closed its end (it exited or died); the last unterminated text is then dropped.
  bool read_lines(std::vector<std::string>& lines);

  /// Waits at most `limit` for the process to exit, then kills it. Returns how it ended: "exit status 0",
  /// "killed by signal 9"...
  std::string reap(std::chrono::milliseconds limit);

  /// SIGKILL (the process is reaped by `reap` or the destructor).
  void kill() noexcept;

private:
  pid_t pid_ = -1;
  int input_fd_ = -1;
  int report_fd_ = -1;
  std::string buffer_;
  std::string ended_;
};

} // namespace demo
