// wandura::transport: one CURLM driven through curl_multi_socket_action by Asio, every libcurl call on one strand.
// Design and the traps it handles: docs/adr/0002-transport-event-loop.md.
#include "wandura/transport/transport.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <curl/curl.h>

#include <asio/bind_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include "wandura/error.hpp"
#include "wandura/transport/detail/test_hooks.hpp"

namespace wandura::detail {
namespace {

using clock = std::chrono::steady_clock;

/// curl_global_init is not thread-safe in every libcurl build: run it once, before the first multi handle.
void global_init() {
  static CURLcode const rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    throw std::system_error(make_error_code(errc::transport_failed),
                            std::string("curl_global_init: ") + curl_easy_strerror(rc));
  }
}

/// A socket libcurl opened through our CURLOPT_OPENSOCKETFUNCTION, watched in the transport's own epoll set.
///
/// The set is level-triggered and its interest is updated lazily: a direction libcurl stops wanting stays
/// registered until the socket reports it (then the interest is trimmed), so the steady state of a keep-alive
/// connection (IN wanted, REMOVE, IN wanted again for the next request) costs no epoll_ctl at all. Asio watches
/// the set's one descriptor, not the sockets: a socket libcurl closes without CURLOPT_CLOSESOCKETFUNCTION (libcurl
/// 7.88 does that for a transfer removed while connecting) leaves the epoll set by itself, since the kernel drops
/// a closed file from every epoll set, and no reactor ever holds a number someone else closed.
struct socket_state {
  curl_socket_t fd = CURL_SOCKET_BAD;
  std::uint32_t generation = 0; ///< tells an event for this socket from one for an earlier socket with the same number
  dev_t device = 0;             ///< identity of the socket behind `fd`, to detect reuse of the number
  ino_t inode = 0;
  int wanted = 0;               ///< CURL_POLL_IN / CURL_POLL_OUT bits libcurl asked for last; 0 after REMOVE
  std::uint32_t registered = 0; ///< EPOLLIN / EPOLLOUT bits in the epoll set (may hold more than `wanted`, see
                                ///< above); 0 when the socket is not in the set
};

[[nodiscard]] constexpr std::uint32_t epoll_events_for(int wanted) noexcept {
  return ((wanted & CURL_POLL_IN) != 0 ? std::uint32_t{EPOLLIN} : 0U) |
         ((wanted & CURL_POLL_OUT) != 0 ? std::uint32_t{EPOLLOUT} : 0U);
}

enum class transfer_phase { idle, starting, queued, active };

} // namespace

/// The pooled state of one request: the easy handle, its header list and the response being received. Created on
/// first need, reused for every later request; never freed before the transport.
struct transfer {
  explicit transfer(transport_test_hooks const* h) : hooks(h) {}
  CURL* easy = nullptr;
  transport_test_hooks const* hooks; ///< the owner's test hooks (normally empty)
  /// Bumped each time the transfer returns to the pool, so that a late cancellation of an earlier request is
  /// recognised and ignored.
  std::atomic<std::uint64_t> generation{0};
  // Everything below is touched on the strand only (and by the initiating thread before it posts the start).
  transfer_phase phase = transfer_phase::idle;
  send_completion* op = nullptr;
  http_request const* request = nullptr;
  attempt_options options;
  clock::time_point queued_at; ///< when it entered the max_in_flight queue; epoch when it never did
  bool cancel_requested = false;
  bool request_started = false;
  bool response_started = false;
  bool body_too_large = false;
  std::size_t max_bytes = 0;
  http_response response;
  // The request header list, built in storage reused across requests: curl only reads a curl_slist.
  std::vector<std::string> header_lines;
  std::vector<curl_slist> header_nodes;
  std::string url;             ///< the URL of `parsed_url` (parsed again only when a request's URL differs)
  CURLU* parsed_url = nullptr; ///< what libcurl reads the URL from (CURLOPT_CURLU); owned, freed after `easy`
};

