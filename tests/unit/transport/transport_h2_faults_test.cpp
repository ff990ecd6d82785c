#include "wandura/transport/transport.hpp"

// Transport against a hostile HTTP/2 server over TLS on loopback: tests/support/h2_server/h2_faults.py (python3 and
// its `h2` library), started by each test with one scenario and stopped at its end. It uses the certificate and key
// of the nginx fixture `wandura_nginx` (tests/support/nginx/nginx.sh, which exports WANDURA_NGINX_DIR), whose names
// cover 127.0.0.1, and logs the connections and requests it saw, which the tests count. These are the behaviours an
// outside trial with such a server found wrong in the transport; each test says what the transport did before.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "run_awaitable.hpp"
#include "transport_fixtures.hpp"
#include "wandura/error.hpp"

extern char** environ; // NOLINT: POSIX; posix_spawn passes it on

namespace {

using namespace std::chrono_literals;
using test_support::nginx;
using test_support::post;
using test_support::run;

/// The fixture's certificate (also the CA the transport trusts) and its key, which nginx.sh writes beside it.
std::string certificate() {
  return nginx("WANDURA_NGINX_CA");
}
std::string certificate_key() {
  return (std::filesystem::path(certificate()).parent_path() / "key.pem").string();
}

/// h2_faults.py running one scenario, for one test: started by the constructor, which reads the port it listens on
/// from its first output line (10 s at most); stopped by the destructor with SIGTERM and waited for (5 s, then
/// SIGKILL), so that no process is left behind. Its standard input is a pipe from here: if this process dies, the
/// server sees the pipe close and ends too.
class h2_faults_server {
public:
  explicit h2_faults_server(std::string const& scenario) {
    try {
      start(scenario);
    } catch (...) {
      stop();
      throw;
    }
  }
  h2_faults_server(h2_faults_server const&) = delete;
  h2_faults_server& operator=(h2_faults_server const&) = delete;
  ~h2_faults_server() { stop(); }

  [[nodiscard]] std::string url(std::string const& path) const {
    return "https://127.0.0.1:" + std::to_string(port_) + path;
  }

  /// Requests the server has seen so far (each copy libcurl sent counts).
  [[nodiscard]] int requests() const { return count_lines("REQ "); }
  /// Connections it has accepted so far.
  [[nodiscard]] int connections() const { return count_lines("CONN "); }
  /// Its whole log, for a failure's message.
  [[nodiscard]] std::string log() const {
    std::ifstream in(log_path_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

private:
  void start(std::string const& scenario) {
    std::string log_template = (std::filesystem::temp_directory_path() / "wandura_h2_faults_XXXXXX").string();
    int const log_fd = ::mkstemp(log_template.data());
    if (log_fd < 0) {
      throw std::runtime_error("h2_faults_server: mkstemp failed");
    }
    ::close(log_fd);
    log_path_ = log_template;

    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) {
      throw std::runtime_error("h2_faults_server: pipe2 failed");
    }
    to_server_ = in[1];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      throw std::runtime_error("h2_faults_server: pipe2 failed");
    }
    from_server_ = out[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO); // dup2 clears close-on-exec on the copy
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::string python = "/usr/bin/python3"; // another python3 may come first on PATH, without python3-h2
    std::string script = WANDURA_H2_FAULTS_SERVER;
    std::string cert = certificate();
    std::string key = certificate_key();
    std::string scenario_arg = scenario;
    std::vector<char*> argv{python.data(),    script.data(), scenario_arg.data(), cert.data(), key.data(),
                            log_path_.data(), nullptr};
    int const rc = posix_spawn(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("h2_faults_server: cannot run " + python);
    }
    std::string line;
    for (int i = 0; i < 100 && line.find('\n') == std::string::npos; ++i) { // 100 polls of 100 ms: 10 s
      pollfd p{from_server_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      char buffer[64];
      auto const n = ::read(from_server_, buffer, sizeof buffer);
      if (n <= 0) {
        break; // it ended without a port: its error is on stderr (python3-h2 missing? scripts/install-deps.sh)
      }
      line.append(buffer, static_cast<std::size_t>(n));
    }
    port_ = std::atoi(line.c_str());
    if (line.find('\n') == std::string::npos || port_ <= 0) {
      throw std::runtime_error("h2_faults_server: no port from " + script + " " + scenario + " (got '" + line +
                               "'); is python3-h2 installed?");
    }
  }

  void stop() noexcept {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      bool reaped = false;
      for (int i = 0; i < 500 && !reaped; ++i) { // 5 s
        int status = 0;
        pid_t const r = ::waitpid(pid_, &status, WNOHANG);
        reaped = r == pid_ || (r < 0 && errno != EINTR);
        if (!reaped) {
          std::this_thread::sleep_for(10ms);
        }
      }
      if (!reaped) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
    for (int* fd : {&to_server_, &from_server_}) {
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
    }
    if (!log_path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove(log_path_, ignored);
      log_path_.clear();
    }
  }

  [[nodiscard]] int count_lines(std::string_view prefix) const {
    std::ifstream in(log_path_);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      n += line.rfind(prefix, 0) == 0 ? 1 : 0;
    }
    return n;
  }

  pid_t pid_ = -1;
  int to_server_ = -1;
  int from_server_ = -1;
  int port_ = 0;
  std::string log_path_;
};

wandura::transport_options trusting_the_fixture() {
  wandura::transport_options options;
  options.ca_bundle = certificate();
  return options;
}

} // namespace

