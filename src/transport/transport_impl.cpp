#include "transport/transport_impl.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/error.hpp>
#include <asio/post.hpp>

#include "transport/curl_result.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

/// curl_global_init is not thread-safe in every libcurl build: run it once, before the first multi handle.
void global_init() {
  static CURLcode const rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    throw std::system_error(make_error_code(errc::transport_failed),
                            std::string("curl_global_init: ") + curl_easy_strerror(rc));
  }
}

[[nodiscard]] int http_version_of(CURL* easy) noexcept {
  long version = 0;
  curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
  switch (version) {
  case CURL_HTTP_VERSION_1_0: return 10;
  case CURL_HTTP_VERSION_1_1: return 11;
  case CURL_HTTP_VERSION_2_0: return 20;
  case CURL_HTTP_VERSION_3: return 30;
  default: return 0;
  }
}

} // namespace

/// Installed in a connected cancellation slot: posts the cancellation of one request to the strand.
struct transport_impl::cancellation_handler {
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
        // callback on the strand (a header or write callback that resumed user code). The easy handle is removed
        // only when the strand is outside libcurl.
        asio::post(self->strand_, [self, tr = t, gen = generation] { self->cancel(tr, gen); });
      } catch (...) {
        // Out of memory while posting: the request runs to its own end instead.
      }
    }
  }
};

transport_impl::transport_impl(asio::any_io_executor ex, transport_options options)
    : executor_(std::move(ex)), strand_(asio::make_strand(executor_)), sockets_(strand_),
      setup_(std::move(options), sockets_), pool_(sockets_, hooks_), queue_(strand_, setup_.options().max_in_flight),
      timer_(strand_) {
  global_init();
  multi_ = curl_multi_init();
  if (multi_ == nullptr) {
    throw std::system_error(make_error_code(errc::transport_failed), "curl_multi_init failed");
  }
  auto const& o = setup_.options();
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &transport_impl::on_socket_callback);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &transport_impl::on_timer_callback);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, o.max_connections_per_host);
  curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, o.max_total_connections);
  curl_multi_setopt(multi_, CURLMOPT_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
  // libcurl's default cache size is 4 x the easy handles added at that moment; ours are removed as they finish,
  // so after a burst of completions it would close most idle connections. Size it from the limits.
  long const idle = o.max_idle_connections > 0 ? o.max_idle_connections
                                               : std::max({o.max_total_connections, o.max_connections_per_host, 64L});
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, idle);
}

transport_impl::~transport_impl() {
  abandon_sends(); // what is still pending goes unrun, as at its io_context's shutdown
  pool_.for_each([this](transfer& t) {
    if (t.phase == transfer_phase::active) {
      curl_multi_remove_handle(multi_, t.easy);
    }
  });
  cleanup_curl();
}

void transport_impl::abandon_sends() noexcept {
  state_ = state::closed;
  std::vector<send_completion*> pending;
  try {
    pool_.for_each([&](transfer& t) {
      if (t.op != nullptr) {
        pending.push_back(std::exchange(t.op, nullptr));
      }
    });
  } catch (...) { // out of memory: the rest are freed during the walk itself
    pool_.for_each([](transfer& t) {
      if (t.op != nullptr) {
        std::exchange(t.op, nullptr)->destroy();
      }
    });
  }
  for (auto* op : pending) { // after the walk: freeing a coroutine's frames may destroy what they own
    op->destroy();
  }
}

// --- any thread ---------------------------------------------------------------------------------------------