class transport_impl : public std::enable_shared_from_this<transport_impl> {
public:
  transport_impl(asio::any_io_executor ex, transport_options options)
      : executor_(std::move(ex)), strand_(asio::make_strand(executor_)), options_(std::move(options)), timer_(strand_),
        queue_timer_(strand_), epoll_watch_(strand_) {
    global_init();
    int const epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) {
      throw std::system_error(make_error_code(errc::transport_failed),
                              std::string("epoll_create1: ") + std::strerror(errno));
    }
    std::error_code assign_error;
    epoll_watch_.assign(epoll_fd, assign_error);
    if (assign_error) {
      ::close(epoll_fd);
      throw std::system_error(make_error_code(errc::transport_failed),
                              "watching the epoll set: " + assign_error.message());
    }
    multi_ = curl_multi_init();
    if (multi_ == nullptr) {
      throw std::system_error(make_error_code(errc::transport_failed), "curl_multi_init failed");
    }
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &transport_impl::on_socket_callback);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &transport_impl::on_timer_callback);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, options_.max_connections_per_host);
    curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, options_.max_total_connections);
    curl_multi_setopt(multi_, CURLMOPT_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
    // libcurl's default cache size is 4 x the easy handles added at that moment; ours are removed as they
    // finish, so after a burst of completions it would close most idle connections. Size it from the limits.
    long idle = options_.max_idle_connections;
    if (idle <= 0) {
      idle = std::max({options_.max_total_connections, options_.max_connections_per_host, 64L});
    }
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, idle);
    h2c_reuse_broken_ = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
    no_proxy_in_environment_ = !proxy_in_environment();
    if (options_.default_connect_timeout.count() <= 0) {
      options_.default_connect_timeout = std::chrono::milliseconds(3000);
    }
  }

  transport_impl(transport_impl const&) = delete;
  transport_impl& operator=(transport_impl const&) = delete;

  /// Runs when the last reference goes: normally on the strand after shutdown(); otherwise while the io_context
  /// is destroyed, when handlers can no longer be invoked (pending operations are then freed without a call,
  /// as Asio does with its own operations).
  ~transport_impl() {
    tearing_down_ = true;
    for (auto& t : transfers_) {
      if (t->phase == transfer_phase::active) {
        curl_multi_remove_handle(multi_, t->easy);
      }
      if (t->op != nullptr) {
        std::exchange(t->op, nullptr)->destroy();
      }
    }
    cleanup_curl();
  }

  [[nodiscard]] asio::any_io_executor const& executor() const noexcept { return executor_; }

  // --- called on the initiating thread --------------------------------------------------------------------

  void initiate(http_request const& request, attempt_options const& options, send_completion* op,
                asio::cancellation_slot slot) {
    transfer* t = nullptr;
    try {
      t = acquire();
    } catch (...) {
      op->destroy();
      throw;
    }
    t->op = op;
    t->request = &request;
    t->options = options;
    t->phase = transfer_phase::starting;
    if (slot.is_connected()) {
      slot.emplace<cancellation_handler>(weak_from_this(), t, t->generation.load(std::memory_order_acquire));
    }
    // dispatch, not post: from an io_context thread with the strand idle, the start runs at once (it never calls
    // the completion handler inline: completions are always posted).
    asio::dispatch(strand_, [self = shared_from_this(), t] { self->start(t); });
  }

  /// Called from ~transport: aborts everything on the strand, then frees libcurl. Never throws.
  void request_shutdown() noexcept {
    try {
      asio::post(strand_, [self = shared_from_this()] { self->shutdown(); });
    } catch (...) {
      // Out of memory: the destructor will tear down when the last handler holding us is destroyed.
    }
  }

  [[nodiscard]] transport_stats stats() const noexcept {
    transport_stats s;
    s.connections_opened = connections_opened_.load(std::memory_order_relaxed);
    s.sockets_open = sockets_open_.load(std::memory_order_relaxed);
    s.requests_in_flight = in_flight_.load(std::memory_order_relaxed);
    s.requests_queued = queued_.load(std::memory_order_relaxed);
    s.requests_completed = completed_.load(std::memory_order_relaxed);
    s.pooled_transfers = pooled_.load(std::memory_order_relaxed);
    return s;
  }

