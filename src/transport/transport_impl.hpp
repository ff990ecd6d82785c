// Internal: the transport's core, wiring its parts: the socket set, libcurl's timer, the request queue, the
// transfer pool and the easy-handle setup around one CURLM (docs/adr/0002-transport-event-loop.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>

#include <curl/curl.h>

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/strand.hpp>

#include "context_shutdown.hpp"
#include "transport/curl_timer.hpp"
#include "transport/easy_setup.hpp"
#include "transport/request_queue.hpp"
#include "transport/socket_set.hpp"
#include "transport/test_hooks.hpp"
#include "transport/transfer.hpp"
#include "wandura/transport/detail/send_op.hpp"
#include "wandura/transport/transport.hpp"

namespace wandura::detail {

/// The implementation behind `wandura::transport`. Lives in a shared_ptr; every pending handler holds a reference.
///
/// @par Thread safety
/// `initiate`, `request_shutdown`, `stats` and `executor` may be called from any thread. Everything else runs on
/// the strand.
class transport_impl : public std::enable_shared_from_this<transport_impl>, public parked_handlers {
public:
  transport_impl(asio::any_io_executor ex, transport_options options);
  transport_impl(transport_impl const&) = delete;
  transport_impl& operator=(transport_impl const&) = delete;
  /// Runs when the last reference goes: normally on the strand after shutdown(); otherwise while the io_context
  /// is destroyed, when handlers can no longer be invoked (pending operations are then freed without a call, as
  /// Asio does with its own operations).
  ~transport_impl();

  [[nodiscard]] asio::any_io_executor const& executor() const noexcept { return executor_; }

  /// Takes a pooled transfer for `op` and dispatches its start to the strand. Called on the initiating thread.
  void initiate(http_request const& request, attempt_options const& options, send_completion* op,
                asio::cancellation_slot slot);
  /// Called from ~transport: aborts everything on the strand, then frees libcurl. Never throws.
  void request_shutdown() noexcept;
  /// Frees every pending send unrun and closes the transport to libcurl's callbacks: its io_context is being shut
  /// down and will run nothing more (context_shutdown.hpp). No thread may run the context.
  void abandon_sends() noexcept;
  /// `abandon_sends`: a transport's sends all run on its own executor's context.
  void abandon(asio::execution_context& /*context*/) noexcept override { abandon_sends(); }
  [[nodiscard]] transport_stats stats() const noexcept;
  void set_test_hooks(transport_test_hooks hooks) noexcept { hooks_ = hooks; }

private:
  /// The lifecycle, in this order.
  using clock = std::chrono::steady_clock;

  enum class state {
    running,  ///< requests are started
    stopping, ///< shutdown(): requests are aborted; libcurl still reports on them
    closed,   ///< libcurl is being cleaned up, or is gone: its callbacks are ignored, nothing starts
  };
  struct cancellation_handler;

  // Requests.
  void start(transfer* t);
  void activate(transfer* t);
  void start_queued();
  void cancel(transfer* t, std::uint64_t generation);
  void finish(transfer* t, CURLcode rc);
  void end_active(transfer* t, std::error_code ec, std::string_view detail) noexcept;
  bool expire_attempts(); ///< true when it ended any
  void end_unwatchable();
  void remove_active(transfer* t) noexcept;
  void complete(transfer* t, std::error_code ec, std::string_view detail = {}) noexcept;
  void shutdown();
  void cleanup_curl() noexcept;

  // libcurl's loop.
  void socket_action(curl_socket_t fd, int events);
  void drain();
  void run_posted_immediate();
  void update_socket_wait();
  void on_sockets_ready(std::uint64_t generation, std::error_code ec);
  void on_timer_fired(std::uint64_t generation, std::error_code ec);
  void on_queue_deadline(std::uint64_t generation, std::error_code ec);
  void publish_stats() noexcept;

  // Handlers for the parts' waits: each holds the implementation alive.
  [[nodiscard]] auto timer_handler_factory() {
    return [this] {
      return [self = shared_from_this()](std::uint64_t g, std::error_code ec) { self->on_timer_fired(g, ec); };
    };
  }
  [[nodiscard]] auto queue_handler() {
    return [self = shared_from_this()](std::uint64_t g, std::error_code ec) { self->on_queue_deadline(g, ec); };
  }

  static int on_socket_callback(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp) noexcept;
  static int on_timer_callback(CURLM* multi, long timeout_ms, void* userp) noexcept;

  asio::any_io_executor executor_;
  asio::strand<asio::any_io_executor> strand_;
  transport_test_hooks hooks_;
  socket_set sockets_;
  easy_setup setup_;
  transfer_pool pool_;
  request_queue queue_;
  curl_timer timer_;
  CURLM* multi_ = nullptr;
  state state_ = state::running;
  /// No active request's attempt deadline is earlier (a lower bound, made exact by expire_attempts).
  std::chrono::steady_clock::time_point earliest_deadline_ = std::chrono::steady_clock::time_point::max();
  /// Some active transfer's socket could not be watched in the current libcurl action (`transfer::unwatchable`).
  bool unwatchable_ = false;

  // What stats() reports. The two totals are event counters. The gauges describe strand-only state (the request
  // queue's counts, the socket set's size): publish_stats() copies them on the strand after every change a
  // caller could observe, before a completion is posted and at the end of each strand handler, so that a reader
  // on another thread sees a consistent recent value without touching strand state.
  std::atomic<std::uint64_t> connections_opened_{0};
  std::atomic<std::uint64_t> requests_completed_{0};
  std::atomic<std::uint64_t> published_in_flight_{0};
  std::atomic<std::uint64_t> published_queued_{0};
  std::atomic<std::uint64_t> published_sockets_{0};
};

} // namespace wandura::detail
