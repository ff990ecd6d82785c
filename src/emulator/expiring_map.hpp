// String-keyed maps of the emulator: `string_map` (searched by string_view), and `expiring_map`, a bounded map whose
// entries each have a time from which they are of no use, with an index by that time: a full map makes room by dropping
// the entry that is (or soonest becomes) useless, found in the index alone. Scanning every entry instead, as a full map
// of live entries must on every store, made a long benchmark run spend 85 % of its time in the emulator.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace wandura::emulator::detail {

/// Hash and equality that let unordered maps keyed by std::string be searched with a string_view (no allocation).
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename T> using string_map = std::unordered_map<std::string, T, string_hash, std::equal_to<>>;

/// An entry's weight when only its key counts.
struct key_bytes_only {
  template <typename T> std::size_t operator()(T const&) const noexcept { return 0; }
};

/// At most `capacity` entries, and at most `max_bytes` bytes of keys and values, a value weighing what `ValueBytes`
/// says (the bytes of what it holds outside itself, for a value whose fields come from a client).
template <typename T, typename TimePoint, typename ValueBytes = key_bytes_only> class expiring_map {
public:
  explicit expiring_map(std::size_t capacity, std::size_t max_bytes = std::numeric_limits<std::size_t>::max())
      : capacity_(capacity), max_bytes_(max_bytes) {}

  /// The value under `key`, or null. Callers still check whether it is of use at their time.
  [[nodiscard]] T const* find(std::string_view key) const {
    auto const it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second.value;
  }

  /// Stores `value` under `key` (replacing any), of use until `useless_at`. When full (in entries or in bytes), the
  /// entries useless soonest make room (past ones first: they lead the index). An entry heavier than `max_bytes` on
  /// its own is not kept (nor the key's earlier one).
  void put(std::string_view key, T value, TimePoint useless_at) {
    std::size_t const bytes = key.size() + ValueBytes{}(value);
    if (auto const it = entries_.find(key); it != entries_.end()) {
      if (bytes <= it->second.bytes) {
        // Reindexed through the node itself: no allocation (the last-answer store does this on every request).
        auto node = by_time_.extract(it->second.at);
        node.key() = useless_at;
        it->second.value = std::move(value);
        it->second.at = by_time_.insert(std::move(node));
        bytes_ -= it->second.bytes - bytes;
        it->second.bytes = bytes;
        return;
      }
      erase(it); // heavier than before: stored afresh, once there is room for it
    }
    if (capacity_ == 0 || bytes > max_bytes_) {
      return;
    }
    while (!entries_.empty() && (entries_.size() >= capacity_ || max_bytes_ - bytes_ < bytes)) {
      erase(entries_.find(by_time_.begin()->second));
    }
    auto const [it, inserted] = entries_.emplace(std::string(key), entry{std::move(value), {}, bytes});
    (void)inserted;
    try {
      it->second.at = by_time_.emplace(useless_at, it->first);
    } catch (...) {
      entries_.erase(it);
      throw;
    }
    bytes_ += bytes;
  }

  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  /// The bytes of the entries kept, as counted against `max_bytes`.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
  using index = std::multimap<TimePoint, std::string_view>; // views of the keys owned by `entries_`
  struct entry {
    T value;
    typename index::iterator at;
    std::size_t bytes = 0;
  };

  void erase(typename string_map<entry>::iterator it) noexcept {
    bytes_ -= it->second.bytes;
    by_time_.erase(it->second.at); // before the key it views
    entries_.erase(it);
  }

  std::size_t capacity_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  string_map<entry> entries_;
  index by_time_;
};

} // namespace wandura::emulator::detail
