#include "transport/socket_set.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

[[nodiscard]] constexpr std::uint32_t epoll_events_for(int wanted) noexcept {
  return ((wanted & CURL_POLL_IN) != 0 ? std::uint32_t{EPOLLIN} : 0U) |
         ((wanted & CURL_POLL_OUT) != 0 ? std::uint32_t{EPOLLOUT} : 0U);
}

[[nodiscard]] std::uint64_t event_data(opened_socket const& s) noexcept {
  return (std::uint64_t{s.generation} << 32U) | static_cast<std::uint32_t>(s.fd);
}

} // namespace

socket_set::socket_set(strand_type const& strand) : watch_(strand) {
  int const fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) {
    throw std::system_error(make_error_code(errc::transport_failed),
                            std::string("epoll_create1: ") + std::strerror(errno));
  }
  std::error_code ec;
  watch_.assign(fd, ec);
  if (ec) {
    ::close(fd);
    throw std::system_error(make_error_code(errc::transport_failed), "watching the epoll set: " + ec.message());
  }
}

opened_socket socket_set::open(curl_sockaddr const& address, bool may_multiplex) noexcept {
  opened_socket s;
  if (address.family != AF_INET && address.family != AF_INET6) {
    return s;
  }
  curl_socket_t const fd = ::socket(address.family, address.socktype | SOCK_CLOEXEC, address.protocol);
  if (fd == CURL_SOCKET_BAD) {
    return s;
  }
  try {
    // The number is free again: an entry still holding it is a socket libcurl closed without telling us whose
    // transfer has not ended yet. Its registration went with it, so the entry is simply replaced.
    if (auto it = sockets_.find(fd); it != sockets_.end()) {
      erase(it);
    }
    s = {fd, ++generation_, address.family};
    sockets_.emplace(fd, entry{s, 0, 0, may_multiplex});
  } catch (...) {
    ::close(fd);
    return {};
  }
  return s;
}

curl_socket_t socket_set::find_connection(char const* peer, int peer_port, int local_port, bool marked_only) noexcept {
  int family = AF_INET;
  std::array<unsigned char, 16> wanted{};
  if (::inet_pton(AF_INET, peer, wanted.data()) != 1) {
    family = AF_INET6;
    if (::inet_pton(AF_INET6, peer, wanted.data()) != 1) {
      return CURL_SOCKET_BAD;
    }
  }
  for (auto& [fd, e] : sockets_) {
    if (!e.adopted || (marked_only && !e.idle_input) || e.socket.family != family) {
      continue; // a socket no connection adopted may be closed already: its number is not asked about
    }
    if (e.local_port == 0) {
      sockaddr_storage local{};
      sockaddr_storage remote{};
      socklen_t local_size = sizeof local;
      socklen_t remote_size = sizeof remote;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
          ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_size) != 0) {
        continue; // not connected yet
      }
      if (family == AF_INET) {
        auto const& l = reinterpret_cast<sockaddr_in const&>(local);
        auto const& r = reinterpret_cast<sockaddr_in const&>(remote);
        e.local_port = ntohs(l.sin_port);
        e.peer_port = ntohs(r.sin_port);
        std::memcpy(e.peer.data(), &r.sin_addr, sizeof r.sin_addr);
      } else {
        auto const& l = reinterpret_cast<sockaddr_in6 const&>(local);
        auto const& r = reinterpret_cast<sockaddr_in6 const&>(remote);
        e.local_port = ntohs(l.sin6_port);
        e.peer_port = ntohs(r.sin6_port);
        std::memcpy(e.peer.data(), &r.sin6_addr, sizeof r.sin6_addr);
      }
    }
    if (e.local_port == local_port && e.peer_port == peer_port && e.peer == wanted) {
      return fd;
    }
  }
  return CURL_SOCKET_BAD;
}

int socket_set::close(curl_socket_t fd) noexcept {
  if (auto it = sockets_.find(fd); it != sockets_.end()) {
    if (it->second.registered != 0) {
      epoll_event ev{};
      ::epoll_ctl(epoll_fd(), EPOLL_CTL_DEL, fd, &ev);
    }
    erase(it);
  }
  return ::close(fd);
}

