// Which ticket keys exist in Redis, as far as this process has heard: the fleet's key-presence replica, with which
// a lookup that the near cache cannot answer knows the ticket is absent without asking Redis. Not public API.
//
// What keeps it: every store script publishes the keys it stored, with their PX, on the erase channel; every erase
// publishes its key there; when the subscription to that channel (re)starts, a resync reads every ticket key of the
// organisation and its PTTL (`SCAN` pages) while the messages keep coming. The replica is *complete* once the
// resync of the live subscription has ended with nothing lost: then a key it lacks is absent in Redis, except for a
// store whose message is still on its way (one network delay: a lookup then misses a ticket another process just
// stored, the same race as asking a moment earlier) and keys written by anything but the store script (never
// announced: answered absent until a resync reads them). Every error goes the safe way: a key wrongly held costs
// one `MGET` (which reads it as nil and drops it), and a key wrongly lacked can only cost a reuse, never serve a
// ticket to anyone else (a ticket served is always read from Redis or the near cache, with its identity checked).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace wandura::detail {

/// A ticket key's id: the first 8 bytes of its hex hash, as a number. Equal keys have equal ids; different keys
/// almost never do (a collision makes a key look present: one `MGET` more).
using ticket_key_id = std::uint64_t;

/// The id of the ticket key `key` if it is a ticket key of the organisation whose ticket keys begin with `prefix`
/// (`wandura:{org}:ticket:`) followed by 32 lowercase hex digits; nothing otherwise.
[[nodiscard]] std::optional<ticket_key_id> ticket_key_id_of(std::string_view key, std::string_view prefix) noexcept;
/// The id of the ticket key of the identity with these fields (`fleet_keys::ticket`'s hash), without building the
/// key.
[[nodiscard]] ticket_key_id ticket_key_id_for(std::string_view viewer_ref, std::string_view union_info,
                                              std::string_view film_ref, int episode_no, std::string_view intent);

/// The replica. Not thread-safe: the ticket cache holds it under its local mutex.
class known_keys {
public:
  using clock = std::chrono::steady_clock;

  /// @param capacity the most keys held; 0 turns the replica off (never complete). A new key that finds it full
  ///        drops the expired keys first; unless that frees more than an eighth of it, the replica empties and stays
  ///        incomplete until the next resync (`begin`), so that its memory stays bounded (and a replica that is
  ///        nearly full of live keys does not sweep at every key). The table holds 16 bytes a slot and doubles when
  ///        three quarters full: 21 to 43 bytes a key held, at most 16 x 2^ceil(log2(4/3 x capacity)) bytes.
  explicit known_keys(std::size_t capacity);

  /// A new subscription is live: everything held is dropped (stores may have been missed) and keys are taken
  /// again, from its messages and the resync of `generation`. Incomplete until `resynced(generation)`.
  void begin(std::uint64_t generation);
  /// The subscription was lost (or ended for good): everything is dropped, nothing is taken until `begin`.
  void lose() noexcept;
  /// The resync of `generation` read every key: complete, if `generation` is still the one begun and nothing was
  /// lost since (an overflow, a malformed message). False when it was not.
  bool resynced(std::uint64_t generation) noexcept;
  /// A message could not be read (something else publishes on the channel): a store may have been missed, so the
  /// replica is incomplete until the resync that `resync_wanted` asks for.
  void lose_track() noexcept;

  /// `id` exists until `until` (its PX from when it was heard; later than Redis's own expiry by the message's
  /// delay, never earlier). Ignored unless a subscription is live; overflows as the constructor says.
  void add(ticket_key_id id, clock::time_point until);
  /// `id` was erased, or read as nil.
  void remove(ticket_key_id id) noexcept;

  /// True only when the replica is complete and holds no live `id` at `now`: the key is absent from Redis.
  [[nodiscard]] bool absent(ticket_key_id id, clock::time_point now) const noexcept;
  [[nodiscard]] bool complete() const noexcept { return state_ == state::complete; }
  /// Incomplete, with a subscription live, after something lost track (an overflow, a malformed message): the next
  /// resync is due, which `begin(generation())` starts.
  [[nodiscard]] bool resync_wanted() const noexcept { return state_ == state::lost_track; }
  /// A subscription is live and the resync of `generation()` has not ended.
  [[nodiscard]] bool syncing() const noexcept { return state_ == state::syncing; }
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Times the replica overflowed its capacity.
  [[nodiscard]] std::uint64_t overflows() const noexcept { return overflows_; }

private:
  enum class state {
    off,        ///< no subscription live: nothing taken
    syncing,    ///< live, the resync of `generation_` not ended
    complete,   ///< live and resynced: absence is known
    lost_track, ///< live, but a store may have been missed since the resync (overflow, malformed message)
  };
  /// An open-addressing table with linear probing: a key's slot is found in one cache line or the next, without a
  /// node to follow (the replica holds hundreds of thousands of keys; an absent key is the common lookup). A slot
  /// whose `until` is `empty` holds nothing; erasing shifts the slots after it back, so no tombstones build up.
  static constexpr clock::time_point empty = clock::time_point::min();
  struct slot {
    ticket_key_id id = 0;
    clock::time_point until = empty;
  };

  /// The slot where `id` is, or the empty slot where it would go. @pre the table has a slot.
  [[nodiscard]] std::size_t find_slot(ticket_key_id id) const noexcept;
  /// Where a probe for `id` starts: the id mixed with this replica's seed (ids come from hashes of keys users can
  /// choose: without the seed, keys picked to share their low bits could make every probe walk a long run).
  [[nodiscard]] std::size_t home(ticket_key_id id) const noexcept;
  /// Empties slot `i` and moves back each later slot of its run that may now sit closer to its home.
  void erase_slot(std::size_t i) noexcept;
  /// Rebuilds the table with `slots` slots (a power of two, 0 for none), keeping the keys live at `now` (all of them
  /// when `now` is `empty`).
  void rebuild(std::size_t slots, clock::time_point now);
  /// Drops the keys past their expiry at `now`.
  void drop_expired(clock::time_point now);
  /// Drops every key and the table's memory.
  void clear() noexcept;

  std::size_t capacity_;
  std::vector<slot> slots_; ///< 0 or a power of two slots, at most three quarters held
  std::size_t size_ = 0;    ///< slots held
  unsigned shift_ = 64;     ///< 64 - log2(slots): `home` keeps the mixed id's high bits
  std::uint64_t seed_;      ///< mixed into every id (`home`); set once, from the clock and the address
  state state_ = state::off;
  std::uint64_t generation_ = 0;
  std::uint64_t overflows_ = 0;
};

} // namespace wandura::detail
