#include "local_ticket_cache.hpp"

namespace wandura::detail {

void local_ticket_cache::store(std::string const& key, ticket_identity const& who, cached_ticket const& ticket,
                               std::chrono::system_clock::time_point reuse_until,
                               std::chrono::system_clock::time_point now, std::uint64_t generation) {
  auto const found = entries_.find(key);
  if (found != entries_.end()) { // a later store for the key replaces it
    by_expiry_.erase(found->second.expiry);
    found->second = entry{who, ticket, by_expiry_.emplace(reuse_until, key), generation};
    return;
  }
  if (entries_.size() >= capacity_) {
    drop_expired(now);
  }
  if (entries_.size() >= capacity_) {
    // Full of live tickets: the one with the least reuse time left goes, unless it is this one (it is still in
    // Redis when Redis is up).
    if (capacity_ == 0 || reuse_until <= by_expiry_.begin()->first) {
      return;
    }
    entries_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  auto const expiry = by_expiry_.emplace(reuse_until, key);
  try {
    entries_.emplace(key, entry{who, ticket, expiry, generation});
  } catch (...) {
    by_expiry_.erase(expiry);
    throw;
  }
}

void local_ticket_cache::erase(std::string const& key) {
  if (auto const found = entries_.find(key); found != entries_.end()) {
    by_expiry_.erase(found->second.expiry);
    entries_.erase(found);
  }
}

local_ticket_cache::entry const* local_ticket_cache::live_entry(std::string const& key, ticket_identity const& who,
                                                                std::chrono::system_clock::time_point now) const {
  auto const it = entries_.find(key);
  if (it == entries_.end() || it->second.who != who || now >= it->second.expiry->first) {
    return nullptr;
  }
  return &it->second;
}

std::optional<cached_ticket> local_ticket_cache::find(std::string const& key, ticket_identity const& who,
                                                      std::chrono::system_clock::time_point now) const {
  auto const* e = live_entry(key, who, now);
  return e != nullptr ? std::optional(e->ticket) : std::nullopt;
}

std::optional<cached_ticket> local_ticket_cache::find_near(std::string const& key, ticket_identity const& who,
                                                           std::chrono::system_clock::time_point now,
                                                           std::uint64_t generation) const {
  auto const* e = live_entry(key, who, now);
  return e != nullptr && generation != 0 && e->generation == generation ? std::optional(e->ticket) : std::nullopt;
}

void local_ticket_cache::drop_expired(std::chrono::system_clock::time_point now) {
  while (!by_expiry_.empty() && now >= by_expiry_.begin()->first) {
    entries_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

} // namespace wandura::detail
