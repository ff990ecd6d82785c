#include "transport/socket_set.hpp"

// The transport's socket set against real descriptors (no network): what it watches for libcurl.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <catch2/catch.hpp>
#include <curl/curl.h>

namespace {

using namespace std::chrono_literals;

/// A connected pair of local sockets, closed at the end of the test.
struct socket_pair {
  socket_pair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0); }
  socket_pair(socket_pair const&) = delete;
  socket_pair& operator=(socket_pair const&) = delete;
  ~socket_pair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void make_readable() const { REQUIRE(::write(fds[1], "x", 1) == 1); }
  int fds[2] = {-1, -1};
};

/// What `dispatch_ready` asks libcurl to act on now: (descriptor, ev_bitmask) pairs.
std::vector<std::pair<curl_socket_t, int>> ready(wandura::detail::socket_set& set) {
  std::vector<std::pair<curl_socket_t, int>> acted;
  set.dispatch_ready([&acted](curl_socket_t fd, int bits) { acted.emplace_back(fd, bits); }, [] { return true; });
  return acted;
}

/// A TCP connection on loopback whose client end the set opened, as libcurl's open callback has it do.
struct opened_connection {
  /// `adopted`: as after libcurl's pre-request callback, which hands the socket to its connection.
  explicit opened_connection(wandura::detail::socket_set& set, bool adopted = true) {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), size) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    curl_sockaddr curl_address{};
    curl_address.family = AF_INET;
    curl_address.socktype = SOCK_STREAM;
    curl_address.protocol = IPPROTO_TCP;
    curl_address.addrlen = sizeof address;
    std::memcpy(&curl_address.addr, &address, sizeof address);
    auto const opened = set.open(curl_address, false);
    fd = opened.fd;
    REQUIRE(fd >= 0);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    if (adopted) {
      set.adopt(opened);
    }
    peer = ::accept(listener, nullptr, nullptr);
    REQUIRE(peer >= 0);
    peer_port = ntohs(address.sin_port);
    sockaddr_in local{};
    socklen_t local_size = sizeof local;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) == 0);
    local_port = ntohs(local.sin_port);
  }
  opened_connection(opened_connection const&) = delete;
  opened_connection& operator=(opened_connection const&) = delete;
  ~opened_connection() {
    ::close(peer);
    ::close(listener);
  }
  void peer_sends() const { REQUIRE(::write(peer, "x", 1) == 1); }
  int listener = -1;
  curl_socket_t fd = CURL_SOCKET_BAD; ///< closed by the set
  int peer = -1;
  int peer_port = 0;
  int local_port = 0;
};

/// A socket set of its own, on an io_context that only the test runs.
struct fresh_set {
  asio::io_context io;
  wandura::detail::socket_set::strand_type strand{asio::make_strand(io.get_executor())};
  wandura::detail::socket_set set{strand};
};

/// A new libcurl action's first reuse: the set is read again. Returns what `collect_idle_input` returns.
bool read_in_new_action(wandura::detail::socket_set& set) {
  set.action_boundary();
  return set.collect_idle_input();
}

/// Has the set see `c` as a connection libcurl watched for input and then put in its pool, idle.
void go_idle(wandura::detail::socket_set& set, opened_connection const& c) {
  REQUIRE(set.want(c.fd, CURL_POLL_IN));
  REQUIRE(set.want(c.fd, CURL_POLL_REMOVE));
}

/// True when the set's wait wakes within `limit` (a socket it watches has an event).
bool wakes(asio::io_context& io, wandura::detail::socket_set& set, std::chrono::milliseconds limit) {
  std::optional<bool> woken;
  set.update_wait([&](std::uint64_t generation, std::error_code ec) { woken = set.take_wake(generation, ec); });
  io.restart();
  io.run_one_for(limit);
  return woken.value_or(false);
}

} // namespace

