#include "local_ticket_cache.hpp"

#include <algorithm>
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
  auto const decoded = read_ticket_payload(cached.payload);
  return {std::move(cached), decoded};
}

namespace {

/// Room for `n` elements in `v`, growing it geometrically (a `reserve(size() + 1)` per push would copy it each time).
template <class T> void reserve_for(std::vector<T>& v, std::size_t n) {
  if (v.capacity() < n) {
    v.reserve(std::max(n, 2 * v.capacity()));
  }
}

} // namespace

local_ticket_cache::local_ticket_cache(std::size_t capacity, hasher hash, std::size_t max_bytes)
    : capacity_(std::min<std::size_t>(capacity, no_slot::empty() - 1)), hash_(hash), max_bytes_(max_bytes) {}

std::size_t local_ticket_cache::entry_bytes(ticket_identity_view who, local_ticket const& value) noexcept {
  return sizeof(entry) + sizeof(expiry) + 2 * sizeof(slot_index) + who.viewer_ref.size() + who.union_info.size() +
         who.film_ref.size() + who.intent.size() + value.cached.payload.size();
}

void local_ticket_cache::packed_identity::assign(ticket_identity_view who) {
  text.clear(); // its capacity kept: a reused slot's identity usually fits where the last one was
  text.reserve(who.viewer_ref.size() + who.union_info.size() + who.film_ref.size() + who.intent.size());
  text.append(who.viewer_ref).append(who.union_info).append(who.film_ref).append(who.intent);
  viewer_size = static_cast<std::uint32_t>(who.viewer_ref.size());
  device_size = static_cast<std::uint32_t>(who.union_info.size());
  film_size = static_cast<std::uint32_t>(who.film_ref.size());
  episode_no = who.episode_no;
}

bool local_ticket_cache::packed_identity::operator==(ticket_identity_view who) const noexcept {
  if (episode_no != who.episode_no || viewer_size != who.viewer_ref.size() || device_size != who.union_info.size() ||
      film_size != who.film_ref.size() ||
      text.size() != std::size_t{viewer_size} + device_size + film_size + who.intent.size()) {
    return false;
  }
  // The device first: it tells most identities apart.
  std::string_view const all = text;
  return all.substr(viewer_size, device_size) == who.union_info && all.substr(0, viewer_size) == who.viewer_ref &&
         all.substr(std::size_t{viewer_size} + device_size, film_size) == who.film_ref &&
         all.substr(std::size_t{viewer_size} + device_size + film_size) == who.intent;
}

void local_ticket_cache::store(ticket_key_id key, ticket_identity_view who, local_ticket value,
                               std::chrono::system_clock::time_point reuse_until,
                               std::chrono::system_clock::time_point now, std::uint64_t generation,
                               std::uint64_t unwritten) {
  // A later store replaces: the same identity (or one of the same hash), or another identity under the same key.
  auto const hash = hash_(who);
  auto const weight = entry_bytes(who, value);
  if (auto const* const same = by_identity_.find(hash)) {
    auto& e = entries_[*same];
    // Stored again (read again, or a newer ticket) and within the bytes: replaced in place. A larger one that does
    // not fit is stored as a new one, below, where room is made.
    if (e.key == key && e.who == who && bytes_ - e.bytes + weight <= max_bytes_) {
      bytes_ = bytes_ - e.bytes + weight;
      e.bytes = weight;
      e.reuse_until = reuse_until;
      e.generation = generation;
      e.unwritten = unwritten;
      e.value = std::move(value);
      auto const at = heap_at_[*same];
      bool const later = heap_[at].reuse_until <= reuse_until; // and a later order: never earlier in the heap
      heap_[at] = expiry{reuse_until, ++stores_, *same};
      if (later) {
        heap_sift_down(at);
      } else {
        heap_sift_up(at);
      }
      return;
    }
    drop(*same);
  }
  if (auto const* const same_key = by_key_.find(key)) {
    drop(*same_key);
  }
  if (weight > max_bytes_) {
    return; // never fits: not kept
  }
  if (size() >= capacity_ || bytes_ + weight > max_bytes_) {
    drop_expired(now);
  }
  while (bytes_ + weight > max_bytes_) { // some are kept (this one fits alone): the same order as below
    if (reuse_until < heap_.front().reuse_until) {
      return;
    }
    drop(heap_.front().slot);
  }
  if (size() >= capacity_) {
    // Full of live tickets: the one with the least reuse time left goes, the earliest stored of those with as little
    // (tickets issued in one second share their expiry: a full cache keeps the newest), unless this one has less
    // (it is still in Redis when Redis is up).
    if (capacity_ == 0 || reuse_until < heap_.front().reuse_until) {
      return;
    }
    drop(heap_.front().slot);
  }
  // Everything that may allocate first, nothing changed until it has: a slot, room in the heap, the identity's
  // buffer, both indexes. `free_` keeps room for every slot, so that dropping one cannot fail.
  if (free_.empty()) {
    reserve_for(free_, entries_.size() + 1);
    reserve_for(heap_at_, entries_.size() + 1);
    entries_.emplace_back();
    heap_at_.push_back(0);
    free_.push_back(static_cast<slot_index>(entries_.size() - 1));
  }
  reserve_for(heap_, heap_.size() + 1);
  slot_index const at = free_.back();
  auto& e = entries_[at];
  e.who.assign(who);
  by_identity_.insert(hash, at);
  try {
    by_key_.insert(key, at);
  } catch (...) {
    by_identity_.erase(hash);
    throw;
  }
  free_.pop_back();
  e.hash = hash;
  e.reuse_until = reuse_until;
  e.generation = generation;
  e.unwritten = unwritten;
  e.key = key;
  e.value = std::move(value);
  e.bytes = weight;
  bytes_ += weight;
  heap_.push_back(expiry{reuse_until, ++stores_, at});
  heap_at_[at] = static_cast<slot_index>(heap_.size() - 1);
  heap_sift_up(heap_.size() - 1); // one comparison: a ticket issued now nearly always goes last
}