private:
  struct cancellation_handler {
    cancellation_handler(std::weak_ptr<transport_impl> i, transfer* tr, std::uint64_t g) noexcept
        : impl(std::move(i)), t(tr), generation(g) {}

    std::weak_ptr<transport_impl> impl;
    transfer* t;
    std::uint64_t generation;

    void operator()(asio::cancellation_type type) const noexcept {
      if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                   asio::cancellation_type::total)) == asio::cancellation_type::none) {
        return;
      }
      if (auto self = impl.lock()) {
        try {
          // Deferred, never run inline: the signal may be emitted from any thread, or from inside a libcurl
          // callback on the strand (a header or write callback that resumed user code). The easy handle is
          // removed only when the strand is outside libcurl.
          asio::post(self->strand_, [self, tr = t, gen = generation] { self->cancel(tr, gen); });
        } catch (...) {
          // Out of memory while posting: the request runs to its own end instead.
        }
      }
    }
  };

  // --- pool -----------------------------------------------------------------------------------------------

  transfer* acquire() {
    std::lock_guard lock(pool_mutex_);
    if (free_.empty()) {
      transfers_.push_back(std::make_unique<transfer>(&hooks_));
      free_.reserve(transfers_.capacity());
      pooled_.store(transfers_.size(), std::memory_order_relaxed);
      return transfers_.back().get();
    }
    transfer* t = free_.back();
    free_.pop_back();
    return t;
  }

  void release(transfer* t) noexcept {
    t->phase = transfer_phase::idle;
    t->op = nullptr;
    t->request = nullptr;
    t->cancel_requested = false;
    t->queued_at = clock::time_point{};
    t->request_started = false;
    t->response_started = false;
    t->body_too_large = false;
    std::lock_guard lock(pool_mutex_);
    t->generation.fetch_add(1, std::memory_order_acq_rel);
    free_.push_back(t); // capacity reserved in acquire(): cannot throw
  }

  // --- on the strand ----------------------------------------------------------------------------------------

  void start(transfer* t) {
    if (shut_down_ || t->cancel_requested) {
      complete(t, asio::error::operation_aborted);
      return;
    }
    if (options_.max_in_flight != 0 && active_ >= options_.max_in_flight) {
      t->phase = transfer_phase::queued;
      t->queued_at = clock::now();
      queue_.push_back(t);
      queued_.store(queue_.size(), std::memory_order_relaxed);
      if (t->options.timeout.count() > 0) {
        arm_queue_timer(t->queued_at + t->options.timeout);
      }
      return;
    }
    // libcurl asks (timer callback 0) to act on the new handle "at once": do it right after, rather than after a
    // trip through the scheduler. We are in a strand handler, not inside a libcurl call.
    defer_immediate_timeout_ = true;
    activate(t);
    defer_immediate_timeout_ = false;
    if (immediate_timeout_posted_ && !immediate_timeout_queued_) {
      run_immediate_timeout();
    }
  }

  void activate(transfer* t) {
    if (auto ec = configure(t)) {
      complete(t, ec);
      return;
    }
    if (curl_multi_add_handle(multi_, t->easy) != CURLM_OK) {
      complete(t, make_error_code(errc::transport_failed));
      return;
    }
    t->phase = transfer_phase::active;
    ++active_;
    in_flight_.store(active_, std::memory_order_relaxed);
  }

  /// The attempt timeout runs while a request waits in the max_in_flight queue too: one timer, armed for the
  /// earliest queued deadline; when it fires, expired requests complete with attempt_timeout (never sent).
  void arm_queue_timer(clock::time_point deadline) {
    if (queue_timer_armed_ && queue_timer_.expiry() <= deadline) {
      return;
    }
    queue_timer_armed_ = true;
    queue_timer_.expires_at(deadline);
    auto const generation = ++queue_timer_generation_;
    queue_timer_.async_wait([self = shared_from_this(), generation](std::error_code ec) {
      if (ec == asio::error::operation_aborted || generation != self->queue_timer_generation_) {
        return;
      }
      self->queue_timer_armed_ = false;
      self->expire_queued();
    });
  }

  void expire_queued() {
    if (shut_down_) {
      return;
    }
    auto const now = clock::now();
    std::optional<clock::time_point> next;
    for (auto it = queue_.begin(); it != queue_.end();) {
      transfer* t = *it;
      if (t->options.timeout.count() > 0) {
        auto const deadline = t->queued_at + t->options.timeout;
        if (deadline <= now) {
          it = queue_.erase(it);
          complete(t, make_error_code(errc::attempt_timeout));
          continue;
        }
        next = next ? std::min(*next, deadline) : deadline;
      }
      ++it;
    }
    queued_.store(queue_.size(), std::memory_order_relaxed);
    if (next) {
      arm_queue_timer(*next);
    }
  }

  void start_queued() {
    while (!queue_.empty() && !shut_down_ && (options_.max_in_flight == 0 || active_ < options_.max_in_flight)) {
      transfer* t = queue_.front();
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_relaxed);
      activate(t);
    }
    disarm_queue_timer_if_empty();
  }

  /// An empty queue needs no deadline: a wait left pending would hold the io_context until the attempt timeout of
  /// a request that started (or was cancelled) long ago.
  void disarm_queue_timer_if_empty() noexcept {
    if (queue_.empty() && queue_timer_armed_) {
      queue_timer_armed_ = false;
      ++queue_timer_generation_;
      queue_timer_.cancel();
    }
  }

  void cancel(transfer* t, std::uint64_t generation) {
    if (t->generation.load(std::memory_order_acquire) != generation) {
      return; // that request already completed; the transfer serves another one now
    }
    switch (t->phase) {
    case transfer_phase::idle: return;
    case transfer_phase::starting: t->cancel_requested = true; return;
    case transfer_phase::queued:
      queue_.erase(std::find(queue_.begin(), queue_.end(), t));
      queued_.store(queue_.size(), std::memory_order_relaxed);
      disarm_queue_timer_if_empty();
      complete(t, asio::error::operation_aborted);
      return;
    case transfer_phase::active:
      remove(t);
      sweep_stale_sockets();
      complete(t, asio::error::operation_aborted);
      start_queued();
      update_epoll_wait();
      return;
    }
  }

  void shutdown() {
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    timer_.cancel();
    queue_timer_.cancel();
    while (!queue_.empty()) {
      transfer* t = queue_.front();
      queue_.pop_front();
      complete(t, asio::error::operation_aborted);
    }
    queued_.store(0, std::memory_order_relaxed);
    std::vector<transfer*> active;
    {
      std::lock_guard lock(pool_mutex_);
      for (auto& t : transfers_) {
        if (t->phase == transfer_phase::active) {
          active.push_back(t.get());
        }
      }
    }
    for (transfer* t : active) {
      remove(t);
      complete(t, asio::error::operation_aborted);
    }
    sweep_stale_sockets();
    // Idle keep-alive connections are closed here, through on_close_socket, while the io_context still runs.
    cleanup_curl();
    epoll_wait_pending_ = false;
    ++epoll_wait_generation_;
    std::error_code ignored;
    epoll_watch_.close(ignored);
  }

  void cleanup_curl() noexcept {
    tearing_down_ = true;
    if (multi_ != nullptr) {
      curl_multi_cleanup(multi_);
      multi_ = nullptr;
    }
    for (auto& t : transfers_) {
      if (t->easy != nullptr) {
        curl_easy_cleanup(std::exchange(t->easy, nullptr));
      }
      if (t->parsed_url != nullptr) {
        curl_url_cleanup(std::exchange(t->parsed_url, nullptr));
      }
    }
    sockets_.clear(); // only descriptors libcurl closed without telling us are left: nothing to close
    watched_ = 0;
    sockets_open_.store(0, std::memory_order_relaxed);
  }

  void remove(transfer* t) noexcept {
    curl_multi_remove_handle(multi_, t->easy);
    --active_;
    in_flight_.store(active_, std::memory_order_relaxed);
  }

  /// Hands the result to the operation and returns the transfer to the pool. The handler is posted, never run
  /// here.
  void complete(transfer* t, std::error_code ec) noexcept {
    // The response is moved out, leaving t->response empty without allocating: its buffers are allocated when
    // the next response arrives, the body's sized by its Content-Length.
    http_response response = std::move(t->response);
    t->response.status = 0;
    t->response.http_version = 0;
    t->response.headers = http_headers();
    if (ec) {
      response = http_response();
    }
    send_completion* op = t->op;
    release(t);
    completed_.fetch_add(1, std::memory_order_relaxed);
    op->complete(ec, std::move(response));
  }

  void finish(transfer* t, CURLcode rc) {
    transfer_facts facts;
    facts.request_started = t->request_started;
    facts.response_started = t->response_started;
    facts.body_too_large = t->body_too_large;
    long connects = 0;
    if (curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0) {
      connections_opened_.fetch_add(static_cast<std::uint64_t>(connects), std::memory_order_relaxed);
    }
    auto ec = map_curl_result(static_cast<int>(rc), facts);
    if (!ec) {
      long status = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
      t->response.status = static_cast<int>(status);
      long version = 0;
      curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);
      switch (version) {
      case CURL_HTTP_VERSION_1_0: t->response.http_version = 10; break;
      case CURL_HTTP_VERSION_1_1: t->response.http_version = 11; break;
      case CURL_HTTP_VERSION_2_0: t->response.http_version = 20; break;
      case CURL_HTTP_VERSION_3: t->response.http_version = 30; break;
      default: t->response.http_version = 0; break;
      }
    }
    remove(t);
    if (ec) {
      sweep_stale_sockets();
    }
    complete(t, ec);
  }

  /// Reaps finished transfers after every curl_multi_socket_action, then starts queued ones.
  void drain() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) {
        continue;
      }
      transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      CURLcode const rc = msg->data.result;
      if (t != nullptr && t->phase == transfer_phase::active) {
        finish(t, rc);
      }
    }
    start_queued();
  }

  void socket_action(curl_socket_t fd, int events) {
    if (multi_ == nullptr) {
      return;
    }
    int running = 0;
    bool timeout_action = fd == CURL_SOCKET_TIMEOUT;
    if (timeout_action) {
      timer_wanted_.reset(); // see below
    }
    curl_multi_socket_action(multi_, fd, events, &running);
    // Transfers libcurl wants run "now" (timer callback 0) run right here, before any other event of the same
    // connection, as curl_multi_perform would: with HTTP/2, a read for one stream often completes others, and
    // libcurl 7.88 can lose a stream's buffered response if another read on the connection comes first
    // (curl#4642, fixed in 8.0 by curl#10715). Bounded: libcurl re-requests at most once per round per transfer.
    for (int round = 0; round < 4 && immediate_timeout_posted_ && multi_ != nullptr; ++round) {
      immediate_timeout_posted_ = false;
      timeout_action = true;
      timer_wanted_.reset();
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    // A CURL_SOCKET_TIMEOUT action makes libcurl forget the deadline it announced last: it announces the earliest
    // one left during the action (hence the reset of timer_wanted_ above), and when none is left it says nothing,
    // not -1. A wait still pending from an earlier deadline would then hold the io_context until it expired (the
    // connect timeout after a burst of HTTP/2 streams): drop it, unless another immediate action is on its way.
    if (timeout_action && !timer_wanted_ && !immediate_timeout_posted_) {
      disarm_timer();
    }
    drain();
    update_epoll_wait();
  }

  /// Timer callback 0, posted (or run early by start()); a no-op when already run.
  void run_immediate_timeout() {
    immediate_timeout_queued_ = false;
    if (!immediate_timeout_posted_) {
      return;
    }
    immediate_timeout_posted_ = false;
    if (!shut_down_) {
      socket_action(CURL_SOCKET_TIMEOUT, 0);
    }
  }

  /// Arms the steady_timer for `when`, replacing a pending wait. Generations tell a stale completion (one that
  /// was already queued when the timer was re-armed) from the current one.
  void arm_timer(clock::time_point when) {
    timer_.expires_at(when);
    timer_armed_ = true;
    timer_armed_at_ = when;
    auto const generation = ++timer_generation_;
    timer_.async_wait(
        [self = shared_from_this(), generation](std::error_code ec) { self->on_timer_fired(generation, ec); });
  }

  /// Cancels the pending wait on timer_, if any.
  void disarm_timer() noexcept {
    if (timer_armed_) {
      timer_armed_ = false;
      ++timer_generation_;
      timer_.cancel();
    }
  }

  void on_timer_fired(std::uint64_t generation, std::error_code ec) {
    if (ec == asio::error::operation_aborted || generation != timer_generation_ || shut_down_) {
      return;
    }
    timer_armed_ = false;
    if (!timer_wanted_) {
      return; // libcurl deleted or replaced its deadline since
    }
    if (clock::now() < *timer_wanted_) {
      arm_timer(*timer_wanted_); // libcurl moved the deadline later: wait again instead of acting early
      return;
    }
    timer_wanted_.reset();
    socket_action(CURL_SOCKET_TIMEOUT, 0);
  }

  // --- sockets: the epoll set ------------------------------------------------------------------------------

  [[nodiscard]] int epoll_fd() noexcept { return epoll_watch_.native_handle(); }

  /// Keeps exactly one wait pending on the epoll set while libcurl wants any socket watched, and none otherwise
  /// (an idle transport holds no work, so io_context::run() can return). Called outside libcurl calls and from
  /// the socket callback (which only ever starts a wait).
  void update_epoll_wait() {
    if (watched_ > 0 && !epoll_wait_pending_ && !shut_down_) {
      auto const generation = ++epoll_wait_generation_;
      epoll_watch_.async_wait(asio::posix::stream_descriptor::wait_read,
                              asio::bind_executor(strand_, [self = shared_from_this(), generation](std::error_code ec) {
                                self->on_epoll_ready(generation, ec);
                              }));
      epoll_wait_pending_ = true;
    } else if (watched_ == 0 && epoll_wait_pending_) {
      epoll_wait_pending_ = false;
      ++epoll_wait_generation_;
      std::error_code ignored;
      epoll_watch_.cancel(ignored);
    }
  }

  /// The epoll set has ready sockets: one curl_multi_socket_action per socket libcurl wants acted on.
  void on_epoll_ready(std::uint64_t generation, std::error_code ec) {
    if (generation != epoll_wait_generation_ || ec == asio::error::operation_aborted) {
      return; // cancelled, or replaced by a newer wait
    }
    epoll_wait_pending_ = false;
    std::array<epoll_event, 64> events{};
    // A few batches per wake-up at most; anything left is reported again (the set is level-triggered).
    for (int round = 0; round < 4 && !shut_down_; ++round) {
      int const n = ::epoll_wait(epoll_fd(), events.data(), static_cast<int>(events.size()), 0);
      if (n <= 0) {
        break; // nothing (left) to do, or EINTR: the next wait reports it again
      }
      for (int i = 0; i < n && !shut_down_; ++i) {
        on_socket_event(events[static_cast<std::size_t>(i)]);
      }
      if (n < static_cast<int>(events.size())) {
        break;
      }
    }
    update_epoll_wait();
  }

  void on_socket_event(epoll_event const& event) {
    auto const fd = static_cast<curl_socket_t>(event.data.u64 & 0xffff'ffffU);
    auto const generation = static_cast<std::uint32_t>(event.data.u64 >> 32U);
    auto it = sockets_.find(fd);
    if (it == sockets_.end() || it->second.generation != generation) {
      return; // closed (and perhaps its number reused) by an action earlier in this batch
    }
    socket_state& s = it->second;
    bool const failed = (event.events & (EPOLLERR | EPOLLHUP)) != 0;
    int select = 0;
    if ((s.wanted & CURL_POLL_IN) != 0 && ((event.events & EPOLLIN) != 0 || failed)) {
      select |= CURL_CSELECT_IN; // libcurl reads, and finds the error or the end itself
    }
    if ((s.wanted & CURL_POLL_OUT) != 0 && ((event.events & EPOLLOUT) != 0 || failed)) {
      select |= CURL_CSELECT_OUT;
    }
    std::uint32_t const unwanted = event.events & (EPOLLIN | EPOLLOUT) & ~epoll_events_for(s.wanted);
    if (unwanted != 0 || (failed && s.wanted == 0)) {
      trim_interest(s); // a direction libcurl no longer wants fired: stop reporting it (level-triggered)
    }
    if (select != 0) {
      socket_action(fd, select); // may close the socket: `s` is not used after this
    }
  }

  /// Reduces the socket's interest to what libcurl wants now (leaves the set when it wants nothing).
  void trim_interest(socket_state& s) noexcept {
    epoll_event ev{};
    if (s.wanted == 0) {
      ::epoll_ctl(epoll_fd(), EPOLL_CTL_DEL, s.fd, &ev);
      s.registered = 0;
      return;
    }
    ev.events = epoll_events_for(s.wanted);
    ev.data.u64 = event_data(s);
    if (::epoll_ctl(epoll_fd(), EPOLL_CTL_MOD, s.fd, &ev) == 0) {
      s.registered = ev.events;
    }
  }

  [[nodiscard]] static std::uint64_t event_data(socket_state const& s) noexcept {
    return (std::uint64_t{s.generation} << 32U) | static_cast<std::uint32_t>(s.fd);
  }

  /// Makes the epoll set report what libcurl now wants of `s` (never removes interest: see socket_state).
  [[nodiscard]] bool widen_interest(socket_state& s) noexcept {
    std::uint32_t const needed = epoll_events_for(s.wanted);
    if ((s.registered & needed) == needed) { // `needed` is never 0 here: libcurl wants something
      return true;                           // the steady state: no system call
    }
    epoll_event ev{};
    ev.events = s.registered | needed;
    ev.data.u64 = event_data(s);
    if (::epoll_ctl(epoll_fd(), s.registered != 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s.fd, &ev) != 0) {
      return false;
    }
    s.registered = ev.events;
    return true;
  }

  // --- libcurl callbacks: run inside curl calls on the strand; never call libcurl, never throw -------------

  static int on_socket_callback(CURL* /*easy*/, curl_socket_t fd, int what, void* userp, void* /*socketp*/) noexcept {
    auto* self = static_cast<transport_impl*>(userp);
    if (self->tearing_down_) {
      return 0;
    }
    auto it = self->sockets_.find(fd);
    if (it == self->sockets_.end()) {
      return 0; // already closed through on_close_socket: nothing to watch
    }
    socket_state& s = it->second;
    int const wanted = (what == CURL_POLL_REMOVE) ? 0 : (what & (CURL_POLL_IN | CURL_POLL_OUT));
    int const before = s.wanted;
    s.wanted = wanted;
    if (wanted != 0 && !self->widen_interest(s)) {
      s.wanted = before;
      return -1; // cannot watch it: libcurl fails the transfers on this socket
    }
    if (before == 0 && wanted != 0) {
      ++self->watched_;
    } else if (before != 0 && wanted == 0) {
      --self->watched_;
    }
    try {
      if (wanted != 0) {
        self->update_epoll_wait(); // only ever starts a wait here; stopping one waits until libcurl returns
      }
    } catch (...) {
      return -1; // could not start the wait: libcurl fails the transfers on this socket
    }
    return 0;
  }

  static int on_timer_callback(CURLM* /*multi*/, long timeout_ms, void* userp) noexcept {
    auto* self = static_cast<transport_impl*>(userp);
    if (self->tearing_down_ || self->shut_down_) {
      return 0;
    }
    try {
      if (timeout_ms < 0) {
        // -1: delete the timer. Cancelled, not just ignored, so that an idle transport holds no work.
        self->timer_wanted_.reset();
        self->disarm_timer();
      } else if (timeout_ms == 0) {
        // 0: act "as soon as possible", but not from inside this callback: post to the strand. A pending wait
        // is left alone; libcurl sets its next deadline when it acts.
        self->timer_wanted_.reset();
        if (!self->immediate_timeout_posted_) {
          self->immediate_timeout_posted_ = true;
          if (!self->defer_immediate_timeout_) { // start() runs it itself, right after curl_multi_add_handle
            self->immediate_timeout_queued_ = true;
            asio::post(self->strand_, [s = self->shared_from_this()] { s->run_immediate_timeout(); });
          }
        }
      } else {
        // N ms. Re-arming costs a syscall and a cancelled handler, so a pending wait that fires no later than
        // the new deadline is kept; it re-arms itself for the rest when it fires (on_timer_fired).
        auto const when = clock::now() + std::chrono::milliseconds(timeout_ms);
        self->timer_wanted_ = when;
        if (!self->timer_armed_ || when < self->timer_armed_at_) {
          self->arm_timer(when);
        }
      }
    } catch (...) {
      return -1;
    }
    return 0;
  }

  static curl_socket_t on_open_socket(void* clientp, curlsocktype purpose, curl_sockaddr* address) noexcept {
    auto* self = static_cast<transport_impl*>(clientp);
    if (purpose != CURLSOCKTYPE_IPCXN || (address->family != AF_INET && address->family != AF_INET6) ||
        self->tearing_down_) {
      return CURL_SOCKET_BAD;
    }
    curl_socket_t fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd == CURL_SOCKET_BAD) {
      return CURL_SOCKET_BAD;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return CURL_SOCKET_BAD;
    }
    try {
      // The number is free again: an entry still holding it is a socket libcurl closed without telling us.
      self->forget_socket(fd);
      socket_state s;
      s.fd = fd;
      s.generation = ++self->socket_generation_;
      s.device = st.st_dev;
      s.inode = st.st_ino;
      self->sockets_.emplace(fd, s);
      self->sockets_open_.store(self->sockets_.size(), std::memory_order_relaxed);
    } catch (...) {
      ::close(fd);
      return CURL_SOCKET_BAD;
    }
    return fd;
  }

  static int on_close_socket(void* clientp, curl_socket_t fd) noexcept {
    static_cast<transport_impl*>(clientp)->forget_socket(fd);
    return ::close(fd);
  }

  /// Stops watching libcurl's descriptor `fd` (if watched), before it is closed.
  void forget_socket(curl_socket_t fd) noexcept {
    auto it = sockets_.find(fd);
    if (it == sockets_.end()) {
      return;
    }
    if (it->second.registered != 0) {
      epoll_event ev{};
      ::epoll_ctl(epoll_fd(), EPOLL_CTL_DEL, fd, &ev); // fails harmlessly if the number is already someone else's
    }
    drop(it);
  }

  void drop(std::unordered_map<curl_socket_t, socket_state>::iterator it) noexcept {
    if (it->second.wanted != 0) {
      --watched_;
    }
    sockets_.erase(it);
    sockets_open_.store(sockets_.size(), std::memory_order_relaxed);
  }

  /// Drops entries whose libcurl descriptor was closed without CURLOPT_CLOSESOCKETFUNCTION (closed, or its number
  /// reused by another socket). Run after transfers end abnormally, which is when libcurl 7.88 does that. The
  /// kernel already took such a socket out of the epoll set when it was closed.
  void sweep_stale_sockets() noexcept {
    for (auto it = sockets_.begin(); it != sockets_.end();) {
      struct stat st {};
      auto const& s = it->second;
      auto const next = std::next(it);
      if (::fstat(s.fd, &st) != 0 || st.st_dev != s.device || st.st_ino != s.inode) {
        drop(it);
      }
      it = next;
    }
  }

  static int on_prereq(void* clientp, char* /*primary_ip*/, char* /*local_ip*/, int /*primary_port*/,
                       int /*local_port*/) noexcept {
    static_cast<transfer*>(clientp)->request_started = true;
    return CURL_PREREQFUNC_OK;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* userp) noexcept {
    auto* t = static_cast<transfer*>(userp);
    std::size_t const n = size * count;
    std::string_view line(data, n);
    t->response_started = true;
    if (t->hooks->on_header != nullptr) {
      try {
        t->hooks->on_header(t->hooks->context);
      } catch (...) {
        return 0; // never let an exception cross into libcurl: abort this transfer instead
      }
    }
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      return n; // end of a header block
    }
    if (line.starts_with("HTTP/")) {
      t->response.headers.clear(); // a new response (after 1xx): only the final one's headers count
      return n;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return n; // not a header field (obsolete line folding, or garbage libcurl tolerated): ignored
    }
    auto name = line.substr(0, colon);
    auto value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
      value.remove_suffix(1);
    }
    if (iequals(name, "content-length")) {
      std::uint64_t length = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec == std::errc() && end == value.data() + value.size()) {
        if (length > t->max_bytes) {
          t->body_too_large = true;
          return 0; // refuse before reading the body
        }
        try {
          t->response.body.reserve(static_cast<std::size_t>(length));
        } catch (...) {
          return 0;
        }
      }
    }
    try {
      t->response.headers.add(name, value);
    } catch (...) {
      return 0; // out of memory: libcurl ends the transfer with CURLE_WRITE_ERROR
    }
    return n;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* userp) noexcept {
    auto* t = static_cast<transfer*>(userp);
    std::size_t const n = size * count;
    if (t->response.body.size() + n > t->max_bytes) {
      t->body_too_large = true;
      return 0; // libcurl aborts with CURLE_WRITE_ERROR; the removal happens later, on the strand
    }
    try {
      t->response.body.append(data, n);
    } catch (...) {
      return 0;
    }
    return n;
  }

  // --- per-request configuration ----------------------------------------------------------------------------

  std::error_code configure(transfer* t) {
    if (t->easy == nullptr) {
      t->easy = curl_easy_init();
      if (t->easy == nullptr) {
        return make_error_code(errc::transport_failed);
      }
      set_constant_options(t);
    }
    CURL* e = t->easy;
    http_request const& req = *t->request;
    t->max_bytes = options_.max_response_bytes;

    // Timeouts: the attempt's, minus what the request spent queued.
    long timeout_ms = 0;
    if (t->options.timeout.count() > 0) {
      auto remaining = t->options.timeout;
      if (t->queued_at != clock::time_point{}) {
        remaining -= std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t->queued_at);
        if (remaining.count() <= 0) {
          return make_error_code(errc::attempt_timeout);
        }
      }
      timeout_ms = static_cast<long>(remaining.count());
    }
    auto connect =
        t->options.connect_timeout.count() > 0 ? t->options.connect_timeout : options_.default_connect_timeout;
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect.count()));
    if (req.url == t->url) {
      return configure_method(t); // same URL as this handle's last request: libcurl still holds its copy
    }
    // Parsed once here and handed over as a CURLU: with CURLOPT_URL libcurl would parse the string again for
    // every request (about 5 % of its work per request on a small POST). Same flags as libcurl uses for
    // CURLOPT_URL, so the same URLs are accepted.
    t->url.clear(); // until libcurl accepted the new one
    if (t->parsed_url == nullptr) {
      t->parsed_url = curl_url();
      if (t->parsed_url == nullptr) {
        return make_error_code(errc::transport_failed);
      }
    }
    if (curl_url_set(t->parsed_url, CURLUPART_URL, req.url.c_str(), CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) !=
            CURLUE_OK ||
        curl_easy_setopt(e, CURLOPT_CURLU, t->parsed_url) != CURLE_OK) {
      return make_error_code(errc::transport_failed);
    }
    t->url.assign(req.url);
    bool const is_http = req.url.size() >= 7 && iequals(std::string_view(req.url).substr(0, 7), "http://");
    bool const prior_knowledge = is_http && options_.http2_prior_knowledge;
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     prior_knowledge ? static_cast<long>(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
                                     : static_cast<long>(CURL_HTTP_VERSION_2TLS));
    // Wait for a connection being set up that may multiplex (HTTP/2) rather than open another one; plain
    // http:// without prior knowledge is HTTP/1.1, where waiting would only serialise the first requests.
    // libcurl before 8.0.0 fails every request that reuses a prior-knowledge connection with CURLE_HTTP2
    // (curl#10634, fixed by curl#10643): there, each such request gets a connection of its own.
    bool const fresh = prior_knowledge && h2c_reuse_broken_;
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, (!fresh && (!is_http || prior_knowledge)) ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, fresh ? 1L : 0L);
    return configure_method(t);
  }

  std::error_code configure_method(transfer* t) {
    CURL* e = t->easy;
    http_request const& req = *t->request;
    if (req.method == http_method::post) {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    } else {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    build_header_list(t);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->header_nodes.empty() ? nullptr : t->header_nodes.data());
    return {};
  }

  /// Builds the request's header list in storage reused across requests (no allocation once warm).
  static void build_header_list(transfer* t) {
    auto const& headers = t->request->headers;
    std::size_t const count = headers.size() + 1;
    if (t->header_lines.size() < count) {
      t->header_lines.resize(count);
    }
    for (std::size_t i = 0; i < headers.size(); ++i) {
      auto& line = t->header_lines[i];
      line.assign(headers[i].name);
      // "Name;" is libcurl's way to send a header with an empty value ("Name:" would remove it).
      if (headers[i].value.empty()) {
        line.push_back(';');
      } else {
        line.append(": ").append(headers[i].value);
      }
    }
    // libcurl asks for 100-continue (and waits up to a second for it) on bodies over a threshold: 1 MiB since
    // 7.77, 1024 bytes before. "Expect:" turns that off; for smaller bodies it is left out, one header fewer for
    // libcurl to compare all of its own against on every request.
    std::size_t used = count;
    if (t->request->body.size() >= 1024) {
      t->header_lines[headers.size()].assign("Expect:"); // never wait for 100-continue
    } else {
      used = count - 1;
    }
    t->header_nodes.resize(used);
    for (std::size_t i = 0; i < used; ++i) {
      t->header_nodes[i].data = t->header_lines[i].data();
      t->header_nodes[i].next = (i + 1 < used) ? &t->header_nodes[i + 1] : nullptr;
    }
  }

  void set_constant_options(transfer* t) {
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &transport_impl::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &transport_impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, &transport_impl::on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, t);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &transport_impl::on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, this);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &transport_impl::on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options_.verify_peer ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options_.verify_host ? 2L : 0L);
    if (!options_.ca_bundle.empty()) {
      curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_bundle.c_str());
    }
    if (!options_.user_agent.empty()) {
      curl_easy_setopt(e, CURLOPT_USERAGENT, options_.user_agent.c_str());
    }
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, options_.tcp_keepalive ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, static_cast<long>(options_.tcp_keepalive_idle.count()));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, static_cast<long>(options_.tcp_keepalive_interval.count()));
    curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, static_cast<long>(options_.dns_cache_ttl.count()));
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, static_cast<long>(options_.max_idle_age.count()));
    if (options_.accept_compressed) {
      curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    }
    if (no_proxy_in_environment_) {
      // No proxy: say so, with an empty exception list, which spares libcurl reading the environment per request.
      curl_easy_setopt(e, CURLOPT_PROXY, "");
      curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    }
  }

  /// Whether a variable libcurl reads to pick a proxy is set (libcurl's names: http_proxy in lower case only, the
  /// others in either case). libcurl reads them for every request; the transport looks once, at construction.
  [[nodiscard]] static bool proxy_in_environment() noexcept {
    for (char const* name : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
      if (char const* value = std::getenv(name); value != nullptr && *value != '\0') {
        return true;
      }
    }
    return false;
  }

  asio::any_io_executor executor_;
  asio::strand<asio::any_io_executor> strand_;
  transport_options options_;
  asio::steady_timer timer_;
  asio::steady_timer queue_timer_;
  bool queue_timer_armed_ = false;
  std::uint64_t queue_timer_generation_ = 0;
  CURLM* multi_ = nullptr;
  asio::posix::stream_descriptor epoll_watch_; ///< the epoll set of libcurl's sockets, as Asio watches it
  std::unordered_map<curl_socket_t, socket_state> sockets_;
  std::uint32_t socket_generation_ = 0;
  std::size_t watched_ = 0; ///< sockets libcurl wants watched now (wanted != 0)
  bool epoll_wait_pending_ = false;
  std::uint64_t epoll_wait_generation_ = 0;
  std::deque<transfer*> queue_;
  std::size_t active_ = 0;
  bool shut_down_ = false;
  bool tearing_down_ = false;
  bool immediate_timeout_posted_ = false;         ///< libcurl asked for an immediate timeout action, not yet run
  bool immediate_timeout_queued_ = false;         ///< ...and a handler for it is posted
  bool defer_immediate_timeout_ = false;          ///< inside start(): it runs the action itself, no post needed
  bool timer_armed_ = false;                      ///< a wait is pending on timer_
  clock::time_point timer_armed_at_;              ///< ...expiring then
  std::optional<clock::time_point> timer_wanted_; ///< libcurl's deadline; none after -1 or 0
  std::uint64_t timer_generation_ = 0;
  bool h2c_reuse_broken_ = false;        ///< libcurl < 8.0.0: see configure()
  bool no_proxy_in_environment_ = false; ///< see proxy_in_environment()

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<transfer>> transfers_;
  std::vector<transfer*> free_;

  std::atomic<std::uint64_t> connections_opened_{0};
  std::atomic<std::uint64_t> sockets_open_{0};
  std::atomic<std::uint64_t> in_flight_{0};
  std::atomic<std::uint64_t> queued_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> pooled_{0};

  transport_test_hooks hooks_;

  friend asio::any_io_executor transport_executor(transport_impl const& impl) noexcept;
  friend void set_test_hooks(transport& tr, transport_test_hooks hooks) noexcept;
};