TEST_CASE("socket set: a descriptor libcurl made itself, its resolver's, is watched until libcurl removes it") {
  // libcurl's threaded resolver hands the read end of a socket pair of its own (not made through the open-socket
  // callback) to CURLMOPT_SOCKETFUNCTION: it becomes readable when the name is resolved. Left unwatched, a request
  // to a host name waits for libcurl's fallback poll of the resolver (after 1 ms, then 2, 4, ... up to 250 ms).
  asio::io_context io;
  auto const strand = asio::make_strand(io.get_executor());
  wandura::detail::socket_set set(strand);
  socket_pair resolver;
  curl_socket_t const fd = resolver.fds[0];

  REQUIRE(set.want(fd, CURL_POLL_IN));
  std::optional<bool> woken;
  set.update_wait([&](std::uint64_t generation, std::error_code ec) { woken = set.take_wake(generation, ec); });
  resolver.make_readable();
  io.run_one_for(2s); // bounded: a set that does not watch it never wakes
  REQUIRE(woken.has_value());
  CHECK(*woken);
  CHECK(ready(set) == std::vector<std::pair<curl_socket_t, int>>{{fd, CURL_CSELECT_IN}});
  CHECK(set.size() == 0); // not one of the transport's sockets: sockets_open does not count it

  // libcurl says REMOVE just before it closes the descriptor (Curl_multi_closed): the set lets go of it at once,
  // while the number is still this descriptor's. Still readable, it must not wake the wait that another
  // descriptor libcurl watches keeps pending (a level-triggered set would report it again and again).
  socket_pair other;
  REQUIRE(set.want(other.fds[0], CURL_POLL_IN));
  REQUIRE(set.want(fd, CURL_POLL_REMOVE));
  CHECK(ready(set).empty());
  std::optional<bool> woken_again;
  set.update_wait([&](std::uint64_t generation, std::error_code ec) { woken_again = set.take_wake(generation, ec); });
  io.restart();
  io.run_one_for(100ms);
  CHECK_FALSE(woken_again.has_value());
}

TEST_CASE_METHOD(fresh_set, "socket set: a descriptor the kernel will not watch is refused with its errno, the set "
                            "as before") {
  // epoll takes no regular file (EPERM): what the transport sees when the kernel refuses a socket (ENOMEM, or ENOSPC
  // past fs.epoll.max_user_watches), on the path of a descriptor libcurl made itself.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::tmpfile(), &std::fclose);
  REQUIRE(file != nullptr);
  int const fd = ::fileno(file.get());
  errno = 0;
  CHECK_FALSE(set.want(fd, CURL_POLL_IN));
  CHECK(errno == EPERM);
  CHECK(set.size() == 0);
  CHECK(ready(set).empty());
  CHECK(set.want(fd, CURL_POLL_REMOVE)); // nothing was kept to let go of

  // A socket it does watch is unaffected, and is the one that wakes the set.
  socket_pair other;
  REQUIRE(set.want(other.fds[0], CURL_POLL_IN));
  other.make_readable();
  CHECK(wakes(io, set, 2s));
  CHECK(ready(set) == std::vector<std::pair<curl_socket_t, int>>{{other.fds[0], CURL_CSELECT_IN}});
}

