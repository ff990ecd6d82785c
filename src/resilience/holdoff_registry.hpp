// After a 429 on a rate-limit counter, every request to that counter waits until the server's `Retry-After` has
// passed (docs/protocol.md §3 "After a 429, hold every request to that counter until Retry-After has passed"). One
// hold-off per counter, shared by every call of a client, not one per call. Not public API: the retry engine waits for
// it in `wait_for_counter` and feeds it in `note_response`, its only two uses.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace wandura::detail {

/// The per-counter hold-offs of one client.
///
/// @par Thread safety
/// All member functions may be called from any thread at once (a short mutex around a small flat table; counters
/// are few: `playback`, `catalog`, `creatives`, `videos`, `video`, `config`). Until the first hold-off, lookups
/// take no lock: every request asks, and a client that has never seen a 429 should not pay for a mutex.
class holdoff_registry {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Holds `counter` until `until`. A hold-off only ever moves later: an earlier `until` than the current one is
  /// ignored, so concurrent 429s keep the longest wait.
  void hold(std::string_view counter, time_point until);

  /// The time before which no request to `counter` should start; `time_point::min()` when not held.
  [[nodiscard]] time_point held_until(std::string_view counter) const;

private:
  struct entry {
    std::string counter;
    time_point until;
  };
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
  std::atomic<bool> any_{false}; // set (after the entry) once the first hold-off is recorded; never cleared
};

} // namespace wandura::detail
