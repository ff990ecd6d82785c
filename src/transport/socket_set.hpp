// Internal: libcurl's sockets, opened by the transport and watched in an epoll set of its own (docs/adr/0002,
// "Sockets").
#pragma once

#include <sys/epoll.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <unordered_map>

#include <curl/curl.h>

#include <asio/any_io_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/strand.hpp>

namespace wandura::detail {

/// One socket as libcurl's open callback created it: its number, and a generation that tells it from an earlier
/// or later socket with the same number.
struct opened_socket {
  curl_socket_t fd = CURL_SOCKET_BAD;
  std::uint32_t generation = 0;
  int family = 0; ///< AF_INET or AF_INET6
};

/// The sockets libcurl opened through `CURLOPT_OPENSOCKETFUNCTION`, in a level-triggered epoll set that Asio
/// watches through its one descriptor.
///
/// Interest is updated lazily: a direction libcurl stops wanting stays registered until the socket reports it
/// (then it is trimmed), so the steady state of a keep-alive connection (IN wanted, REMOVE, IN again for the next
/// request) costs no epoll_ctl. The exception is a connection's socket going idle in libcurl's pool: it is set to
/// input alone at once (one epoll_ctl when it had output registered too), and input marks it (see
/// `collect_idle_input`). Every socket leaves the set when libcurl closes it: through
/// `CURLOPT_CLOSESOCKETFUNCTION` (`close`), or, for a socket libcurl 7.88 closes with a plain close() (one that
/// never finished connecting), through `forget_closed`, which touches no descriptor: the kernel has already taken
/// a closed socket out of the epoll set. libcurl also asks to watch a descriptor of its own, its threaded
/// resolver's socket pair (readable when a name is resolved): it is watched the same way and leaves the set at
/// once at CURL_POLL_REMOVE, which libcurl says just before it closes it.
///
/// @par Thread safety
/// Not thread-safe: every member is called on the transport's strand.
class socket_set {
public:
  using strand_type = asio::strand<asio::any_io_executor>;

  /// @throws std::system_error (`errc::transport_failed`) when no epoll set can be created.
  explicit socket_set(strand_type const& strand);
  socket_set(socket_set const&) = delete;
  socket_set& operator=(socket_set const&) = delete;
  ~socket_set() = default;

  // --- libcurl's callbacks (inside libcurl calls on the strand; never throw) --------------------------------

  /// CURLOPT_OPENSOCKETFUNCTION: creates a TCP socket for `address` and records it; `may_multiplex` when its
  /// connection may carry HTTP/2 streams (see `dispatch_ready`). `fd` is CURL_SOCKET_BAD on failure.
  [[nodiscard]] opened_socket open(curl_sockaddr const& address, bool may_multiplex) noexcept;
  /// CURLOPT_CLOSESOCKETFUNCTION: takes `fd` out of the set and closes it. Returns close()'s result.
  int close(curl_socket_t fd) noexcept;
  /// CURLMOPT_SOCKETFUNCTION: libcurl now wants `what` (CURL_POLL_*) of `fd`. False when the set cannot watch it,
  /// with `errno` saying why (epoll_ctl's: ENOMEM or ENOSPC for a socket, the kernel's limits; ENOMEM when the entry
  /// could not be allocated); the set is then as before the call. Never false for CURL_POLL_REMOVE.
  /// A descriptor not made by `open` is libcurl's own (see the class comment). An adopted socket (`adopt`) that
  /// libcurl stops watching (CURL_POLL_REMOVE: its connection idles in the pool) is registered for input alone, so
  /// that bytes arriving on it are seen (`collect_idle_input`); one that goes idle after this action's read of the
  /// set, or cannot be registered, is instead marked at once (its registration left as it was), so that its reuse
  /// reads it. A socket not adopted is left as it is: libcurl may have closed it already (it says REMOVE after a
  /// plain close() of a connect that failed), and its number may be another's by now.
  [[nodiscard]] bool want(curl_socket_t fd, int what) noexcept;

