#include "local_ticket_cache.hpp"

namespace wandura::detail {

void local_ticket_cache::store(std::string const& key, ticket_identity const& who, cached_ticket const& ticket,
                               std::chrono::system_clock::time_point reuse_until,
                               std::chrono::system_clock::time_point now) {
  auto const found = entries_.find(key);
  if (found != entries_.end()) { // a later store for the key replaces it
    by_expiry_.erase(found->second.expiry);
    found->second = entry{who, ticket, by_expiry_.emplace(reuse_until, key)};
    return;
  }
  if (entries_.size() >= capacity_) {
    drop_expired(now);
    if (entries_.size() >= capacity_) {
      return; // full of live tickets: this one is still in Redis when Redis is up
    }
  }
  auto const expiry = by_expiry_.emplace(reuse_until, key);
  try {
    entries_.emplace(key, entry{who, ticket, expiry});
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

std::optional<cached_ticket> local_ticket_cache::find(std::string const& key, ticket_identity const& who,
                                                      std::chrono::system_clock::time_point now) const {
  auto const it = entries_.find(key);
  if (it == entries_.end() || it->second.who != who || now >= it->second.expiry->first) {
    return std::nullopt;
  }
  return it->second.ticket;
}

void local_ticket_cache::drop_expired(std::chrono::system_clock::time_point now) {
  while (!by_expiry_.empty() && now >= by_expiry_.begin()->first) {
    entries_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

} // namespace wandura::detail
