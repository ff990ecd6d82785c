#include "local_ticket_cache.hpp"

#include <functional>
#include <utility>

namespace wandura::detail {

std::size_t ticket_identity_hash::operator()(ticket_identity_view who) const noexcept {
  std::hash<std::string_view> const text;
  std::size_t seed = text(who.union_info); // the device tells most identities apart
  auto mix = [&seed](std::size_t h) { seed ^= h + 0x9e3779b97f4a7c15ULL + (seed << 6U) + (seed >> 2U); };
  mix(text(who.viewer_ref));
  mix(text(who.film_ref));
  mix(std::hash<int>{}(who.episode_no));
  mix(text(who.intent));
  return seed;
}

local_ticket with_decoded(cached_ticket cached) {
  auto decoded = decode_ticket_payload(cached.payload);
  return {std::move(cached), std::move(decoded)};
}

void local_ticket_cache::store(ticket_key_id key, ticket_identity who, local_ticket value,
                               std::chrono::system_clock::time_point reuse_until,
                               std::chrono::system_clock::time_point now, std::uint64_t generation,
                               std::uint64_t unwritten) {
  // A later store replaces: the same identity, or (a key collision) another identity under the same key.
  auto const hash = ticket_identity_hash{}(who);
  if (auto const same = entries_.find(hashed_view{who, hash}); same != entries_.end()) {
    if (same->second.key == key) { // stored again (read again, or a newer ticket): replaced in place
      auto const expiry = by_expiry_.emplace_hint(by_expiry_.end(), reuse_until, &same->first);
      by_expiry_.erase(same->second.expiry);
      same->second.expiry = expiry;
      same->second.value = std::move(value);
      same->second.generation = generation;
      same->second.unwritten = unwritten;
      return;
    }
    drop(same);
  }
  if (auto const* const same_key = by_key_.find(key)) {
    drop(*same_key);
  }
  if (entries_.size() >= capacity_) {
    drop_expired(now);
  }
  if (entries_.size() >= capacity_) {
    // Full of live tickets: the one with the least reuse time left goes, the earliest stored of those with as little
    // (tickets issued in one second share their expiry: a full cache keeps the newest), unless this one has less
    // (it is still in Redis when Redis is up).
    if (capacity_ == 0 || reuse_until < by_expiry_.begin()->first) {
      return;
    }
    drop(by_expiry_.begin()->second);
  }
  auto const [it, inserted] = entries_.try_emplace(hashed_identity{hash, std::move(who)},
                                                   entry{key, std::move(value), {}, generation, unwritten});
  hashed_identity const* const id = &it->first;
  try {
    // Hinted at the end, where a ticket issued now nearly always goes (reuse limits grow with time): one step
    // instead of a walk down the tree; among equal limits it goes last either way.
    it->second.expiry = by_expiry_.emplace_hint(by_expiry_.end(), reuse_until, id);
    try {
      by_key_.insert(it->second.key, id);
    } catch (...) {
      by_expiry_.erase(it->second.expiry);
      throw;
    }
  } catch (...) {
    entries_.erase(it);
    throw;
  }
}

void local_ticket_cache::drop(entry_map::const_iterator it) {
  by_key_.erase(it->second.key);
  by_expiry_.erase(it->second.expiry);
  entries_.erase(it);
}

void local_ticket_cache::written(ticket_key_id key, std::uint64_t unwritten) {
  if (auto const* const found = by_key_.find(key)) {
    auto& e = entries_.find(**found)->second;
    if (e.unwritten == unwritten) {
      e.unwritten = 0;
    }
  }
}

void local_ticket_cache::erase(ticket_key_id key) {
  if (auto const* const found = by_key_.find(key)) {
    drop(*found);
  }
}

void local_ticket_cache::erase(ticket_identity_view who) {
  if (auto const found = entries_.find(hashed_view{who, ticket_identity_hash{}(who)}); found != entries_.end()) {
    drop(found);
  }
}

local_ticket_cache::entry const* local_ticket_cache::live_entry(ticket_identity_view who,
                                                                std::chrono::system_clock::time_point now) const {
  auto const it = entries_.find(hashed_view{who, ticket_identity_hash{}(who)});
  if (it == entries_.end() || now >= it->second.expiry->first) {
    return nullptr;
  }
  return &it->second;
}

local_ticket const* local_ticket_cache::find(ticket_identity_view who,
                                             std::chrono::system_clock::time_point now) const {
  auto const* e = live_entry(who, now);
  return e != nullptr ? &e->value : nullptr;
}

local_ticket const* local_ticket_cache::find_near(ticket_identity_view who, std::chrono::system_clock::time_point now,
                                                  std::uint64_t generation) const {
  auto const* e = live_entry(who, now);
  return e != nullptr && ((generation != 0 && e->generation == generation) || e->unwritten != 0) ? &e->value : nullptr;
}

void local_ticket_cache::drop_expired(std::chrono::system_clock::time_point now) {
  while (!by_expiry_.empty() && now >= by_expiry_.begin()->first) {
    drop(by_expiry_.begin()->second);
  }
}

} // namespace wandura::detail
