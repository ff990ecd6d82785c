// Internal: the requests beyond `transport_options::max_in_flight`, waiting in FIFO order for a slot.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "transport/transfer.hpp"

namespace wandura::detail {

/// Admission of requests to libcurl: at most `max_in_flight` active at once (0: no limit), the rest in a FIFO.
///
/// A queued request's attempt timeout runs while it waits: one timer, armed for the earliest queued deadline, and
/// cancelled as soon as the queue is empty (a wait left pending would hold io_context::run() until the attempt
/// timeout of a request that started long ago). Handlers passed in are called as `handler(generation, ec)` on the
/// strand; pass both to `on_fired`.
///
/// @par Thread safety
/// Not thread-safe: every member is called on the transport's strand.
class request_queue {
public:
  using clock = std::chrono::steady_clock;
  using strand_type = asio::strand<asio::any_io_executor>;

  request_queue(strand_type const& strand, std::size_t max_in_flight) : max_(max_in_flight), timer_(strand) {}

  /// True when one more request may be handed to libcurl now.
  [[nodiscard]] bool has_room() const noexcept { return max_ == 0 || active_ < max_; }
  /// Counts `t` as handed to libcurl.
  void activated() noexcept { ++active_; }
  /// A request handed to libcurl left it (finished, cancelled or aborted).
  void deactivated() noexcept { --active_; }

  /// Appends `t` (phase becomes `queued`); arms the deadline timer for its attempt timeout. When it throws (out of
  /// memory growing the queue or starting the wait), `t` is not queued; the timer may be left unarmed, for the next
  /// push to arm (the requests queued before still get their slots as requests in flight end).
  template <class Handler> void push(transfer* t, Handler const& handler);
  /// The next request to activate when there is room, else nullptr; disarms the timer once the queue is empty.
  [[nodiscard]] transfer* pop_ready() noexcept;
  /// Takes `t` out of the queue (cancelled).
  void remove(transfer* t) noexcept;
  /// A deadline wait completed: calls `expired(t)` for each request whose attempt timeout passed (taken out of the
  /// queue first) and re-arms for the next deadline.
  template <class Handler, class Expired>
  void on_fired(std::uint64_t generation, std::error_code ec, Handler const& handler, Expired&& expired);
  /// Empties the queue, calling `aborted(t)` for each request, and cancels the timer.
  template <class Aborted> void clear(Aborted&& aborted);

  /// Requests handed to libcurl and not finished.
  [[nodiscard]] std::size_t in_flight() const noexcept { return active_; }
  /// Requests waiting.
  [[nodiscard]] std::size_t waiting() const noexcept { return queue_.size(); }

private:
  template <class Handler> void arm(clock::time_point deadline, Handler const& handler);
  void disarm_if_empty() noexcept;
  [[nodiscard]] static clock::time_point deadline_of(transfer const& t) noexcept {
    return attempt_deadline(t.queued_at, t.options.timeout);
  }

  std::size_t max_;
  std::size_t active_ = 0;
  std::deque<transfer*> queue_;
  asio::steady_timer timer_;
  bool armed_ = false;
  std::uint64_t generation_ = 0;
};

template <class Handler> void request_queue::push(transfer* t, Handler const& handler) {
  auto const queued_at = clock::now();
  queue_.push_back(t);
  if (t->options.timeout.count() > 0) {
    try {
      arm(attempt_deadline(queued_at, t->options.timeout), handler);
    } catch (...) {
      queue_.pop_back();
      throw;
    }
  }
  t->phase = transfer_phase::queued;
  t->queued_at = queued_at;
}

template <class Handler, class Expired>
void request_queue::on_fired(std::uint64_t generation, std::error_code ec, Handler const& handler, Expired&& expired) {
  if (ec == asio::error::operation_aborted || generation != generation_) {
    return;
  }
  armed_ = false;
  auto const now = clock::now();
  bool any_left = false;
  clock::time_point next;
  for (auto it = queue_.begin(); it != queue_.end();) {
    transfer* t = *it;
    if (t->options.timeout.count() > 0) {
      if (deadline_of(*t) <= now) {
        it = queue_.erase(it);
        expired(t);
        continue;
      }
      next = any_left ? std::min(next, deadline_of(*t)) : deadline_of(*t);
      any_left = true;
    }
    ++it;
  }
  if (any_left) {
    arm(next, handler);
  }
}

template <class Aborted> void request_queue::clear(Aborted&& aborted) {
  ++generation_;
  armed_ = false;
  timer_.cancel();
  while (!queue_.empty()) {
    transfer* t = queue_.front();
    queue_.pop_front();
    aborted(t);
  }
}

template <class Handler> void request_queue::arm(clock::time_point deadline, Handler const& handler) {
  if (armed_ && timer_.expiry() <= deadline) {
    return;
  }
  // As curl_timer::arm: armed only once the wait is pending, so that a throw leaves the next push to arm it.
  armed_ = false;
  auto const generation = ++generation_;
  timer_.expires_at(deadline);
  timer_.async_wait([h = handler, generation](std::error_code ec) { h(generation, ec); });
  armed_ = true;
}

} // namespace wandura::detail