void transport_impl::initiate(http_request const& request, attempt_options const& options, send_completion* op,
                              asio::cancellation_slot slot) {
  transfer* t = nullptr;
  try {
    t = pool_.acquire();
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
  // the completion handler inline: completions are always posted). The strand's own dispatch, not the free
  // function: that one goes through strand::execute, which asks the type-erased executor for its blocking
  // property on every call, and any_io_executor answers that query with a heap-allocated value.
  strand_.dispatch([self = shared_from_this(), t] { self->start(t); }, std::allocator<void>());
}

void transport_impl::request_shutdown() noexcept {
  try {
    asio::post(strand_, [self = shared_from_this()] { self->shutdown(); });
  } catch (...) {
    // Out of memory: the destructor tears down when the last handler holding us is destroyed.
  }
}

transport_stats transport_impl::stats() const noexcept {
  transport_stats s;
  s.connections_opened = connections_opened_.load(std::memory_order_relaxed);
  s.requests_completed = requests_completed_.load(std::memory_order_relaxed);
  s.sockets_open = published_sockets_.load(std::memory_order_relaxed);
  s.requests_in_flight = published_in_flight_.load(std::memory_order_relaxed);
  s.requests_queued = published_queued_.load(std::memory_order_relaxed);
  s.pooled_transfers = pool_.size();
  return s;
}

// --- requests, on the strand --------------------------------------------------------------------------------

void transport_impl::start(transfer* t) {
  if (state_ != state::running || t->cancel_requested) {
    complete(t, asio::error::operation_aborted);
    return;
  }
  if (!queue_.has_room()) {
    try {
      queue_.push(t, queue_handler());
    } catch (...) {
      // Out of memory: this request fails alone (left unqueued), rather than the exception leaving the strand's
      // handler through io_context::run().
      complete(t, make_error_code(errc::transport_failed), "out of memory queueing the request");
      return;
    }
    publish_stats();
    return;
  }
  // libcurl asks (timer callback 0) to act on the new handle "at once". A request that finds others in flight joins
  // the next posted action: their completions are being handled now and start requests of their own, which then go
  // out together (one wake-up of the server per batch instead of one per request, and one action for all). A lone
  // request goes right away, without a trip through the scheduler. We are in a strand handler, not in libcurl.
  bool const alone = queue_.in_flight() == 0;
  timer_.defer_immediate(alone);
  activate(t);
  timer_.defer_immediate(false);
  if (alone && timer_.immediate_unposted() && timer_.take_immediate()) {
    socket_action(CURL_SOCKET_TIMEOUT, 0);
  }
  publish_stats();
}

void transport_impl::activate(transfer* t) {
  bool const timed = t->options.timeout.count() > 0;
  auto const now = timed ? clock::now() : clock::time_point{}; // read once, for the deadline and libcurl's timeout
  if (timed) {
    auto const started = t->queued_at != clock::time_point{} ? t->queued_at : now;
    t->deadline = attempt_deadline(started, t->options.timeout);
    if (t->deadline < earliest_deadline_) {
      earliest_deadline_ = t->deadline;
      timer_.set_owner_deadline(earliest_deadline_); // served after the action this start is followed by
    }
  }
  std::string why;
  if (auto ec = setup_.configure(*t, now, why)) {
    complete(t, ec, why);
    return;
  }
  if (curl_multi_add_handle(multi_, t->easy) != CURLM_OK) {
    complete(t, make_error_code(errc::transport_failed), "curl_multi_add_handle failed");
    return;
  }
  t->phase = transfer_phase::active;
  queue_.activated();
}

void transport_impl::start_queued() {
  while (state_ == state::running) {
    transfer* t = queue_.pop_ready();
    if (t == nullptr) {
      return;
    }
    activate(t);
  }
}

void transport_impl::cancel(transfer* t, std::uint64_t generation) {
  if (t->generation.load(std::memory_order_acquire) != generation) {
    return; // that request already completed; the transfer serves another one now
  }
  switch (t->phase) {
  case transfer_phase::idle: return;
  case transfer_phase::starting: t->cancel_requested = true; return;
  case transfer_phase::queued:
    queue_.remove(t);
    complete(t, asio::error::operation_aborted);
    break;
  case transfer_phase::active:
    end_active(t, asio::error::operation_aborted, {});
    start_queued();
    update_socket_wait();
    break;
  }
  publish_stats();
}

namespace {

/// Before a timeout is told apart: whether some bytes of a response arrived although no whole status line did (a
/// server sending one a byte at a time). libcurl keeps an unfinished line to itself; its first-byte time says, when
/// it can (`transfer_facts::first_byte_time_is_response`, decided as the request went out).
void note_first_byte(transfer& t) noexcept {
  if (t.facts.response_started || !t.facts.first_byte_time_is_response || t.easy == nullptr) {
    return;
  }
  curl_off_t first_byte_us = 0;
  t.facts.response_bytes_arrived =
      curl_easy_getinfo(t.easy, CURLINFO_STARTTRANSFER_TIME_T, &first_byte_us) == CURLE_OK && first_byte_us > 0;
}

/// Where an attempt stood when its timeout passed, for its message.
[[nodiscard]] char const* timeout_stage(std::error_code ec) noexcept {
  if (ec == errc::response_timeout) {
    return "mid-response";
  }
  return ec == errc::attempt_timeout ? "before any response byte" : "while connecting";
}

} // namespace

void transport_impl::finish(transfer* t, CURLcode rc) {
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    note_first_byte(*t);
  }
  auto const ec = map_curl_result(static_cast<int>(rc), t->facts, t->error_text.data());
  if (!ec) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    t->response.status = static_cast<int>(status);
    t->response.http_version = http_version_of(t->easy);
  }
  remove_active(t);
  if (ec) {
    std::string const why = describe_curl_result(static_cast<int>(rc), t->facts, t->error_text.data());
    complete(t, ec, why);
  } else {
    complete(t, ec);
  }
}