  /// `s` carries a connection now (its first request is about to be sent): libcurl closes it only through the
  /// close callback from now on, so the set may register it while libcurl watches it for nothing (`want`).
  void adopt(opened_socket s) noexcept;
  /// Forgets `s` if it is still recorded: libcurl closed it without the close callback.
  void forget_closed(opened_socket s) noexcept;
  /// Forgets every socket (after curl_multi_cleanup, which closed all the others through `close`).
  void clear() noexcept;

  // --- the wait on the set ------------------------------------------------------------------------------------

  /// Keeps one wait pending while libcurl wants any socket watched, and none otherwise (an idle transport holds
  /// no work). `on_ready(generation, ec)` runs on the strand; pass both to `take_wake`.
  template <class Handler> void update_wait(Handler on_ready);
  /// True when a completed wait is the current one (not cancelled, not replaced); it is then no longer pending.
  [[nodiscard]] bool take_wake(std::uint64_t generation, std::error_code ec) noexcept;
  /// Reads the ready sockets without blocking and calls `act(fd, ev_bitmask)` for each that libcurl wants acted
  /// on, while `keep_going()` is true. `ev_bitmask` holds the CURL_CSELECT_* bits epoll reported, or is 0 ("libcurl
  /// tests the socket itself") for a socket that may multiplex: told the bits, libcurl 7.88 could skip a stream
  /// whose response another stream's read had buffered and fail it with CURLE_HTTP2_STREAM, about one request in
  /// 100-300 at 16-64 streams; with 0, none in about 200,000 (docs/adr/0002).
  template <class Act, class KeepGoing> void dispatch_ready(Act&& act, KeepGoing&& keep_going);
  /// Cancels the wait and closes the set's descriptor.
  void shut() noexcept;

  // --- input on idle connections --------------------------------------------------------------------------

  /// Bytes that arrive on a socket libcurl watches for nothing (a pooled connection: a stray or repeated response,
  /// a 408 or a close_notify before an idle close, the end of the stream) answer no request. Each idle socket stays
  /// registered for input (see `want`), and an event on it, reported by any read of the set, marks it; its
  /// interest is then dropped, so it is reported once. Marks go when libcurl watches the socket again (its next
  /// transfer's own input is no stray) or when it closes.
  ///
  /// Brings the marks up to date, at most once per libcurl action (`action_boundary`): reads the ready events of the
  /// set without blocking (batches of 64, as many as it takes to see every ready socket), marks the idle sockets
  /// among them and leaves the rest (level-triggered, they are reported again). So a batch of requests that libcurl
  /// starts in one action costs one system call, not one per reused connection. True when the marks can be trusted
  /// for the rest of the action; false when the read failed (then the reuse reads its connection itself, and the
  /// next call tries again). Bytes that reach a socket idle at the read before its reuse in the same action are
  /// not seen.
  [[nodiscard]] bool collect_idle_input() noexcept;
  /// True when some socket is marked; false (the common case) needs no lookup and no system call.
  [[nodiscard]] bool any_idle_input() const noexcept { return marked_ != 0; }
  /// True when `fd` is marked.
  [[nodiscard]] bool idle_input_on(curl_socket_t fd) const noexcept;
  /// Called before and after each libcurl action: the next `collect_idle_input` reads the set again.
  void action_boundary() noexcept { collected_ = false; }

  /// The adopted socket whose connection runs from `local_port` to `peer`:`peer_port` (as libcurl's pre-request
  /// callback names them), among the marked ones only if `marked_only`, or CURL_SOCKET_BAD. Each socket's addresses
  /// are read once (getsockname, getpeername), the first time it is looked at. On the strand.
  [[nodiscard]] curl_socket_t find_connection(char const* peer, int peer_port, int local_port,
                                              bool marked_only) noexcept;
  /// Sockets open now (connecting, in use, or idle in libcurl's pool); libcurl's own descriptors are not counted.
  [[nodiscard]] std::size_t size() const noexcept { return sockets_.size() - foreign_; }

private:
  struct entry {
    opened_socket socket;
    int wanted = 0;               ///< CURL_POLL_IN / CURL_POLL_OUT bits libcurl asked for last; 0 after REMOVE
    std::uint32_t registered = 0; ///< EPOLLIN / EPOLLOUT in the set (may exceed `wanted`); 0 when not in it
    bool may_multiplex = false;   ///< its connection may carry HTTP/2 streams
    bool foreign = false;         ///< libcurl's own descriptor (not made by `open`), recorded by `want`
    bool idle_input = false;      ///< marked: input came while idle, or it went unwatched (`want`, `to_select`)
    bool adopted = false;         ///< carries a connection: closed only through `close` (`adopt`)
    /// Its connection's ports and peer address (an IPv4 or IPv6 address's bytes), once `find_connection` has read
    /// them; 0 until then.
    std::uint16_t local_port = 0;
    std::uint16_t peer_port = 0;
    std::array<unsigned char, 16> peer{};
  };
  /// What `to_select` returns for an event libcurl wants nothing of.
  static constexpr int no_action = -1;
  using map_type = std::unordered_map<curl_socket_t, entry>;