TEST_CASE_METHOD(fresh_set,
                 "socket set: input on an idle connection is marked, once per action, until libcurl watches it again") {
  opened_connection a(set);
  opened_connection b(set);

  // `a` was only ever watched for output (its connect): idle in the pool, it is watched for input alone (registered
  // for output too, a writable socket would report it at once and leave the set).
  REQUIRE(set.want(a.fd, CURL_POLL_OUT));
  REQUIRE(set.want(a.fd, CURL_POLL_REMOVE));
  go_idle(set, b);
  CHECK(ready(set).empty());
  CHECK(read_in_new_action(set));
  CHECK_FALSE(set.any_idle_input()); // nothing came

  a.peer_sends();
  CHECK(set.collect_idle_input()); // the same action: the set is not read again
  CHECK_FALSE(set.any_idle_input());
  CHECK(read_in_new_action(set));
  CHECK(set.any_idle_input());
  CHECK(set.idle_input_on(a.fd));
  CHECK_FALSE(set.idle_input_on(b.fd));
  CHECK(ready(set).empty()); // reported once: it left the set, and libcurl is told nothing

  // An idle socket's input reported by the read that serves libcurl's own events is marked too.
  b.peer_sends();
  CHECK(ready(set).empty());
  CHECK(set.idle_input_on(b.fd));

  // Watched again, by its next transfer: the mark goes, and what waits is that transfer's to read.
  REQUIRE(set.want(a.fd, CURL_POLL_IN));
  CHECK_FALSE(set.idle_input_on(a.fd));
  CHECK(set.any_idle_input()); // b's still
  CHECK(ready(set) == std::vector<std::pair<curl_socket_t, int>>{{a.fd, CURL_CSELECT_IN}});

  // Gone idle after this action's read of the set: what reached it since is unknown, so it is marked at once.
  char drained = 0;
  REQUIRE(::recv(a.fd, &drained, 1, 0) == 1);
  CHECK(read_in_new_action(set));
  REQUIRE(set.want(a.fd, CURL_POLL_REMOVE));
  CHECK(set.idle_input_on(a.fd));
  REQUIRE(set.want(a.fd, CURL_POLL_IN));
  set.action_boundary();
  REQUIRE(set.want(a.fd, CURL_POLL_REMOVE)); // idle before the next read: watched, not marked
  CHECK_FALSE(set.idle_input_on(a.fd));

  // Closed, its mark goes with it.
  CHECK(set.close(b.fd) == 0);
  CHECK_FALSE(set.any_idle_input());
  CHECK(set.close(a.fd) == 0);

  // A socket no connection adopted is not registered when libcurl stops watching it: libcurl may have closed it
  // already (a connect that failed), and the number may be another descriptor's by then. (Never watched before,
  // so nothing of it is in the set: input on it wakes nothing.)
  opened_connection c(set, false);
  socket_pair quiet;
  REQUIRE(set.want(quiet.fds[0], CURL_POLL_IN)); // keeps the set's wait pending
  REQUIRE(set.want(c.fd, CURL_POLL_REMOVE));
  c.peer_sends();
  CHECK_FALSE(wakes(io, set, 100ms));
  CHECK(read_in_new_action(set));
  CHECK_FALSE(set.any_idle_input());
  CHECK(set.find_connection("127.0.0.1", c.peer_port, c.local_port, false) == CURL_SOCKET_BAD);
  CHECK(set.close(c.fd) == 0);
}

TEST_CASE_METHOD(
    fresh_set,
    "socket set: a reused connection is found among the marked ones, or among all when the set was not read") {
  opened_connection a(set);
  go_idle(set, a);
  // Unmarked: not among the marked ones (its reuse reads nothing), but found when the set could not vouch.
  CHECK(set.find_connection("127.0.0.1", a.peer_port, a.local_port, true) == CURL_SOCKET_BAD);
  CHECK(set.find_connection("127.0.0.1", a.peer_port, a.local_port, false) == a.fd);
  CHECK(set.find_connection("127.0.0.1", a.peer_port, a.local_port + 1, false) == CURL_SOCKET_BAD);
  CHECK(set.find_connection("::1", a.peer_port, a.local_port, false) == CURL_SOCKET_BAD);
  a.peer_sends();
  CHECK(read_in_new_action(set));
  CHECK(set.find_connection("127.0.0.1", a.peer_port, a.local_port, true) == a.fd);
  CHECK(set.close(a.fd) == 0);
}

TEST_CASE_METHOD(fresh_set, "socket set: idle input is found behind more ready sockets than one read returns") {
  // 64 busy sockets ready at once fill a read's batch of 64; successive reads go round the ready sockets, so an idle
  // connection's input is found in the same call, whether it came before the busy sockets' or after.
  opened_connection first(set);
  opened_connection last(set);
  go_idle(set, first);
  go_idle(set, last);
  first.peer_sends();
  std::vector<std::unique_ptr<socket_pair>> busy;
  for (int i = 0; i < 64; ++i) {
    busy.push_back(std::make_unique<socket_pair>());
    REQUIRE(set.want(busy.back()->fds[0], CURL_POLL_IN));
    busy.back()->make_readable();
  }
  last.peer_sends();
  CHECK(read_in_new_action(set));
  CHECK(set.idle_input_on(first.fd));
  CHECK(set.idle_input_on(last.fd));
  for (auto const& p : busy) {
    REQUIRE(set.want(p->fds[0], CURL_POLL_REMOVE));
  }
  CHECK(set.close(first.fd) == 0);
  CHECK(set.close(last.fd) == 0);
}