/// Ends an active request before libcurl did (cancelled, or its attempt timeout passed).
///
/// A connection the request had to itself is closed, not pooled: an HTTP/1.1 one could not be reused anyway, and
/// an HTTP/2 one then ends its stream at once, where libcurl 7.88 would leave the RST_STREAM in the connection's
/// output buffer until the connection is next used. An HTTP/2 connection other streams still use stays (their
/// traffic sends the RST_STREAM). The URL options are set again for the transfer's next request.
void transport_impl::end_active(transfer* t, std::error_code ec, std::string_view detail) noexcept {
  curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, 1L);
  t->url.clear();
  remove_active(t);
  complete(t, ec, detail);
}

/// Ends the active requests whose attempt timeout passed, before libcurl would (its deadline for each is no
/// earlier than the transport's): when libcurl times a request out itself, the connection is kept with the reset
/// unsent (see end_active). Runs whenever libcurl's timer wait completes, which also serves the earliest attempt
/// deadline (libcurl may announce a later one than a request's own timeout: see curl_timer).
bool transport_impl::expire_attempts() {
  if (earliest_deadline_ == clock::time_point::max()) {
    return false; // no attempt has a deadline: not even a clock read (this runs before every libcurl action)
  }
  auto const now = clock::now();
  if (now < earliest_deadline_) {
    return false;
  }
  std::vector<transfer*> expired;
  auto next = clock::time_point::max();
  pool_.for_each([&](transfer& t) {
    if (t.phase == transfer_phase::active) {
      if (t.deadline <= now) {
        expired.push_back(&t);
      } else {
        next = std::min(next, t.deadline);
      }
    }
  });
  earliest_deadline_ = next;
  timer_.set_owner_deadline(earliest_deadline_);
  for (transfer* t : expired) {
    note_first_byte(*t);
    auto const ec = map_curl_result(CURLE_OPERATION_TIMEDOUT, t->facts);
    auto const why =
        "attempt timeout of " + std::to_string(t->options.timeout.count()) + " ms passed " + timeout_stage(ec);
    end_active(t, ec, why);
  }
  return !expired.empty();
}

/// Ends the requests whose socket the set could not watch in the last libcurl action (on_socket_callback): libcurl
/// believes it watched, so they would wait for events that never come. One that had sent nothing (its new
/// connection's socket, or its name lookup's, was refused) ends as connect_failed, which any request may retry; one
/// that had (a socket registered again after it went out) may have been executed: transport_failed. A connection it
/// had to itself is closed (end_active); other requests on a shared HTTP/2 connection go on with the interest the
/// socket had. The flag is cleared last: if this throws (out of memory), the next action tries again.
void transport_impl::end_unwatchable() {
  std::vector<transfer*> ended;
  pool_.for_each([&](transfer& t) {
    if (t.phase == transfer_phase::active && t.unwatchable != 0) {
      ended.push_back(&t);
    }
  });
  for (transfer* t : ended) {
    std::string why =
        "could not watch the connection's socket (epoll_ctl: " + std::system_category().message(t->unwatchable) + ")";
    if (t->facts.request_started) {
      end_active(t, make_error_code(errc::transport_failed), why + " after the request went out");
    } else {
      end_active(t, make_error_code(errc::connect_failed), why + ": nothing was sent");
    }
  }
  unwatchable_ = false;
}

