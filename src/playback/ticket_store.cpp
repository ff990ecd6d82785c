#include "wandura/playback/ticket_store.hpp"

#include <algorithm>
#include <list>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace wandura {

std::size_t ticket_key_hash::operator()(ticket_key const& key) const noexcept {
  std::hash<std::string_view> h;
  std::size_t seed = h(key.viewer_ref);
  auto mix = [&seed](std::size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); };
  mix(h(key.union_info));
  mix(h(key.film_ref));
  mix(std::hash<std::int32_t>{}(key.episode_no));
  mix(static_cast<std::size_t>(key.intent));
  return seed;
}

struct memory_ticket_store::shard {
  struct node {
    ticket value;
    std::list<ticket_key const*>::iterator recency; // position in `lru`
  };
  mutable std::mutex mutex;
  std::unordered_map<ticket_key, node, ticket_key_hash> entries;
  std::list<ticket_key const*> lru; // front: most recently used; points at the keys of `entries` (node-stable)

  void erase(std::unordered_map<ticket_key, node, ticket_key_hash>::iterator it) {
    lru.erase(it->second.recency);
    entries.erase(it);
  }
};

memory_ticket_store::memory_ticket_store(memory_ticket_store_options options) : options_(std::move(options)) {
  options_.max_entries = std::max<std::size_t>(options_.max_entries, 1);
  shard_count_ = std::clamp<std::size_t>(options_.shards, 1, options_.max_entries);
  per_shard_capacity_ = (options_.max_entries + shard_count_ - 1) / shard_count_;
  shards_ = std::make_unique<shard[]>(shard_count_);
}

memory_ticket_store::~memory_ticket_store() = default;

memory_ticket_store::shard& memory_ticket_store::shard_for(ticket_key const& key) const noexcept {
  return shards_[ticket_key_hash{}(key) % shard_count_];
}

std::chrono::system_clock::time_point memory_ticket_store::now() const {
  return options_.clock ? options_.clock() : std::chrono::system_clock::now();
}

std::optional<ticket> memory_ticket_store::find(ticket_key const& key) {
  auto const t = now();
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(key);
  if (it == s.entries.end()) {
    return std::nullopt;
  }
  if (t >= it->second.value.expires_at - options_.reuse_margin) {
    s.erase(it);
    return std::nullopt;
  }
  s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
  return it->second.value;
}

void memory_ticket_store::insert(ticket_key const& key, ticket const& value) {
  if (key.viewer_ref.empty() || key.union_info.empty()) {
    return; // no viewer or no device: nothing may be reused (SPEC §4)
  }
  if (now() >= value.expires_at - options_.reuse_margin) {
    return; // already inside the reuse margin
  }
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(key);
  if (it != s.entries.end()) {
    it->second.value = value;
    s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
    return;
  }
  while (s.entries.size() >= per_shard_capacity_) {
    auto victim = s.entries.find(*s.lru.back());
    s.erase(victim);
  }
  auto [inserted, ok] = s.entries.emplace(key, shard::node{value, {}});
  (void)ok; // absent: checked above under the same lock
  s.lru.push_front(&inserted->first);
  inserted->second.recency = s.lru.begin();
}

void memory_ticket_store::erase(ticket_key const& key) {
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(key);
  if (it != s.entries.end()) {
    s.erase(it);
  }
}

std::size_t memory_ticket_store::size() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    total += shards_[i].entries.size();
  }
  return total;
}

void memory_ticket_store::clear() {
  for (std::size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    shards_[i].entries.clear();
    shards_[i].lru.clear();
  }
}

} // namespace wandura