void start_send(transport_impl& impl, http_request const& request, attempt_options const& options, send_completion* op,
                asio::cancellation_slot slot) {
  impl.initiate(request, options, op, slot);
}

asio::any_io_executor transport_executor(transport_impl const& impl) noexcept {
  return impl.executor();
}

void set_test_hooks(transport& tr, transport_test_hooks hooks) noexcept {
  tr.impl_->hooks_ = hooks;
}

std::error_code map_curl_result(int curl_code, transfer_facts const& facts) noexcept {
  auto const rc = static_cast<CURLcode>(curl_code);
  if (rc == CURLE_OK) {
    return {};
  }
  if (facts.cancelled) {
    return asio::error::operation_aborted;
  }
  if (facts.body_too_large) {
    return make_error_code(errc::response_too_large);
  }
  switch (rc) {
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_COULDNT_CONNECT: return make_error_code(errc::connect_failed);
  case CURLE_OPERATION_TIMEDOUT:
    if (!facts.request_started) {
      return make_error_code(errc::connect_failed); // connect (or TLS handshake) timeout: nothing was sent
    }
    return make_error_code(facts.response_started ? errc::response_timeout : errc::attempt_timeout);
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_HTTP2_STREAM:
    // Reset before the request went out (e.g. during the TLS handshake) means it was never sent.
    return make_error_code(facts.request_started ? errc::connection_reset : errc::connect_failed);
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CLIENTCERT:
  case CURLE_USE_SSL_FAILED: return make_error_code(errc::tls_failed);
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_HTTP2:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_UNSUPPORTED_PROTOCOL: return make_error_code(errc::protocol_error);
  default: return make_error_code(errc::transport_failed);
  }
}

} // namespace wandura::detail

