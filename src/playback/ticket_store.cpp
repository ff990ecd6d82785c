#include "wandura/playback/ticket_store.hpp"

#include <string_view>
#include <utility>

#include "playback/sharded_lru.hpp"
#include "saturating_time.hpp"

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

namespace {

/// What one entry costs, roughly: the key's and the ticket's characters, and their structures with the map's and
/// the recency list's nodes around them (a fixed part, measured rather than exact).
std::size_t entry_bytes(ticket_key const& key, ticket const& t) noexcept {
  constexpr std::size_t fixed = sizeof(ticket_key) + sizeof(ticket) + 96;
  return fixed + key.viewer_ref.size() + key.union_info.size() + key.film_ref.size() + t.ticket_id.size() +
         t.manifest_url.size() + t.license_url.size() + t.expires_at_text.size() + t.drm_payload.size();
}

std::shared_ptr<wandura::clock> or_real_clock(std::shared_ptr<wandura::clock> time) {
  return time ? std::move(time) : std::make_shared<real_clock>();
}

} // namespace

struct memory_ticket_store::storage : detail::sharded_lru<ticket_key, ticket, ticket_key_hash> {
  using sharded_lru::sharded_lru;
};

memory_ticket_store::memory_ticket_store(memory_ticket_store_options options) : options_(std::move(options)) {
  options_.time_source = or_real_clock(std::move(options_.time_source));
  entries_ = std::make_unique<storage>(options_.max_entries, options_.shards, options_.max_bytes);
}

memory_ticket_store::~memory_ticket_store() = default;

std::optional<std::vector<std::optional<ticket>>> ticket_store::try_find(std::span<ticket_key const> /*keys*/) {
  return std::nullopt;
}

bool ticket_store::try_insert_many(std::vector<std::pair<ticket_key, ticket>>& /*tickets*/) {
  return false;
}

std::optional<std::vector<std::optional<ticket>>> memory_ticket_store::try_find(std::span<ticket_key const> keys) {
  std::vector<std::optional<ticket>> found;
  found.reserve(keys.size());
  for (auto const& key : keys) {
    found.push_back(find_one(key));
  }
  return found;
}

asio::awaitable<std::vector<std::optional<ticket>>> memory_ticket_store::find(std::vector<ticket_key> keys) {
  co_return std::move(*try_find(keys));
}

std::optional<ticket> memory_ticket_store::find_one(ticket_key const& key) {
  auto const t = options_.time_source->system_now();
  return entries_->find(key, true, [&](ticket* found, bool& drop) -> std::optional<ticket> {
    if (found == nullptr) {
      return std::nullopt;
    }
    if (t >= detail::saturating_sub(found->expires_at, options_.reuse_margin)) {
      drop = true; // inside the reuse margin: never reused again
      return std::nullopt;
    }
    return *found;
  });
}

asio::awaitable<void> ticket_store::insert_many(std::vector<std::pair<ticket_key, ticket>> tickets) {
  for (auto& [key, value] : tickets) {
    auto one = insert(std::move(key), std::move(value)); // named: GCC 12 and co_await temporaries
    co_await std::move(one);
  }
}

bool memory_ticket_store::try_insert_many(std::vector<std::pair<ticket_key, ticket>>& tickets) {
  for (auto& [key, value] : tickets) {
    insert_now(key, std::move(value));
  }
  return true;
}

asio::awaitable<void> memory_ticket_store::insert(ticket_key key, ticket value) {
  insert_now(key, std::move(value));
  co_return;
}

void memory_ticket_store::insert_now(ticket_key const& key, ticket&& value) {
  if (key.viewer_ref.empty() || key.union_info.empty()) {
    return; // no viewer or no device: nothing may be reused (docs/protocol.md §4)
  }
  if (options_.time_source->system_now() >= detail::saturating_sub(value.expires_at, options_.reuse_margin)) {
    entries_->erase(key); // already inside the reuse margin: declined, and the earlier ticket is replaced by none
    return;
  }
  if (options_.max_entries == 0) {
    return; // a store of no entries keeps none (the LRU under it always holds at least one)
  }
  auto const weight = entry_bytes(key, value);
  // One larger than a shard's share of max_bytes is declined, and the earlier ticket of its key forgotten.
  (void)entries_->put(key, std::move(value), weight);
}

asio::awaitable<void> memory_ticket_store::erase(ticket_key key) {
  entries_->erase(key);
  co_return;
}

std::size_t memory_ticket_store::size() const {
  return entries_->size();
}

std::size_t memory_ticket_store::bytes() const {
  return entries_->weight();
}

void memory_ticket_store::clear() {
  entries_->clear();
}

} // namespace wandura