/// Takes an active transfer's easy handle out of libcurl. Sockets it opened that no connection adopted are gone
/// then: libcurl closed them with a plain close() (docs/adr/0002, "Sockets"), so their records are dropped. Every
/// active request ends here once, however it ends (finished, timed out, cancelled, transport destroyed): the
/// connections it opened are counted here.
void transport_impl::remove_active(transfer* t) noexcept {
  long connects = 0; // of this request only: libcurl resets the count when a transfer starts
  if (curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0) {
    connections_opened_.fetch_add(static_cast<std::uint64_t>(connects), std::memory_order_relaxed);
  }
  curl_multi_remove_handle(multi_, t->easy);
  queue_.deactivated();
  if (queue_.in_flight() == 0 && earliest_deadline_ != clock::time_point::max()) {
    earliest_deadline_ = clock::time_point::max(); // nothing left to time out: an idle transport holds no wait
    timer_.clear_owner_deadline();
  }
  for (auto const& s : t->unadopted_sockets) {
    sockets_.forget_closed(s);
  }
  t->unadopted_sockets.clear();
  t->sockets_opened_since_prereq = 0;
}

/// Hands the result to the operation and returns the transfer to the pool. The handler is posted, never run here.
void transport_impl::complete(transfer* t, std::error_code ec, std::string_view detail) noexcept {
  // The response is moved out, leaving t->response empty without allocating: its buffers are allocated when the
  // next response arrives, the body's sized by its Content-Length.
  http_response response = std::move(t->response);
  t->response.status = 0;
  t->response.http_version = 0;
  t->response.headers = http_headers();
  if (ec) {
    response = http_response();
    t->renew_handle = true; // it may have been sent again, on a connection that failed: see easy_setup::configure
  }
  std::string detail_copy;
  try {
    detail_copy.assign(detail); // `detail` may live in the transfer, which is reused once released
  } catch (...) {
  }
  send_completion* op = t->op;
  pool_.release(t);
  requests_completed_.fetch_add(1, std::memory_order_relaxed);
  publish_stats();
  op->complete(ec, std::move(response), detail_copy);
}

void transport_impl::shutdown() {
  if (state_ != state::running) {
    return;
  }
  state_ = state::stopping;
  timer_.cancel();
  queue_.clear([this](transfer* t) { complete(t, asio::error::operation_aborted); });
  std::vector<transfer*> active;
  pool_.for_each([&active](transfer& t) {
    if (t.phase == transfer_phase::active) {
      active.push_back(&t);
    }
  });
  for (transfer* t : active) {
    remove_active(t);
    complete(t, asio::error::operation_aborted);
  }
  // Idle keep-alive connections are closed here, through the close callback, while the io_context still runs.
  cleanup_curl();
  sockets_.shut();
  publish_stats();
}

void transport_impl::cleanup_curl() noexcept {
  state_ = state::closed;
  if (multi_ != nullptr) {
    curl_multi_cleanup(multi_);
    multi_ = nullptr;
  }
  pool_.for_each([](transfer& t) { t.free_curl(); });
  sockets_.clear(); // only sockets libcurl closed without telling us are left: nothing to close
}

void transport_impl::publish_stats() noexcept {
  published_in_flight_.store(queue_.in_flight(), std::memory_order_relaxed);
  published_queued_.store(queue_.waiting(), std::memory_order_relaxed);
  published_sockets_.store(sockets_.size(), std::memory_order_relaxed);
}

} // namespace wandura::detail
