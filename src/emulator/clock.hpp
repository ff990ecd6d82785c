// The emulator's clock: real UTC time, or (manual mode) the real UTC time at start moved only by advance().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace wandura::emulator::detail {

class emulator_clock {
public:
  explicit emulator_clock(bool manual) noexcept : manual_(manual), start_(std::chrono::system_clock::now()) {}

  [[nodiscard]] bool manual() const noexcept { return manual_; }

  /// The current emulator time. Thread-safe.
  [[nodiscard]] std::chrono::system_clock::time_point now() const noexcept {
    if (!manual_) {
      return std::chrono::system_clock::now();
    }
    return start_ + std::chrono::nanoseconds(offset_ns_.load(std::memory_order_acquire));
  }

  /// Moves a manual clock forward by `by` (negative values are ignored: time never runs backwards).
  void advance(std::chrono::nanoseconds by) noexcept {
    if (by.count() > 0) {
      offset_ns_.fetch_add(by.count(), std::memory_order_acq_rel);
    }
  }

private:
  bool manual_;
  std::chrono::system_clock::time_point start_;
  std::atomic<std::int64_t> offset_ns_{0};
};

} // namespace wandura::emulator::detail