void local_ticket_cache::drop(slot_index at) noexcept {
  auto& e = entries_[at];
  by_identity_.erase(e.hash);
  by_key_.erase(e.key);
  heap_erase(heap_at_[at]);
  bytes_ -= e.bytes;
  e.bytes = 0;
  e.value = {};        // the ticket's memory now; the identity's buffer stays for the slot's next use
  free_.push_back(at); // cannot throw: `free_` has room for every slot
}

void local_ticket_cache::written(ticket_key_id key, std::uint64_t unwritten) noexcept {
  if (auto const* const found = by_key_.find(key)) {
    auto& e = entries_[*found];
    if (e.unwritten == unwritten) {
      e.unwritten = 0;
    }
  }
}

void local_ticket_cache::erase(ticket_key_id key) noexcept {
  if (auto const* const found = by_key_.find(key)) {
    drop(*found);
  }
}

void local_ticket_cache::erase(ticket_identity_view who) noexcept {
  if (auto const* const found = by_identity_.find(hash_(who)); found != nullptr && entries_[*found].who == who) {
    drop(*found);
  }
}

local_ticket_cache::entry const* local_ticket_cache::live_entry(ticket_identity_view who,
                                                                std::chrono::system_clock::time_point now) const {
  auto const* const found = by_identity_.find(hash_(who));
  if (found == nullptr) {
    return nullptr;
  }
  auto const& e = entries_[*found];
  return now < e.reuse_until && e.who == who ? &e : nullptr;
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

void local_ticket_cache::drop_expired(std::chrono::system_clock::time_point now) noexcept {
  while (!heap_.empty() && now >= heap_.front().reuse_until) {
    drop(heap_.front().slot);
  }
}

void local_ticket_cache::heap_place(std::size_t at, expiry e) noexcept {
  heap_at_[e.slot] = static_cast<slot_index>(at);
  heap_[at] = e;
}

void local_ticket_cache::heap_sift_up(std::size_t at) noexcept {
  expiry const moving = heap_[at];
  while (at > 0) {
    std::size_t const parent = (at - 1) / 2;
    if (!(moving < heap_[parent])) {
      break;
    }
    heap_place(at, heap_[parent]);
    at = parent;
  }
  heap_place(at, moving);
}

void local_ticket_cache::heap_sift_down(std::size_t at) noexcept {
  expiry const moving = heap_[at];
  std::size_t const n = heap_.size();
  for (;;) {
    std::size_t child = 2 * at + 1;
    if (child >= n) {
      break;
    }
    if (child + 1 < n && heap_[child + 1] < heap_[child]) {
      ++child;
    }
    if (!(heap_[child] < moving)) {
      break;
    }
    heap_place(at, heap_[child]);
    at = child;
  }
  heap_place(at, moving);
}

void local_ticket_cache::heap_erase(std::size_t at) noexcept {
  std::size_t const last = heap_.size() - 1;
  if (at != last) {
    expiry const moved = heap_[last];
    bool const up = moved < heap_[at];
    heap_place(at, moved);
    heap_.pop_back();
    if (up) {
      heap_sift_up(at);
    } else {
      heap_sift_down(at);
    }
  } else {
    heap_.pop_back();
  }
}

} // namespace wandura::detail
