#include "known_keys.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace wandura::detail {

std::optional<ticket_key_id> ticket_key_id_of(std::string_view key, std::string_view prefix) noexcept {
  constexpr std::size_t hex_digits = 32;
  if (key.size() != prefix.size() + hex_digits || !key.starts_with(prefix)) {
    return std::nullopt;
  }
  ticket_key_id id = 0;
  std::size_t i = 0;
  for (char const c : key.substr(prefix.size())) {
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a') + 10U;
    } else {
      return std::nullopt;
    }
    if (i++ < 16) { // the first 8 bytes
      id = (id << 4U) | digit;
    }
  }
  return id;
}

namespace {

/// MurmurHash3's 64-bit finalizer: every bit of the result depends on every bit of `x`.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 33U;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33U;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33U;
  return x;
}

constexpr std::size_t first_slots = 64;

} // namespace

known_keys::known_keys(std::size_t capacity)
    : capacity_(capacity), seed_(mix64(static_cast<std::uint64_t>(clock::now().time_since_epoch().count()) ^
                                       static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(this)))) {}

std::size_t known_keys::home(ticket_key_id id) const noexcept {
  return static_cast<std::size_t>(mix64(id ^ seed_) >> shift_);
}

std::size_t known_keys::find_slot(ticket_key_id id) const noexcept {
  std::size_t const mask = slots_.size() - 1;
  std::size_t i = home(id);
  // Ends: at most three quarters of the slots are held, so an empty one is always ahead.
  while (slots_[i].until != empty && slots_[i].id != id) {
    i = (i + 1) & mask;
  }
  return i;
}

void known_keys::erase_slot(std::size_t i) noexcept {
  std::size_t const mask = slots_.size() - 1;
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; slots_[j].until != empty; j = (j + 1) & mask) {
    // The key at j may move back into the hole unless its home lies after the hole, up to j (cyclically): then the
    // hole is before where a probe for it starts, and it stays.
    std::size_t const h = home(slots_[j].id);
    bool const stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (!stays) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = slot{};
  --size_;
}

void known_keys::rebuild(std::size_t slots, clock::time_point now) {
  std::vector<slot> old(slots, slot{});
  old.swap(slots_);
  size_ = 0;
  shift_ = slots == 0 ? 64 : 64 - static_cast<unsigned>(std::countr_zero(slots));
  if (slots == 0) {
    return;
  }
  for (auto const& s : old) {
    if (s.until != empty && (now == empty || s.until > now)) {
      slots_[find_slot(s.id)] = s;
      ++size_;
    }
  }
}

void known_keys::clear() noexcept {
  slots_ = {};
  size_ = 0;
  shift_ = 64;
}

void known_keys::begin(std::uint64_t generation) {
  clear();
  generation_ = generation;
  state_ = capacity_ == 0 ? state::off : state::syncing;
}

void known_keys::lose() noexcept {
  clear();
  state_ = state::off;
}

bool known_keys::resynced(std::uint64_t generation) noexcept {
  if (state_ != state::syncing || generation != generation_) {
    return false;
  }
  state_ = state::complete;
  return true;
}

void known_keys::lose_track() noexcept {
  if (state_ == state::off) {
    return;
  }
  clear();
  state_ = state::lost_track;
}

void known_keys::add(ticket_key_id id, clock::time_point until) {
  if ((state_ != state::syncing && state_ != state::complete) || until == empty) {
    return; // an expiry of `empty` is long past: the same as not holding the key
  }
  if (!slots_.empty()) {
    if (auto& s = slots_[find_slot(id)]; s.until != empty) {
      s.until = std::max(s.until, until); // a longer-lived store replaced it, or a resync read it again
      return;
    }
  }
  if (size_ >= capacity_) {
    drop_expired(clock::now());
    // Room for an eighth more at least, or give up: a replica that sweeps at every key would cost more than the
    // round trips it saves.
    if (size_ >= capacity_ - capacity_ / 8) {
      ++overflows_;
      lose_track();
      return;
    }
  }
  if ((size_ + 1) * 4 > slots_.size() * 3) {
    rebuild(slots_.empty() ? first_slots : 2 * slots_.size(), empty);
  }
  slots_[find_slot(id)] = slot{id, until};
  ++size_;
}

void known_keys::remove(ticket_key_id id) noexcept {
  if (slots_.empty()) {
    return;
  }
  if (auto const i = find_slot(id); slots_[i].until != empty) {
    erase_slot(i);
  }
}

bool known_keys::absent(ticket_key_id id, clock::time_point now) const noexcept {
  if (state_ != state::complete) {
    return false;
  }
  if (slots_.empty()) {
    return true;
  }
  auto const& s = slots_[find_slot(id)];
  return s.until == empty || s.until <= now;
}

void known_keys::drop_expired(clock::time_point now) {
  rebuild(slots_.size(), now);
}

} // namespace wandura::detail