TEST_CASE("transport to a hostile HTTP/2 server: a refused stream is sent again once and only when replayable") {
  // Before: libcurl sent a replayable request (a GET, a POST with an Idempotency-Key) whose stream was refused
  // (RST_STREAM REFUSED_STREAM) up to five more times per attempt, each on a new connection: 6 requests each, and
  // not the words below. A POST without a key was already sent once; it is checked so that the limit stays so.
  h2_faults_server server("refuse");
  asio::io_context io;
  wandura::transport tr(io.get_executor(), trusting_the_fixture());
  wandura::attempt_options opts;
  opts.timeout = 5000ms;

  {
    auto keyed = post(server.url("/v1/playback/tickets"));
    keyed.headers.push_back({"Idempotency-Key", "key-refused-1"});
    auto const r = run(io, tr.send_attempt(keyed, opts));
    INFO("keyed POST: " << r.error.message() << " (" << r.detail << ")\n" << server.log());
    CHECK(r.error == wandura::errc::connection_reset);
    CHECK(r.detail.find("not sent a third time") != std::string::npos);
    CHECK(server.requests() == 2);
  }
  {
    int const before = server.requests();
    auto const r = run(io, tr.send_attempt(post(server.url("/v1/playback/tickets")), opts));
    INFO("unkeyed POST: " << r.error.message() << " (" << r.detail << ")\n" << server.log());
    CHECK(r.error == wandura::errc::connection_reset);
    CHECK(r.detail.find("not sent again") != std::string::npos);
    CHECK(server.requests() - before == 1);
  }
  {
    wandura::http_request get;
    get.url = server.url("/v1/config");
    int const before = server.requests();
    auto const r = run(io, tr.send_attempt(get, opts));
    INFO("GET: " << r.error.message() << " (" << r.detail << ")\n" << server.log());
    CHECK(r.error == wandura::errc::connection_reset);
    CHECK(server.requests() - before == 2);
  }
  CHECK(tr.stats().requests_in_flight == 0);
}

TEST_CASE("transport to a hostile HTTP/2 server: a response nghttp2 rejects as malformed is a final protocol_error") {
  // Two different content-length values, or a connection-specific header: nghttp2 resets the stream with
  // PROTOCOL_ERROR. Before: connection_reset, which the retry engine retries (the same answer would come back).
  std::string const scenario = GENERATE(as<std::string>{}, "cl_dup", "connection");
  CAPTURE(scenario);
  h2_faults_server server(scenario);
  asio::io_context io;
  wandura::transport tr(io.get_executor(), trusting_the_fixture());
  wandura::attempt_options opts;
  opts.timeout = 5000ms;
  auto const r = run(io, tr.send_attempt(post(server.url("/v1/playback/tickets")), opts));
  INFO(r.error.message() << " (" << r.detail << ")");
  CHECK(r.error == wandura::errc::protocol_error);
  CHECK_FALSE(r.error == wandura::condition::retryable);
  CHECK(server.requests() == 1);
}

TEST_CASE("transport to a hostile HTTP/2 server: a POST never answered times out as attempt_timeout") {
  // The server reads the whole body (it grants the window) and sends nothing back on the stream. Before: libcurl
  // started its first-byte clock when it began sending a body, which it does for every body over HTTP/2, so the
  // transport called the timeout response_timeout ("mid-response") though no response byte had come.
  std::size_t const body_bytes = GENERATE(std::size_t{40}, std::size_t{100 * 1024});
  CAPTURE(body_bytes);
  h2_faults_server server("silent");
  asio::io_context io;
  wandura::transport tr(io.get_executor(), trusting_the_fixture());
  wandura::attempt_options opts;
  opts.timeout = 500ms;
  auto const request = post(server.url("/v1/playback/tickets"), std::string(body_bytes, 'x'));
  auto const start = std::chrono::steady_clock::now();
  auto const r = run(io, tr.send_attempt(request, opts));
  auto const elapsed = std::chrono::steady_clock::now() - start;
  INFO(r.error.message() << " (" << r.detail << ")");
  CHECK(r.error == wandura::errc::attempt_timeout);
  CHECK(r.detail.find("before any response byte") != std::string::npos);
  CHECK(elapsed >= 450ms);
  CHECK(elapsed < 2s);
  CHECK(server.requests() == 1);
  CHECK(tr.stats().requests_in_flight == 0);
}

TEST_CASE("transport to a hostile HTTP/2 server: after a timeout alone on its connection the next request uses a "
          "new one") {
  // On its first connection the server never sends WINDOW_UPDATE, so a 150 KB body stalls once the 65,535-byte
  // window is used, and never answers; on later connections it answers. Before: libcurl could time the stream out
  // itself and keep the dead connection, whose window was spent, and rounds 2 and 3 timed out on it too (the server
  // saw one connection).
  h2_faults_server server("no_window");
  asio::io_context io;
  wandura::transport tr(io.get_executor(), trusting_the_fixture());
  auto const request = post(server.url("/v1/playback/tickets"), std::string(150 * 1024, 'x'));
  for (int round = 1; round <= 3; ++round) {
    wandura::attempt_options opts;
    opts.timeout = round == 1 ? 1000ms : 5000ms; // generous for the rounds that must succeed: a shared 2-core VM
    auto const r = run(io, tr.send_attempt(request, opts));
    INFO("round " << round << ": " << r.error.message() << " (" << r.detail << ")");
    INFO(server.log());
    if (round == 1) {
      CHECK(r.error == wandura::condition::timeout);
    } else {
      CHECK_FALSE(r.error);
      CHECK(r.response.status == 200);
      CHECK(r.response.http_version == 20);
    }
  }
  INFO(server.log());
  CHECK(server.connections() == 2);
  CHECK(server.requests() == 3);
  CHECK(tr.stats().requests_in_flight == 0);
}