  /// Reduces the interest to what libcurl wants now (leaves the set when it wants nothing).
  void trim_interest(entry& e) noexcept;
  /// Makes the set report `needed` (EPOLLIN / EPOLLOUT) of `e`, on top of what it reports now.
  [[nodiscard]] bool widen_interest(entry& e, std::uint32_t needed) noexcept;
  /// Makes the set report exactly `events` of `e` (0: out of the set); no system call when it already does.
  [[nodiscard]] bool set_interest(entry& e, std::uint32_t events) noexcept;
  /// The ev_bitmask for libcurl of one epoll event, or `no_action`; trims unwanted interest on the way, and marks
  /// input on an idle socket (`mark_idle_input`).
  [[nodiscard]] int to_select(epoll_event const& event) noexcept;
  /// The entry of an epoll event's socket, or the end: closed (perhaps its number reused) since it was reported.
  [[nodiscard]] map_type::iterator find_reported(epoll_event const& event) noexcept;
  /// Marks `e` when `events` hold input or an error and libcurl watches it for nothing; false otherwise.
  bool mark_idle_input(entry& e, std::uint32_t events) noexcept;
  /// Marks `e` (its reuse reads the connection) / takes the mark off; `marked_` counts them.
  void mark(entry& e) noexcept;
  void unmark(entry& e) noexcept;
  void erase(map_type::iterator it) noexcept;
  [[nodiscard]] int epoll_fd() noexcept { return watch_.native_handle(); }

  asio::posix::stream_descriptor watch_; ///< the epoll set, as Asio watches it
  map_type sockets_;
  std::uint32_t generation_ = 0;
  std::size_t watched_ = 0; ///< entries with wanted != 0
  std::size_t foreign_ = 0; ///< entries that are libcurl's own descriptors
  std::size_t marked_ = 0;  ///< entries with idle_input
  bool collected_ = false;  ///< collect_idle_input has read the set in this action
  bool wait_pending_ = false;
  std::uint64_t wait_generation_ = 0;
};

template <class Handler> void socket_set::update_wait(Handler on_ready) {
  if (watched_ > 0 && !wait_pending_ && watch_.is_open()) {
    auto const generation = ++wait_generation_;
    watch_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [h = std::move(on_ready), generation](std::error_code ec) mutable { h(generation, ec); });
    wait_pending_ = true;
  } else if (watched_ == 0 && wait_pending_) {
    wait_pending_ = false;
    ++wait_generation_;
    std::error_code ignored;
    watch_.cancel(ignored);
  }
}

template <class Act, class KeepGoing> void socket_set::dispatch_ready(Act&& act, KeepGoing&& keep_going) {
  std::array<epoll_event, 64> events{};
  // A few batches per wake-up at most; anything left is reported again (the set is level-triggered).
  for (int round = 0; round < 4 && keep_going(); ++round) {
    int const n = ::epoll_wait(epoll_fd(), events.data(), static_cast<int>(events.size()), 0);
    if (n <= 0) {
      return; // nothing (left) to do, or EINTR: the next wait reports it again
    }
    for (int i = 0; i < n && keep_going(); ++i) {
      auto const& event = events[static_cast<std::size_t>(i)];
      if (int const select = to_select(event); select != no_action) {
        act(static_cast<curl_socket_t>(event.data.u64 & 0xffff'ffffU), select); // may close sockets
      }
    }
    if (n < static_cast<int>(events.size())) {
      return;
    }
  }
}

} // namespace wandura::detail
