#include "redis_server.hpp"

#include <array>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace test_support {
namespace {

bool answers_ping(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
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
    // A server started with --requirepass answers -NOAUTH: up all the same.
    auto const got = ::recv(fd, buf.data(), buf.size(), 0);
    std::string const head(buf.data(), got > 0 ? static_cast<std::size_t>(got) : 0U);
    ok = head.starts_with("+PONG") || head.starts_with("-NOAUTH");
  }
  ::close(fd);
  return ok;
}

} // namespace

std::optional<std::string> redis_server::find_binary() {
  if (char const* env = std::getenv("WANDURA_REDIS_SERVER"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  char const* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    auto end = dirs.find(':', begin);
    if (end == std::string::npos) {
      end = dirs.size();
    }
    auto candidate = std::filesystem::path(dirs.substr(begin, end - begin)) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
    begin = end + 1;
  }
  return std::nullopt;
}

std::uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr const*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("no free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

redis_server::redis_server(std::string binary, std::vector<std::string> extra_args)
    : binary_(std::move(binary)), extra_args_(std::move(extra_args)), port_(free_loopback_port()) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "wandura-redis-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  dir_ = tmpl;
  start();
}

redis_server::~redis_server() {
  kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void redis_server::start() {
  std::string const port = std::to_string(port_);
  std::vector<std::string> args{binary_,
                                "--port",
                                port,
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--dir",
                                dir_.string(),
                                "--daemonize",
                                "no",
                                "--loglevel",
                                "warning",
                                "--logfile",
                                (dir_ / "redis.log").string()};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlives a test that crashed
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    ::execv(binary_.c_str(), argv.data());
    ::_exit(127);
  }
  auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    if (answers_ping(port_)) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  throw std::runtime_error("redis-server did not answer PING on port " + port + " within 5 s");
}

void redis_server::pause() const {
  ::kill(pid_, SIGSTOP);
}

void redis_server::resume() const {
  ::kill(pid_, SIGCONT);
}

void redis_server::kill() {
  if (pid_ <= 0) {
    return;
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

} // namespace test_support
