// The transport when its epoll set cannot watch a socket (epoll_ctl out of memory, or past the user's
// fs.epoll.max_user_watches): the request that needed the socket fails alone, and the transport goes on.
//
// The kernel's refusal is made here by this executable's own `epoll_ctl`, which the dynamic linker binds before the
// C library's for every call in the process: while a test arms it, it refuses to add the sockets the test names, and
// passes every other call on. Its own executable, so that no other test runs with it.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "run_awaitable.hpp"
#include "test_http_server.hpp"
#include "transport_fixtures.hpp"
#include "wandura/error.hpp"
#include "wandura/transport/transport.hpp"

namespace {

std::atomic<int> refused_unless_port{0};    ///< armed when not 0: the test server's port
std::atomic<int> refused_op{EPOLL_CTL_ADD}; ///< what is refused: adding a socket, or changing what it is watched for
std::atomic<int> refused_errno{ENOSPC};
std::atomic<int> refusals{0};

using epoll_ctl_fn = int (*)(int, int, int, epoll_event*);

epoll_ctl_fn next_epoll_ctl() {
  static auto const fn = reinterpret_cast<epoll_ctl_fn>(dlsym(RTLD_NEXT, "epoll_ctl"));
  return fn;
}

/// A TCP socket (IPv4) whose local port is not `server_port`: a client's end of a connection to the test server.
bool client_socket(int fd, int server_port) {
  int type = 0;
  socklen_t type_len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) {
    return false;
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 && local.sin_family == AF_INET &&
         ntohs(local.sin_port) != server_port;
}

/// While it lives, `epoll_ctl` refuses to add a client socket of the server on `server_port` (ENOSPC: past
/// fs.epoll.max_user_watches), or with `op` EPOLL_CTL_MOD to change one's events (ENOMEM).
struct refusal {
  explicit refusal(int server_port, int op = EPOLL_CTL_ADD) {
    refusals = 0;
    refused_op = op;
    refused_errno = op == EPOLL_CTL_ADD ? ENOSPC : ENOMEM;
    refused_unless_port = server_port;
  }
  ~refusal() { refused_unless_port = 0; }
  refusal(refusal const&) = delete;
  refusal& operator=(refusal const&) = delete;
};

} // namespace

extern "C" int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  int const port = refused_unless_port.load();
  if (port != 0 && op == refused_op.load() && client_socket(fd, port)) {
    refusals.fetch_add(1);
    errno = refused_errno.load();
    return -1;
  }
  return next_epoll_ctl()(epfd, op, fd, event);
}

namespace {

using namespace std::chrono_literals;
using test_support::post;
using test_support::run;
using test_support::send_together;
using wandura::errc;
using wandura::testing::server_behaviour;
using wandura::testing::test_http_server;

TEST_CASE("transport: a new connection whose socket cannot be watched fails its request alone, as connect_failed") {
  // Each answer takes 100 ms or more (its body in three parts 50 ms apart): the second request cannot wait for the
  // first one's connection, it needs its own.
  test_http_server server(server_behaviour::slow_body);
  server.set_body(R"({"ok":true,"pad":"xxxxxxxxx"})");
  server.set_chunk_delay(50ms);
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  auto const request = post(server.url());
  // One connection pooled first: reusing it while the refusal is armed needs no new registration.
  REQUIRE(run(io, tr.send_attempt(request, {})).error == std::error_code{});
  REQUIRE(server.connections_accepted() == 1);

  auto const started = std::chrono::steady_clock::now();
  std::vector<std::optional<wandura::attempt_result>> results;
  {
    refusal const armed(server.port());
    results = send_together(io, tr, request, 2);
  }
  auto const elapsed = std::chrono::steady_clock::now() - started;
  REQUIRE(results[0].has_value());
  REQUIRE(results[1].has_value());
  CHECK(refusals.load() >= 1);
  CHECK(elapsed < 2s); // at once, not at a timeout
  // One reused the pooled connection and was answered; the other needed a socket the set could not watch.
  int answered = 0;
  int refused = 0;
  for (auto const& r : results) {
    if (!r->error) {
      CHECK(r->response.status == 200);
      ++answered;
    } else {
      INFO(r->detail);
      CHECK(r->error == errc::connect_failed); // nothing was sent: any request may be retried
      CHECK(r->detail.find("could not watch") != std::string::npos);
      CHECK(r->detail.find("No space left on device") != std::string::npos);
      ++refused;
    }
  }
  CHECK(answered == 1);
  CHECK(refused == 1);
  CHECK(server.requests_read() == 2);

  // The transport goes on: new connections are made and watched once the kernel takes them again.
  results = send_together(io, tr, request, 2);
  for (auto const& r : results) {
    REQUIRE(r.has_value());
    INFO(r->detail);
    CHECK_FALSE(r->error);
    CHECK(r->response.status == 200);
  }
  CHECK(server.requests_read() == 4);
  CHECK(tr.stats().requests_in_flight == 0);
}

TEST_CASE("transport: a socket that cannot be watched once its request went out fails it as transport_failed") {
  // A new connection is added to the set for output while it connects; once the request is written, libcurl waits
  // for the answer, and watching for input too needs a change of the registration, which is refused.
  test_http_server server;
  asio::io_context io;
  wandura::transport tr(io.get_executor());
  auto const request = post(server.url());
  auto const started = std::chrono::steady_clock::now();
  std::optional<wandura::attempt_result> refused;
  {
    refusal const armed(server.port(), EPOLL_CTL_MOD);
    refused = run(io, tr.send_attempt(request, {}));
  }
  CHECK(std::chrono::steady_clock::now() - started < 2s); // at once, not at a timeout
  CHECK(refusals.load() >= 1);
  INFO(refused->detail);
  CHECK(refused->error == errc::transport_failed); // it may have been sent: only a keyed request may be retried
  CHECK(refused->detail.find("could not watch") != std::string::npos);
  CHECK(refused->detail.find("after the request went out") != std::string::npos);
  CHECK(refused->detail.find("Cannot allocate memory") != std::string::npos);

  // The connection the request was cut from is not reused (its answer would be read as the next request's): the
  // next request gets a connection of its own and its own answer.
  auto const next = run(io, tr.send_attempt(request, {}));
  INFO(next.detail);
  CHECK_FALSE(next.error);
  CHECK(next.response.status == 200);
  CHECK(server.connections_accepted() == 2);
  CHECK(tr.stats().requests_in_flight == 0);
}

} // namespace
