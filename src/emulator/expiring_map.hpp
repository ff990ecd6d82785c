// String-keyed maps of the emulator: `string_map` (searched by string_view), and `expiring_map`, a bounded map whose
// entries each have a time from which they are of no use, with an index by that time: a full map makes room by dropping
// the entry that is (or soonest becomes) useless, found in the index alone. Scanning every entry instead, as a full map
// of live entries must on every store, made a long benchmark run spend 85 % of its time in the emulator.
#pragma once

#include <cstddef>
#include <functional>
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

template <typename T, typename TimePoint> class expiring_map {
public:
  explicit expiring_map(std::size_t capacity) : capacity_(capacity) {}

  /// The value under `key`, or null. Callers still check whether it is of use at their time.
  [[nodiscard]] T const* find(std::string_view key) const {
    auto const it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second.value;
  }

  /// Stores `value` under `key` (replacing any), of use until `useless_at`. When full, the entry useless soonest
  /// makes room (past ones first: they lead the index).
  void put(std::string_view key, T value, TimePoint useless_at) {
    if (auto const it = entries_.find(key); it != entries_.end()) {
      // Reindexed through the node itself: no allocation (the last-answer store does this on every request).
      auto node = by_time_.extract(it->second.at);
      node.key() = useless_at;
      it->second.value = std::move(value);
      it->second.at = by_time_.insert(std::move(node));
      return;
    }
    if (capacity_ == 0) {
      return;
    }
    if (entries_.size() >= capacity_) {
      entries_.erase(entries_.find(by_time_.begin()->second));
      by_time_.erase(by_time_.begin());
    }
    auto const [it, inserted] = entries_.emplace(std::string(key), entry{std::move(value), {}});
    (void)inserted;
    try {
      it->second.at = by_time_.emplace(useless_at, it->first);
    } catch (...) {
      entries_.erase(it);
      throw;
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

private:
  using index = std::multimap<TimePoint, std::string_view>; // views of the keys owned by `entries_`
  struct entry {
    T value;
    typename index::iterator at;
  };

  std::size_t capacity_;
  string_map<entry> entries_;
  index by_time_;
};

} // namespace wandura::emulator::detail