bool socket_set::want(curl_socket_t fd, int what) noexcept {
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) {
    if (what == CURL_POLL_REMOVE) {
      return true; // already closed through close(): nothing to watch
    }
    // Not opened through open(): libcurl's own descriptor, the read end of its threaded resolver's socket pair,
    // readable when the name is resolved (unwatched, libcurl notices only at its next poll, 1 to 250 ms later).
    try {
      it = sockets_.emplace(fd, entry{opened_socket{fd, ++generation_, 0}, 0, 0, false, true}).first;
    } catch (...) {
      errno = ENOMEM;
      return false;
    }
    ++foreign_;
  }
  entry& e = it->second;
  int const wanted = (what == CURL_POLL_REMOVE) ? 0 : (what & (CURL_POLL_IN | CURL_POLL_OUT));
  if (wanted == 0 && e.foreign) {
    // libcurl says REMOVE just before it closes it (Curl_multi_closed), and nothing after: let go of it now, while
    // the number is still this descriptor's.
    if (e.registered != 0) {
      epoll_event ev{};
      ::epoll_ctl(epoll_fd(), EPOLL_CTL_DEL, fd, &ev);
    }
    erase(it);
    return true;
  }
  int const before = e.wanted;
  e.wanted = wanted;
  if (wanted != 0 && !widen_interest(e, epoll_events_for(wanted))) {
    e.wanted = before;
    if (e.foreign && before == 0) {
      erase(it);
    }
    return false;
  }
  if (wanted != 0) {
    unmark(e); // input from now on is the transfer's
  } else if (e.adopted) {
    // Idle: watched for input alone (a writable socket registered for output too would report it at once, and be
    // trimmed). Gone idle after this action's read of the set, or not watchable: looked at directly at its reuse.
    if (collected_ || !set_interest(e, EPOLLIN)) {
      mark(e);
    }
  }
  if (before == 0 && wanted != 0) {
    ++watched_;
  } else if (before != 0 && wanted == 0) {
    --watched_;
  }
  return true;
}

void socket_set::adopt(opened_socket s) noexcept {
  if (auto it = sockets_.find(s.fd); it != sockets_.end() && it->second.socket.generation == s.generation) {
    it->second.adopted = true;
  }
}

void socket_set::forget_closed(opened_socket s) noexcept {
  if (auto it = sockets_.find(s.fd); it != sockets_.end() && it->second.socket.generation == s.generation) {
    erase(it);
  }
}

void socket_set::clear() noexcept {
  sockets_.clear();
  watched_ = 0;
  foreign_ = 0;
  marked_ = 0;
}

bool socket_set::take_wake(std::uint64_t generation, std::error_code ec) noexcept {
  if (generation != wait_generation_ || ec == asio::error::operation_aborted) {
    return false; // cancelled, or replaced by a newer wait
  }
  wait_pending_ = false;
  return true;
}

void socket_set::shut() noexcept {
  wait_pending_ = false;
  ++wait_generation_;
  std::error_code ignored;
  watch_.close(ignored);
}

