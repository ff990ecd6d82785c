#include "private_redis.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace demo {
namespace {

std::uint16_t free_loopback_port() {
  int const fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bool const ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr const*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) {
    ::close(fd);
  }
  if (!ok) {
    throw std::runtime_error("no free loopback port for redis-server");
  }
  return ntohs(addr.sin_port);
}

bool answers_ping(std::uint16_t port) {
  int const fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr const*>(&addr), sizeof addr) == 0 &&
      ::send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
    std::array<char, 16> buf{};
    auto const got = ::recv(fd, buf.data(), buf.size(), 0);
    ok = got > 0 && std::string_view(buf.data(), static_cast<std::size_t>(got)).starts_with("+PONG");
  }
  ::close(fd);
  return ok;
}

/// fork and exec of `argv` (stdout to /dev/null), the child killed by the kernel when the thread that started it
/// ends (PR_SET_PDEATHSIG, as the workers are): a demo killed by a signal it cannot catch leaves no redis-server
/// behind. posix_spawn has no place for the prctl. Only async-signal-safe calls between fork and exec. Returns the
/// child's pid, or -1 with errno set.
pid_t spawn_bound_to_this_thread(std::vector<char*> const& argv) {
  pid_t const parent = ::getpid();
  pid_t const child = ::fork();
  if (child != 0) {
    return child;
  }
  int const null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDOUT_FILENO) < 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
      ::getppid() != parent) { // the parent died before the prctl
    ::_exit(127);
  }
  ::execve(argv[0], argv.data(), environ);
  ::_exit(127);
}

} // namespace

std::optional<std::string> private_redis::find_binary() {
  if (char const* env = std::getenv("WANDURA_REDIS_SERVER"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  char const* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    auto const end = std::min(dirs.find(':'), dirs.size());
    auto const candidate = std::filesystem::path(dirs.substr(0, end)) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
    dirs.remove_prefix(std::min(end + 1, dirs.size()));
  }
  return std::nullopt;
}

private_redis::private_redis() {
  auto const binary = find_binary();
  if (!binary) {
    throw std::runtime_error("--shared-state auto: no redis-server on PATH (install the redis-server package, or "
                             "set WANDURA_REDIS_SERVER to its path)");
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "smooth-playback-redis-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("--shared-state auto: cannot make a temporary directory");
  }
  dir_ = tmpl;
  port_ = free_loopback_port();
  std::vector<std::string> args{*binary,       "--port",    std::to_string(port_), "--bind",     "127.0.0.1",
                                "--save",      "",          "--appendonly",        "no",         "--dir",
                                dir_,          "--logfile", (dir_ / "redis.log"),  "--loglevel", "warning",
                                "--daemonize", "no"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_ = spawn_bound_to_this_thread(argv);
  if (pid_ < 0) {
    int const error = errno;
    cleanup();
    throw std::runtime_error("--shared-state auto: cannot start " + *binary + ": " +
                             std::generic_category().message(error));
  }
  auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!answers_ping(port_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      cleanup();
      throw std::runtime_error("--shared-state auto: redis-server exited at once (see its log in " + tmpl + ")");
    }
    if (std::chrono::steady_clock::now() >= until) {
      cleanup();
      throw std::runtime_error("--shared-state auto: redis-server did not answer PING within 5 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

private_redis::~private_redis() {
  cleanup();
}

void private_redis::cleanup() noexcept {
  kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void private_redis::kill() noexcept {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

} // namespace demo
