#include "transport/socket_set.hpp"

// The transport's socket set against real descriptors (no network): what it watches for libcurl.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
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
