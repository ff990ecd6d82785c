#include "known_keys.hpp"

#include <algorithm>
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

void known_keys::begin(std::uint64_t generation) {
  keys_.clear();
  generation_ = generation;
  state_ = capacity_ == 0 ? state::off : state::syncing;
}

void known_keys::lose() noexcept {
  keys_.clear();
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
  keys_.clear();
  state_ = state::lost_track;
}

void known_keys::add(ticket_key_id id, clock::time_point until) {
  if ((state_ != state::syncing && state_ != state::complete) || until == expiry_traits::empty()) {
    return; // an expiry of `empty` is long past: the same as not holding the key
  }
  if (auto* const held = keys_.find(id)) {
    *held = std::max(*held, until); // a longer-lived store replaced it, or a resync read it again
    return;
  }
  if (keys_.size() >= capacity_) {
    drop_expired(clock::now());
    // Room for an eighth more at least, or give up: a replica that sweeps at every key would cost more than the
    // round trips it saves.
    if (keys_.size() >= capacity_ - capacity_ / 8) {
      ++overflows_;
      lose_track();
      return;
    }
  }
  keys_.insert(id, until);
}

void known_keys::remove(ticket_key_id id) noexcept {
  keys_.erase(id);
}

bool known_keys::absent(ticket_key_id id, clock::time_point now) const noexcept {
  if (state_ != state::complete) {
    return false;
  }
  auto const* const held = keys_.find(id);
  return held == nullptr || *held <= now;
}

void known_keys::drop_expired(clock::time_point now) {
  keys_.retain([now](clock::time_point until) { return until > now; });
}

} // namespace wandura::detail
