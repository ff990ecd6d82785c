// The live metrics of one client, behind `client::stats()` and `client::metrics_text()`. Not public API.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "wandura/playback/metrics.hpp"

namespace wandura::detail {

/// The live counters of one client that only the playback layer knows (calls, items, cache, coalescing);
/// attempts, retries and budget refusals are the retry engine's own, added by `client::stats`.
///
/// @par Thread safety
/// Every member function may be called from any thread at once; updates are single relaxed atomic operations.
class playback_metrics {
public:
  playback_metrics() = default;
  playback_metrics(playback_metrics const&) = delete;
  playback_metrics& operator=(playback_metrics const&) = delete;

  void add_call() noexcept { calls_.fetch_add(1, std::memory_order_relaxed); }
  void add_cache_hit() noexcept { cache_hits_.fetch_add(1, std::memory_order_relaxed); }
  void add_coalesced() noexcept { coalesced_.fetch_add(1, std::memory_order_relaxed); }
  void add_call_failure() noexcept { call_failures_.fetch_add(1, std::memory_order_relaxed); }
  void add_store_error() noexcept { store_errors_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one batch item; values outside the enum are ignored.
  void add_outcome(item_outcome o) noexcept {
    auto const i = static_cast<std::size_t>(o);
    if (i < outcomes_.size()) {
      outcomes_[i].fetch_add(1, std::memory_order_relaxed);
    }
  }

  [[nodiscard]] metrics_snapshot snapshot() const noexcept;
  /// `wandura::to_prometheus(snapshot(), prefix)`.
  [[nodiscard]] std::string to_prometheus(std::string_view prefix = "wandura") const;

private:
  std::atomic<std::uint64_t> calls_{0};
  std::atomic<std::uint64_t> cache_hits_{0};
  std::atomic<std::uint64_t> coalesced_{0};
  std::atomic<std::uint64_t> call_failures_{0};
  std::atomic<std::uint64_t> store_errors_{0};
  std::array<std::atomic<std::uint64_t>, std::size(all_item_outcomes)> outcomes_{};
};

} // namespace wandura::detail
