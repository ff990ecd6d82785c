#include "local_ticket_cache.hpp"

#include <iterator>

namespace wandura::detail {

void local_ticket_cache::store(std::string const& key, ticket_identity const& who, cached_ticket const& ticket,
                               std::chrono::system_clock::time_point reuse_until,
                               std::chrono::system_clock::time_point now) {
  if (entries_.size() >= capacity_ && !entries_.contains(key)) {
    drop_expired(now);
    if (entries_.size() >= capacity_) {
      return; // full of live tickets: this one is still in Redis when Redis is up
    }
  }
  entries_.insert_or_assign(key, entry{who, ticket, reuse_until});
}

std::optional<cached_ticket> local_ticket_cache::find(std::string const& key, ticket_identity const& who,
                                                      std::chrono::system_clock::time_point now) const {
  auto const it = entries_.find(key);
  if (it == entries_.end() || it->second.who != who || now >= it->second.reuse_until) {
    return std::nullopt;
  }
  return it->second.ticket;
}

void local_ticket_cache::drop_expired(std::chrono::system_clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now >= it->second.reuse_until ? entries_.erase(it) : std::next(it);
  }
}

} // namespace wandura::detail
