// An `http_sender` decorator that counts the ticket items of every attempt the client sends and what the server
// answered for each, without touching the client: the demo builds its `wandura::client` over it
// (`client(std::shared_ptr<http_sender>, options)`).
//
// Counted per attempt (a retry is a new attempt and counts again): play and prefetch items in the body of each
// `POST .../v1/playback/tickets`, and the items of its response whose status is 429. Other requests pass through
// uncounted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "wandura/transport/http_sender.hpp"

namespace demo {

/// Totals since construction. Plain numbers, read while the run goes on.
struct item_counts {
  std::uint64_t play_sent = 0;     ///< Play items in ticket requests sent, each attempt counted.
  std::uint64_t prefetch_sent = 0; ///< Prefetch items in the same.
  std::uint64_t play_429 = 0;      ///< Play items the server answered 429, each attempt counted.
  std::uint64_t prefetch_429 = 0;  ///< Prefetch items answered 429 (shed).
};

/// @par Thread safety
/// As the wrapped sender: any thread, many coroutines at once; the counts are atomics.
class counting_sender final : public wandura::http_sender {
public:
  /// @param inner the sender that really sends; shared so that it lives as long as the client using this one.
  explicit counting_sender(std::shared_ptr<wandura::http_sender> inner);

  [[nodiscard]] asio::awaitable<wandura::attempt_result> send_attempt(wandura::http_request const& request,
                                                                      wandura::attempt_options const& options) override;
  [[nodiscard]] asio::any_io_executor get_executor() const override { return inner_->get_executor(); }

  [[nodiscard]] item_counts counts() const noexcept;

private:
  std::shared_ptr<wandura::http_sender> inner_;
  std::atomic<std::uint64_t> play_sent_{0};
  std::atomic<std::uint64_t> prefetch_sent_{0};
  std::atomic<std::uint64_t> play_429_{0};
  std::atomic<std::uint64_t> prefetch_429_{0};
};

} // namespace demo
