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

std::atomic<int> refused_unless_port{0}; ///< armed when not 0: the test server's port
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

/// While it lives, `epoll_ctl` refuses to add a client socket of the server on `server_port`.
struct refusal {
  explicit refusal(int server_port) {
    refusals = 0;
    refused_unless_port = server_port;
  }
  ~refusal() { refused_unless_port = 0; }
  refusal(refusal const&) = delete;
  refusal& operator=(refusal const&) = delete;
};

} // namespace

extern "C" int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  int const port = refused_unless_port.load();
  if (port != 0 && op == EPOLL_CTL_ADD && client_socket(fd, port)) {
    refusals.fetch_add(1);
    errno = ENOSPC; // what the kernel says past fs.epoll.max_user_watches
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

} // namespace
