// A bounded map from key to value in independent shards, each with its own mutex and least-recently-used order:
// the storage of the ticket store (tickets by ticket_key) and of the viewer limiter (token buckets by viewer).
// Not public API.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace wandura::detail {

/// See the file comment.
///
/// @tparam Hash, KeyEqual may be transparent (`is_transparent`), so that lookups take a view of the key.
/// @par Thread safety
/// Every member function may be called from any thread at once; each call holds one shard's mutex (or each in
/// turn, for `size` and `clear`) while it runs, and calls the visitor under it: visitors must be short and must not
/// call back into the map.
template <class Key, class Value, class Hash, class KeyEqual = std::equal_to<Key>> class sharded_lru {
public:
  /// @param max_entries the most entries kept over all shards (at least 1), rounded up to a multiple of the shards.
  /// @param shards clamped to [1, max_entries].
  /// @param max_weight the most weight (`put`'s, e.g. bytes) kept over all shards, rounded up to a multiple of the
  ///        shards; entries inserted by `find_or_insert` weigh nothing.
  sharded_lru(std::size_t max_entries, std::size_t shards, std::size_t max_weight = SIZE_MAX)
      : shard_count_(std::clamp<std::size_t>(shards, 1, std::max<std::size_t>(max_entries, 1))),
        per_shard_capacity_(per_shard(std::max<std::size_t>(max_entries, 1), shard_count_)),
        per_shard_weight_(per_shard(max_weight, shard_count_)), shards_(std::make_unique<shard[]>(shard_count_)) {}

  /// Calls `visit(Value* value, bool& drop)` with the entry of `key` (null when absent) and returns what it
  /// returns. A found entry becomes the most recent when `touch`; the visitor may set `drop` to remove it.
  template <class K, class Visit> decltype(auto) find(K const& key, bool touch, Visit&& visit) {
    auto& s = shard_for(key);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(key);
    bool drop = false;
    if (it == s.entries.end()) {
      return visit(static_cast<Value*>(nullptr), drop);
    }
    if (touch) {
      s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
    }
    struct dropper { // removes the entry after the visitor returned, whatever it returned
      shard& s;
      typename map_type::iterator it;
      bool& drop;
      ~dropper() {
        if (drop) {
          s.erase(it);
        }
      }
    } after{s, it, drop};
    return visit(&it->second.value, drop);
  }

  /// Calls `visit(Value&)` with the entry of `key`, first inserted as `make()` when absent (the shard's least
  /// recently used entries go first when it is full); the entry becomes the most recent.
  template <class K, class Make, class Visit> decltype(auto) find_or_insert(K const& key, Make&& make, Visit&& visit) {
    auto& s = shard_for(key);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(key);
    if (it == s.entries.end()) {
      while (s.entries.size() >= per_shard_capacity_) {
        s.erase(s.entries.find(*s.lru.back()));
      }
      it = s.entries.emplace(Key(key), node{make(), {}, 0}).first;
      s.lru.push_front(&it->first);
      it->second.recency = s.lru.begin();
    } else {
      s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
    }
    return visit(it->second.value);
  }

  /// Makes `value`, of `weight`, the entry of `key` and the most recent, the shard's least recently used entries
  /// going first while it holds too many entries or too much weight; false when `weight` alone is over a shard's
  /// share of `max_weight`: `key` then has no entry (the one it had is removed) and `value` is left as it was.
  template <class K> bool put(K const& key, Value&& value, std::size_t weight) {
    if (weight > per_shard_weight_) {
      erase(key);
      return false;
    }
    auto& s = shard_for(key);
    std::lock_guard lock(s.mutex);
    if (auto it = s.entries.find(key); it != s.entries.end()) {
      s.weight -= it->second.weight;
      it->second.value = std::move(value);
      it->second.weight = weight;
      s.weight += weight;
      s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
    } else {
      while (s.entries.size() >= per_shard_capacity_) {
        s.erase(s.entries.find(*s.lru.back()));
      }
      it = s.entries.emplace(Key(key), node{std::move(value), {}, weight}).first;
      s.lru.push_front(&it->first);
      it->second.recency = s.lru.begin();
      s.weight += weight;
    }
    while (s.weight > per_shard_weight_) { // never the entry just put, at the front: it fits alone
      s.erase(s.entries.find(*s.lru.back()));
    }
    return true;
  }

  /// The weight held over all shards (`put`'s).
  [[nodiscard]] std::size_t weight() const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      total += shards_[i].weight;
    }
    return total;
  }

  /// Removes the entry of `key`, if any.
  template <class K> void erase(K const& key) {
    find(key, false, [](Value*, bool& drop) { drop = true; });
  }

  /// Entries held over all shards.
  [[nodiscard]] std::size_t size() const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      total += shards_[i].entries.size();
    }
    return total;
  }

  /// Removes every entry.
  void clear() {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      shards_[i].entries.clear();
      shards_[i].lru.clear();
      shards_[i].weight = 0;
    }
  }

private:
  struct node {
    Value value;
    typename std::list<Key const*>::iterator recency; // position in the shard's `lru`
    std::size_t weight = 0;
  };
  using map_type = std::unordered_map<Key, node, Hash, KeyEqual>;
  struct shard {
    mutable std::mutex mutex;
    map_type entries;
    std::list<Key const*> lru; // front: most recently used; points at the keys of `entries` (node-stable)
    std::size_t weight = 0;    // of its entries

    void erase(typename map_type::iterator it) {
      weight -= it->second.weight;
      lru.erase(it->second.recency);
      entries.erase(it);
    }
  };

  /// `entries / shards` rounded up, without the sum of the usual `(entries + shards - 1) / shards`: near the
  /// largest `std::size_t` that sum wraps around to a capacity of 0.
  [[nodiscard]] static constexpr std::size_t per_shard(std::size_t entries, std::size_t shards) noexcept {
    return entries / shards + (entries % shards == 0 ? 0 : 1);
  }

  template <class K> [[nodiscard]] shard& shard_for(K const& key) const noexcept {
    return shards_[Hash{}(key) % shard_count_];
  }

  std::size_t shard_count_;
  std::size_t per_shard_capacity_;
  std::size_t per_shard_weight_;
  std::unique_ptr<shard[]> shards_;
};

} // namespace wandura::detail
