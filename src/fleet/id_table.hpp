// A hash table from 64-bit ids (the first 8 bytes of a ticket key's hash) to small values: open addressing with
// linear probing over one array of slots, for the fleet's indexes that hold many ids and are mostly asked about ids
// they lack (the replica of keys) or are changed at every store (the local copy's index by key). Not public API.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace wandura::detail {

/// `Traits::empty()` is the value that marks a slot as holding nothing: never stored (`insert` refuses it).
/// Not thread-safe.
template <class Value, class Traits> class id_table {
public:
  /// An id's slot is found in one cache line or the next, with no node to follow; erasing shifts the slots after it
  /// back, so no tombstones build up; the table doubles when three quarters full, from 64 slots.
  id_table()
      : seed_(mix(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                  reinterpret_cast<std::uintptr_t>(this))) {}

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// The value held for `id`, or nothing. Valid until the next insert, erase, retain or clear.
  [[nodiscard]] Value* find(std::uint64_t id) noexcept {
    if (slots_.empty()) {
      return nullptr;
    }
    auto& s = slots_[find_slot(id)];
    return s.value == Traits::empty() ? nullptr : &s.value;
  }
  [[nodiscard]] Value const* find(std::uint64_t id) const noexcept { return const_cast<id_table*>(this)->find(id); }

  /// Holds `value` for `id`, which it does not hold yet. @pre `value` is not `Traits::empty()` and `find(id)` is
  /// nothing. @throws std::bad_alloc when the table cannot grow (then it is unchanged).
  void insert(std::uint64_t id, Value value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) {
      rebuild(slots_.empty() ? first_slots : 2 * slots_.size(), [](Value const&) { return true; });
    }
    slots_[find_slot(id)] = slot{id, value};
    ++size_;
  }

  /// Drops `id` if held.
  void erase(std::uint64_t id) noexcept {
    if (slots_.empty()) {
      return;
    }
    std::size_t const mask = slots_.size() - 1;
    std::size_t hole = find_slot(id);
    if (slots_[hole].value == Traits::empty()) {
      return;
    }
    for (std::size_t j = (hole + 1) & mask; slots_[j].value != Traits::empty(); j = (j + 1) & mask) {
      // The id at j may move back into the hole unless its probe starts after the hole, up to j (cyclically).
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

  /// Keeps only the ids whose value `keep` accepts, in a table of the same size. @throws std::bad_alloc (unchanged).
  template <class Keep> void retain(Keep keep) { rebuild(slots_.size(), keep); }

  /// Drops every id and the table's memory.
  void clear() noexcept {
    slots_ = {};
    size_ = 0;
    shift_ = 64;
  }

private:
  struct slot {
    std::uint64_t id = 0;
    Value value = Traits::empty();
  };
  static constexpr std::size_t first_slots = 64;

  /// MurmurHash3's 64-bit finalizer: every bit of the result depends on every bit of `x`.
  static constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x ^= x >> 33U;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33U;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33U;
    return x;
  }

  /// Where a probe for `id` starts: the id mixed with this table's seed (ids are hashes of keys that users partly
  /// choose: without the seed, ids ground to share bits could make every probe walk one long run).
  [[nodiscard]] std::size_t home(std::uint64_t id) const noexcept {
    return static_cast<std::size_t>(mix(id ^ seed_) >> shift_);
  }

  /// The slot holding `id`, or the empty slot where it would go. @pre the table has slots (and, at most three
  /// quarters held, always an empty one ahead).
  [[nodiscard]] std::size_t find_slot(std::uint64_t id) const noexcept {
    std::size_t const mask = slots_.size() - 1;
    std::size_t i = home(id);
    while (slots_[i].value != Traits::empty() && slots_[i].id != id) {
      i = (i + 1) & mask;
    }
    return i;
  }

  template <class Keep> void rebuild(std::size_t slots, Keep const& keep) {
    std::vector<slot> old(slots, slot{}); // may throw: nothing changed yet
    old.swap(slots_);
    size_ = 0;
    shift_ = slots == 0 ? 64 : 64 - static_cast<unsigned>(std::countr_zero(slots));
    for (auto const& s : old) {
      if (s.value != Traits::empty() && keep(s.value)) {
        slots_[find_slot(s.id)] = s;
        ++size_;
      }
    }
  }

  std::vector<slot> slots_; ///< 0 or a power of two slots, at most three quarters held
  std::size_t size_ = 0;    ///< slots held
  unsigned shift_ = 64;     ///< 64 - log2(slots): `home` keeps the mixed id's high bits
  std::uint64_t seed_;      ///< mixed into every id (`home`); set once, from the clock and the address
};

} // namespace wandura::detail