namespace wandura {

transport::transport(asio::any_io_executor ex, transport_options options)
    : impl_(std::make_shared<detail::transport_impl>(std::move(ex), std::move(options))) {}

transport::~transport() {
  if (impl_) {
    impl_->request_shutdown();
  }
}

// send() and send_attempt() are not coroutines themselves: they copy the options into the coroutine they return,
// so that `co_spawn(ex, tr.send_attempt(request, {}), ...)` does not leave the coroutine a dangling reference.
asio::awaitable<http_response> transport::send(http_request const& request, attempt_options const& options) {
  return do_send(request, options);
}

asio::awaitable<attempt_result> transport::send_attempt(http_request const& request, attempt_options const& options) {
  return do_send_attempt(request, options);
}

asio::awaitable<http_response> transport::do_send(http_request const& request, attempt_options options) {
  std::error_code ec;
  http_response response = co_await async_send(request, options, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    throw error(ec, std::string("transport: ") + (request.method == http_method::post ? "POST " : "GET ") +
                        request.url + ": " + ec.message());
  }
  co_return response;
}

asio::awaitable<attempt_result> transport::do_send_attempt(http_request const& request, attempt_options options) {
  attempt_result result;
  result.response = co_await async_send(request, options, asio::redirect_error(asio::use_awaitable, result.error));
  co_return result;
}

asio::any_io_executor transport::get_executor() const {
  return impl_->executor();
}

transport_stats transport::stats() const noexcept {
  return impl_->stats();
}

} // namespace wandura