socket_set::map_type::iterator socket_set::find_reported(epoll_event const& event) noexcept {
  auto const fd = static_cast<curl_socket_t>(event.data.u64 & 0xffff'ffffU);
  auto const generation = static_cast<std::uint32_t>(event.data.u64 >> 32U);
  auto it = sockets_.find(fd);
  return it != sockets_.end() && it->second.socket.generation == generation ? it : sockets_.end();
}

bool socket_set::mark_idle_input(entry& e, std::uint32_t events) noexcept {
  if (e.wanted != 0 || !e.adopted || (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) == 0) {
    return false;
  }
  mark(e);
  return true;
}

void socket_set::mark(entry& e) noexcept {
  if (!e.idle_input) {
    e.idle_input = true;
    ++marked_;
  }
}

void socket_set::unmark(entry& e) noexcept {
  if (e.idle_input) {
    e.idle_input = false;
    --marked_;
  }
}

bool socket_set::collect_idle_input() noexcept {
  if (collected_) {
    return true;
  }
  std::array<epoll_event, 64> events{};
  // Successive reads go round the ready sockets (epoll_wait(2): a level-triggered event reported goes to the back
  // of the ready list), so size / 64 + 1 reads report each at least once.
  std::size_t const rounds = sockets_.size() / events.size() + 1;
  for (std::size_t round = 0; round < rounds; ++round) {
    int const n = ::epoll_wait(epoll_fd(), events.data(), static_cast<int>(events.size()), 0);
    if (n < 0) {
      return false; // not read (EINTR): the reuse reads its connection itself; the next tries the set again
    }
    for (int i = 0; i < n; ++i) {
      auto const& event = events[static_cast<std::size_t>(i)];
      if (auto it = find_reported(event); it != sockets_.end() && mark_idle_input(it->second, event.events)) {
        trim_interest(it->second); // out of the set: reported once
      }
    }
    if (n < static_cast<int>(events.size())) {
      break;
    }
  }
  collected_ = true;
  return true;
}

bool socket_set::idle_input_on(curl_socket_t fd) const noexcept {
  auto it = sockets_.find(fd);
  return it != sockets_.end() && it->second.idle_input;
}

int socket_set::to_select(epoll_event const& event) noexcept {
  auto it = find_reported(event);
  if (it == sockets_.end()) {
    return no_action; // closed (and perhaps its number reused) by an action earlier in this batch
  }
  entry& e = it->second;
  if (mark_idle_input(e, event.events)) {
    trim_interest(e);
    return no_action;
  }
  bool const failed = (event.events & (EPOLLERR | EPOLLHUP)) != 0;
  int select = 0;
  if ((e.wanted & CURL_POLL_IN) != 0 && ((event.events & EPOLLIN) != 0 || failed)) {
    select |= CURL_CSELECT_IN; // libcurl reads, and finds the error or the end itself
  }
  if ((e.wanted & CURL_POLL_OUT) != 0 && ((event.events & EPOLLOUT) != 0 || failed)) {
    select |= CURL_CSELECT_OUT;
  }
  std::uint32_t const unwanted = event.events & (EPOLLIN | EPOLLOUT) & ~epoll_events_for(e.wanted);
  if (unwanted != 0 || (failed && e.wanted == 0)) {
    trim_interest(e); // a direction libcurl no longer wants fired: stop reporting it (level-triggered)
  }
  if (select == 0) {
    return no_action;
  }
  return e.may_multiplex ? 0 : select; // 0: libcurl tests the socket itself (see dispatch_ready)
}

void socket_set::trim_interest(entry& e) noexcept {
  // What libcurl wants; input alone for an adopted idle socket not yet marked (want).
  std::uint32_t const target =
      e.wanted != 0 ? epoll_events_for(e.wanted) : (e.adopted && !e.idle_input ? std::uint32_t{EPOLLIN} : 0U);
  (void)set_interest(e, target);
}

bool socket_set::set_interest(entry& e, std::uint32_t events) noexcept {
  if (e.registered == events) {
    return true;
  }
  epoll_event ev{};
  if (events == 0) {
    ::epoll_ctl(epoll_fd(), EPOLL_CTL_DEL, e.socket.fd, &ev);
    e.registered = 0;
    return true;
  }
  ev.events = events;
  ev.data.u64 = event_data(e.socket);
  if (::epoll_ctl(epoll_fd(), e.registered != 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e.socket.fd, &ev) != 0) {
    return false;
  }
  e.registered = events;
  return true;
}

bool socket_set::widen_interest(entry& e, std::uint32_t needed) noexcept {
  if ((e.registered & needed) == needed) { // `needed` is never 0
    return true;                           // the steady state: no system call
  }
  return set_interest(e, e.registered | needed);
}

void socket_set::erase(map_type::iterator it) noexcept {
  if (it->second.wanted != 0) {
    --watched_;
  }
  unmark(it->second);
  if (it->second.foreign) {
    --foreign_;
  }
  sockets_.erase(it);
}

} // namespace wandura::detail
