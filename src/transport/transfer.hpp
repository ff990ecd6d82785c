// Internal: the pooled state of one request (its libcurl easy handle, header list and response), and the pool.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <curl/curl.h>

#include "saturating_time.hpp"
#include "transport/curl_result.hpp"
#include "transport/socket_set.hpp"
#include "transport/test_hooks.hpp"
#include "wandura/transport/detail/send_op.hpp"
#include "wandura/transport/http_request.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura::detail {

/// Where a transfer is in its request's life.
enum class transfer_phase {
  idle,     ///< in the pool's free list
  starting, ///< taken by an initiating thread; start() not yet run on the strand
  queued,   ///< waiting in the request queue for a max_in_flight slot
  active,   ///< its easy handle is in the multi handle
};

/// When an attempt started at `started` with a positive `timeout` ends: saturated, so that a timeout past the
/// clock's range (`milliseconds::max()`, say) is no deadline (`time_point::max()`), not an overflow.
[[nodiscard]] inline std::chrono::steady_clock::time_point
attempt_deadline(std::chrono::steady_clock::time_point started, std::chrono::milliseconds timeout) noexcept {
  return saturating_add(started, timeout);
}

/// One request's state. Created on first need, reused for every later request; never freed before the transport.
/// Everything but `generation` is touched on the strand only (and by the initiating thread before it dispatches
/// the start, which orders those writes before the strand's reads).
struct transfer {
  transfer(socket_set& s, transport_test_hooks const& h) noexcept : sockets(&s), hooks(&h) {}

  CURL* easy = nullptr;
  socket_set* sockets;               ///< where the open-socket callback records the sockets this transfer opens
  transport_test_hooks const* hooks; ///< the owner's test hooks (normally empty)
  /// Bumped each time the transfer returns to the pool, so that a late cancellation of an earlier request is
  /// recognised and ignored. Read from any thread.
  std::atomic<std::uint64_t> generation{0};

  transfer_phase phase = transfer_phase::idle;
  send_completion* op = nullptr;
  http_request const* request = nullptr;
  attempt_options options;
  std::chrono::steady_clock::time_point queued_at; ///< when it entered the request queue; epoch when it never did
  /// When the attempt timeout ends it (counted from the start, queue time included); max() without a timeout.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool cancel_requested = false; ///< cancelled while `starting`
  /// Why the socket set could not watch a socket libcurl asked it to for this transfer (an errno), or 0: the
  /// transfer is ended when libcurl's action returns (transport_impl::end_unwatchable).
  int unwatchable = 0;
  /// Its URL may get an HTTP/2 connection (https, or h2c with prior knowledge that can be reused): set with the URL.
  bool may_multiplex = false;
  /// The last request was sent again, or failed, so libcurl may have counted a resend against the handle: reset it
  /// before the next request (easy_setup::configure).
  bool renew_handle = false;
  transfer_facts facts;
  std::size_t max_body_bytes = 0; ///< transport_options::max_response_bytes
  bool decodes_body = false;      ///< transport_options::accept_compressed: libcurl decodes encoded bodies
  bool content_encoded = false;   ///< the response names a Content-Encoding (not identity): its length is wire bytes
  std::size_t header_bytes = 0;   ///< of every header block so far, interim (1xx) responses' included
  bool interim_response = false;  ///< the response being read is an interim (1xx) one: another follows it
  bool at_block_start = true;     ///< the next header line begins a header block: it is a status line
  /// The response being read ends with its header block (1xx, 204, 304: RFC 9112 §6.3), so its Content-Length
  /// frames nothing.
  bool bodyless = false;
  http_response response;
  std::array<char, CURL_ERROR_SIZE> error_text{}; ///< CURLOPT_ERRORBUFFER

  /// Sockets this transfer opened that no connection has adopted yet. When the transfer ends, those still
  /// recorded were closed by libcurl without the close callback (docs/adr/0002, "Sockets").
  std::vector<opened_socket> unadopted_sockets;
  /// How many of them were opened since libcurl's last pre-request call: the candidates for the connection the
  /// next call names (0: it reuses a pooled connection).
  std::size_t sockets_opened_since_prereq = 0;

  // The request header list, built in storage reused across requests: libcurl only reads a curl_slist.
  std::vector<std::string> header_lines;
  std::vector<curl_slist> header_nodes;
  std::string url;             ///< the URL of `parsed_url` (parsed again only when a request's URL differs)
  CURLU* parsed_url = nullptr; ///< what libcurl reads the URL from (CURLOPT_CURLU); owned, freed after `easy`

  /// Clears the per-request state for the next request (keeps every buffer).
  void reset_request() noexcept;
  /// Frees the easy handle and the parsed URL.
  void free_curl() noexcept;
};

/// Every transfer of a transport, and the free ones. Grows to the peak concurrency, then reuses.
///
/// @par Thread safety
/// `acquire`, `release` and `size` may be called from any thread (a mutex guards the free list). `for_each` only
/// where no `acquire` can run concurrently: on the strand for transfers it owns, or in the transport's destructor.
class transfer_pool {
public:
  transfer_pool(socket_set& sockets, transport_test_hooks const& hooks) : sockets_(sockets), hooks_(hooks) {}

  /// A free transfer, phase `idle`. @throws std::bad_alloc.
  [[nodiscard]] transfer* acquire();
  /// Returns `t` to the free list and bumps its generation. Never throws.
  void release(transfer* t) noexcept;
  /// Transfers created so far.
  [[nodiscard]] std::size_t size() const noexcept;

  template <class F> void for_each(F&& f) {
    std::lock_guard lock(mutex_);
    for (auto& t : transfers_) {
      f(*t);
    }
  }

private:
  socket_set& sockets_;
  transport_test_hooks const& hooks_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<transfer>> transfers_;
  std::vector<transfer*> free_;
};

} // namespace wandura::detail
