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
#include <string>
#include <string_view>

#include "id_table.hpp"
#include "wandura/fleet/key_layout.hpp"

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
/// A ticket key with its id.
struct ticket_key_and_id {
  std::string key;
  ticket_key_id id = 0;
};
/// `fleet_keys::ticket(org, who)` and its id (`ticket_key_id_of` of that key) from one hash, without reading the
/// key's hex back. @pre `org` passed `fleet_keys::check_org`.
[[nodiscard]] ticket_key_and_id ticket_key_with_id(std::string_view org, ticket_identity const& who);

/// The replica. Not thread-safe: the ticket cache holds it under its local mutex.
class known_keys {
public:
  using clock = std::chrono::steady_clock;

  /// @param capacity the most keys held; 0 turns the replica off (never complete). A new key that finds it full
  ///        drops the expired keys first; unless that frees more than an eighth of it, the replica empties and stays
  ///        incomplete until the next resync (`begin`), so that its memory stays bounded (and a replica that is
  ///        nearly full of live keys does not sweep at every key). The table holds 16 bytes a slot and doubles when
  ///        three quarters full (`id_table`): 21 to 43 bytes a key as it grows, at most 16 x 2^ceil(log2(4/3 x
  ///        capacity)) bytes (8 MiB for 250,000).
  explicit known_keys(std::size_t capacity) : capacity_(capacity) {}

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
  [[nodiscard]] std::size_t size() const noexcept { return keys_.size(); }
  /// Times the replica overflowed its capacity.
  [[nodiscard]] std::uint64_t overflows() const noexcept { return overflows_; }

private:
  enum class state {
    off,        ///< no subscription live: nothing taken
    syncing,    ///< live, the resync of `generation_` not ended
    complete,   ///< live and resynced: absence is known
    lost_track, ///< live, but a store may have been missed since the resync (overflow, malformed message)
  };
  /// Drops the keys past their expiry at `now`.
  void drop_expired(clock::time_point now);

  /// An expiry of `time_point::min()` marks an empty slot: a key that expired that long ago is not held anyway.
  struct expiry_traits {
    static constexpr clock::time_point empty() noexcept { return clock::time_point::min(); }
  };

  std::size_t capacity_;
  id_table<clock::time_point, expiry_traits> keys_; ///< each key's expiry
  state state_ = state::off;
  std::uint64_t generation_ = 0;
  std::uint64_t overflows_ = 0;
};

} // namespace wandura::detail
