// transport_impl's event loop: libcurl's socket and timer callbacks, and curl_multi_socket_action driven by the
// socket set, libcurl's timer and the request queue (docs/adr/0002-transport-event-loop.md).
#include "transport/transport_impl.hpp"

#include <cerrno>

#include <asio/bind_executor.hpp>
#include <asio/post.hpp>

#include "wandura/error.hpp"

namespace wandura::detail {

void transport_impl::socket_action(curl_socket_t fd, int events) {
  if (multi_ == nullptr) {
    return;
  }
  // Attempts whose timeout passed end here first. libcurl checks its own deadline (curl_timer::
  // libcurl_timeout_margin after the transport's) in every action, and a transfer it times out itself keeps its
  // connection, with an HTTP/2 stream's reset unsent (end_active); the transport's timer may fire up to
  // `owner_tolerance` after an attempt's deadline (curl_timer), so a busy socket, or an action libcurl asked for at
  // once, would otherwise let libcurl end it. At most one clock read; the slots of those ended go to queued requests
  // in drain() below.
  if (state_ == state::running) {
    (void)expire_attempts();
  }
  int running = 0;
  bool const timeout_action = fd == CURL_SOCKET_TIMEOUT;
  if (timeout_action) {
    timer_.begin_timeout_action();
  }
  sockets_.action_boundary(); // input on idle connections is read again, once, if this action reuses one
  curl_multi_socket_action(multi_, fd, events, &running);
  sockets_.action_boundary();
  if (unwatchable_) {
    end_unwatchable();
  }
  if (timeout_action) {
    timer_.end_timeout_action();
  }
  drain();
  update_socket_wait();
  timer_.serve_owner(timer_handler_factory()); // libcurl announced its deadlines: is the earliest attempt's covered?
}

/// Reaps finished transfers after every curl_multi_socket_action, then starts queued ones.
void transport_impl::drain() {
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

/// Timer callback 0, posted; a no-op when already run.
void transport_impl::run_posted_immediate() {
  if (timer_.take_posted_immediate() && state_ == state::running) {
    socket_action(CURL_SOCKET_TIMEOUT, 0);
    publish_stats();
  }
}

void transport_impl::update_socket_wait() {
  if (state_ != state::running) {
    return;
  }
  sockets_.update_wait(asio::bind_executor(
      strand_, [self = shared_from_this()](std::uint64_t g, std::error_code ec) { self->on_sockets_ready(g, ec); }));
}

/// The epoll set has ready sockets: one curl_multi_socket_action per socket libcurl wants acted on.
void transport_impl::on_sockets_ready(std::uint64_t generation, std::error_code ec) {
  if (!sockets_.take_wake(generation, ec)) {
    return;
  }
  sockets_.dispatch_ready([this](curl_socket_t fd, int select) { socket_action(fd, select); },
                          [this] { return state_ == state::running; });
  update_socket_wait();
  publish_stats();
}

void transport_impl::on_timer_fired(std::uint64_t generation, std::error_code ec) {
  if (state_ != state::running) {
    return;
  }
  auto const wake = timer_.on_fired(generation, ec, timer_handler_factory());
  if (wake == curl_timer::wake::stale) {
    return;
  }
  if (wake == curl_timer::wake::due) {
    socket_action(CURL_SOCKET_TIMEOUT, 0); // ends the due attempts first, reaps, starts queued requests
  } else {
    // An attempt deadline may be why this wait ran (libcurl's can be later).
    if (expire_attempts()) {
      drain(); // the slots the ended attempts held go to queued requests
      update_socket_wait();
    }
    timer_.serve_owner(timer_handler_factory());
  }
  publish_stats();
}

/// Requests whose attempt timeout passed while queued complete with attempt_timeout: they were never sent.
void transport_impl::on_queue_deadline(std::uint64_t generation, std::error_code ec) {
  if (state_ != state::running) {
    return;
  }
  try {
    queue_.on_fired(generation, ec, queue_handler(), [this](transfer* t) {
      complete(t, make_error_code(errc::attempt_timeout), "attempt timeout passed while queued behind max_in_flight");
    });
  } catch (...) {
    // Out of memory re-arming the wait: the requests still queued get their slots as others end, and the next
    // push arms the wait for their deadlines.
  }
  publish_stats();
}

// --- libcurl's multi callbacks: inside libcurl calls on the strand; never call the multi handle, never throw ---

// A callback returning -1 makes libcurl 7.88 mark the whole multi handle dead: every transfer in it fails the next
// time libcurl runs it, and none can be added until none is left. The socket callback never does (a socket the
// kernel will not watch fails its transfer alone); the timer callback does only out of memory.

int transport_impl::on_socket_callback(CURL* easy, curl_socket_t fd, int what, void* userp,
                                       void* /*socketp*/) noexcept {
  auto* self = static_cast<transport_impl*>(userp);
  if (self->state_ == state::closed) {
    return 0;
  }
  if (!self->sockets_.want(fd, what)) {
    // The kernel would not watch it (epoll_ctl: out of memory, or past fs.epoll.max_user_watches). The transfer
    // that asked is ended when this action returns, alone (end_unwatchable); reading its private pointer does not
    // touch the multi handle.
    int const why = errno != 0 ? errno : ENOMEM;
    transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &t);
    // Always a transfer of ours: libcurl passes its closure handle (no private pointer) only with CURL_POLL_REMOVE,
    // which the set never refuses.
    if (t != nullptr && t->phase == transfer_phase::active) {
      t->unwatchable = why;
      self->unwatchable_ = true;
    }
    return 0;
  }
  try {
    if (what != CURL_POLL_REMOVE) {
      self->update_socket_wait(); // only ever starts a wait here; stopping one waits until libcurl returns
    }
  } catch (...) {
    // Out of memory starting the set's wait: socket_action starts it again when libcurl returns.
  }
  return 0;
}

int transport_impl::on_timer_callback(CURLM* /*multi*/, long timeout_ms, void* userp) noexcept {
  auto* self = static_cast<transport_impl*>(userp);
  if (self->state_ != state::running) {
    return 0;
  }
  try {
    if (self->timer_.on_curl_request(timeout_ms, self->timer_handler_factory())) {
      // 0: act "as soon as possible", but not from inside this callback.
      asio::post(self->strand_, [s = self->shared_from_this()] { s->run_posted_immediate(); });
    }
  } catch (...) {
    return -1; // out of memory arming the wait or posting the action: libcurl marks the multi handle dead
  }
  return 0;
}

} // namespace wandura::detail
