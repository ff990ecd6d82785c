#include "worker_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <thread>

extern char** environ;

namespace demo {
namespace {

[[noreturn]] void throw_errno(char const* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

/// A pipe whose ends are above the standard fds and the worker's fd 3 (so that dup2 onto them always copies), both
/// close-on-exec.
void make_pipe(int (&ends)[2]) {
  int raw[2];
  if (::pipe2(raw, O_CLOEXEC) != 0) {
    throw_errno("pipe2");
  }
  for (int i = 0; i < 2; ++i) {
    ends[i] = ::fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
    ::close(raw[i]);
  }
  if (ends[0] < 0 || ends[1] < 0) {
    throw_errno("fcntl(F_DUPFD_CLOEXEC)");
  }
}

std::string describe(int status) {
  if (WIFEXITED(status)) {
    return "exit status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "status " + std::to_string(status);
}

} // namespace

worker_process::worker_process(std::string const& program, std::vector<std::string> const& args,
                               std::vector<std::string> const& env) {
  int input[2];
  int report[2];
  make_pipe(input);
  try {
    make_pipe(report);
  } catch (...) {
    ::close(input[0]);
    ::close(input[1]);
    throw;
  }
  std::vector<std::string> argv_text{program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_text(env);
  std::vector<char*> envp;
  for (auto& e : env_text) {
    envp.push_back(e.data());
  }
  for (char** e = environ; *e != nullptr; ++e) {
    envp.push_back(*e);
  }
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, report[1], worker_report_fd);
  int const rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(input[0]);
  ::close(report[1]);
  if (rc != 0) {
    ::close(input[1]);
    ::close(report[0]);
    pid_ = -1;
    throw std::system_error(rc, std::generic_category(), "posix_spawn " + program);
  }
  input_fd_ = input[1];
  report_fd_ = report[0];
  ::fcntl(report_fd_, F_SETFL, ::fcntl(report_fd_, F_GETFL) | O_NONBLOCK);
}

worker_process::~worker_process() {
  if (pid_ > 0 && ended_.empty()) {
    kill();
    reap(std::chrono::milliseconds(2000));
  }
  if (input_fd_ >= 0) {
    ::close(input_fd_);
  }
  if (report_fd_ >= 0) {
    ::close(report_fd_);
  }
}

void worker_process::send(std::string const& line) {
  std::string const text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) { // the parent ignores SIGPIPE: a worker gone is EPIPE here
    auto const n = ::write(input_fd_, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw_errno("write to a worker");
    }
    done += static_cast<std::size_t>(n);
  }
}

bool worker_process::read_lines(std::vector<std::string>& lines) {
  if (report_fd_ < 0) {
    return false;
  }
  char chunk[65536];
  for (;;) {
    auto const n = ::read(report_fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    bool const open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    std::size_t start = 0;
    for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n', start)) {
      lines.push_back(buffer_.substr(start, nl - start));
      start = nl + 1;
    }
    buffer_.erase(0, start);
    if (!open) {
      ::close(report_fd_);
      report_fd_ = -1;
    }
    return open;
  }
}

std::string worker_process::reap(std::chrono::milliseconds limit) {
  if (!ended_.empty() || pid_ <= 0) {
    return ended_;
  }
  auto const until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    auto const got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      ended_ = describe(status);
      return ended_;
    }
    if (got < 0 && errno != EINTR) {
      ended_ = "lost (waitpid failed)";
      return ended_;
    }
    if (std::chrono::steady_clock::now() >= until) {
      kill();
      if (::waitpid(pid_, &status, 0) == pid_) {
        ended_ = describe(status) + " (did not exit in time)";
      } else {
        ended_ = "lost (waitpid failed)";
      }
      return ended_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void worker_process::kill() noexcept {
  if (pid_ > 0 && ended_.empty()) {
    ::kill(pid_, SIGKILL);
  }
}

} // namespace demo
