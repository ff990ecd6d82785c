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

  /// The last time a manual clock reaches: 2200-01-01T00:00:00Z. A nanosecond time_point ends in 2262; the rest
  /// is room for the expiry times and windows the emulator computes after `now()`.
  static constexpr std::chrono::sys_seconds last{std::chrono::seconds(7258118400)};

  /// Moves a manual clock forward by `by` (negative values are ignored: time never runs backwards). Returns false,
  /// leaving the clock where it was, when that would move it past `last`. Thread-safe.
  [[nodiscard]] bool advance(std::chrono::milliseconds by) noexcept {
    if (by.count() <= 0) {
      return true;
    }
    auto const room_ms = std::chrono::duration_cast<std::chrono::milliseconds>(last - start_);
    if (by > room_ms) { // also keeps the conversion to nanoseconds below in range
      return false;
    }
    std::int64_t const add = std::chrono::nanoseconds(by).count();
    std::int64_t const room = std::chrono::nanoseconds(last - start_).count();
    std::int64_t offset = offset_ns_.load(std::memory_order_acquire);
    do {
      if (add > room - offset) {
        return false;
      }
    } while (!offset_ns_.compare_exchange_weak(offset, offset + add, std::memory_order_acq_rel));
    return true;
  }

private:
  bool manual_;
  std::chrono::system_clock::time_point start_;
  std::atomic<std::int64_t> offset_ns_{0};
};

} // namespace wandura::emulator::detail
