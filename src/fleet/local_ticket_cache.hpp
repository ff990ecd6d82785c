// The ticket cache's local copy: the tickets this process stored or read from Redis, with the same reuse rule as in
// Redis. It answers every lookup while Redis is away (the fallback), and, for copies kept while the cache's erase
// notifications were subscribed, lookups with Redis up too (the near cache). Entries are found by the ticket's
// identity itself (a cheap hash of its fields, no SHA-256, no Redis key built) and keep the fleet ticket store's
// payload with its fields located, so that a near hit is a lookup and a copy. Not public API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "id_table.hpp"
#include "known_keys.hpp"
#include "ticket_envelope.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace wandura::detail {

/// Who a ticket is for, by reference: a lookup key made from the caller's strings without copying them.
struct ticket_identity_view {
  std::string_view viewer_ref;
  std::string_view union_info;
  std::string_view film_ref;
  int episode_no = 0;
  std::string_view intent;

  ticket_identity_view(std::string_view viewer, std::string_view device, std::string_view film, int episode,
                       std::string_view what) noexcept
      : viewer_ref(viewer), union_info(device), film_ref(film), episode_no(episode), intent(what) {}
  // Implicit: an owned identity is looked up and compared as its view.
  ticket_identity_view(ticket_identity const& who) noexcept // NOLINT(google-explicit-constructor)
      : ticket_identity_view(who.viewer_ref, who.union_info, who.film_ref, who.episode_no, who.intent) {}

  friend bool operator==(ticket_identity_view const&, ticket_identity_view const&) = default;
};

/// A hash of every field of an identity, owned or viewed alike.
struct ticket_identity_hash {
  [[nodiscard]] std::size_t operator()(ticket_identity_view who) const noexcept;
};

/// A ticket as the local copy keeps it: the cache's value and, when its payload is one the fleet's ticket store
/// wrote (`encode_ticket_payload`), where that payload's fields lie, read once: serving it parses nothing, and the
/// copy owns one buffer (the payload), not one per field.
struct local_ticket {
  cached_ticket cached;
  std::optional<ticket_payload_fields> decoded; ///< nothing for a payload of another format (served as bytes only)

  /// The ticket, copied out of the payload. @pre `decoded`.
  [[nodiscard]] wandura::ticket ticket() const { return decoded->ticket(cached.payload); }
  /// The id of the process that stored it. @pre `decoded`.
  [[nodiscard]] std::string_view process_id() const noexcept { return decoded->process_id.in(cached.payload); }
};

/// `cached` with its payload decoded when it is a ticket store's.
[[nodiscard]] local_ticket with_decoded(cached_ticket cached);

/// The local copy: at most `capacity` tickets in one array of entries, found through two `id_table`s (by the hash of
/// the identity, by the id of the Redis key) and ordered for eviction by a binary heap of reuse limits. A lookup
/// follows no node; a store reuses a freed slot and the buffer its identity was kept in, so that once the cache has
/// been full it allocates only for an identity longer than the slot's last. Not thread-safe.
class local_ticket_cache {
public:
  /// How an identity is hashed: `ticket_identity_hash` unless a test makes identities collide.
  using hasher = std::size_t (*)(ticket_identity_view) noexcept;

  /// `capacity` above 2^32 - 2 tickets is taken as that many. `max_bytes`: the most bytes the tickets kept may take
  /// (`entry_bytes` each), whichever of the two bounds binds first.
  explicit local_ticket_cache(std::size_t capacity, hasher hash = &hash_of, std::size_t max_bytes = SIZE_MAX);

  /// `ticket_identity_hash`: the hasher of every cache but a test's.
  static std::size_t hash_of(ticket_identity_view who) noexcept { return ticket_identity_hash{}(who); }

  /// What one ticket kept costs, as `max_bytes` counts it: its payload, its identity and the slot around them.
  [[nodiscard]] static std::size_t entry_bytes(ticket_identity_view who, local_ticket const& value) noexcept;

  /// Keeps `value` for `who` until `reuse_until`, under the id of its Redis key `key` (`ticket_key_id_of`: what
  /// erase notifications name, and the store's write ends under), as a near copy of subscription `generation` (0: a
  /// fallback copy only), and with a non-zero `unwritten` token as a copy of this process's own store whose write to
  /// Redis has not ended yet (`written`): served near whatever its generation, as Redis would serve it once written.
  /// A later store for `who`, or for `key`, replaces it; so does one for another identity of the same hash (64 bits:
  /// in practice never; it would cost the replaced identity a Redis lookup, never a wrong ticket). When full (of
  /// tickets or of bytes), tickets past their reuse limit at `now` make room; if none is, the tickets with the least
  /// reuse time left go (of several with as little, the earliest stored), or this one is not kept if it has less
  /// than they. A ticket over `max_bytes` alone is not kept (and still replaces the earlier one, by none).
  /// @throws std::bad_alloc (then `value` is not kept; tickets this store replaced or dropped to make room are gone).
  void store(ticket_key_id key, ticket_identity_view who, local_ticket value,
             std::chrono::system_clock::time_point reuse_until, std::chrono::system_clock::time_point now,
             std::uint64_t generation = 0, std::uint64_t unwritten = 0);
  /// The write of the store with token `unwritten` of the ticket kept under `key` has ended (written, fallen back
  /// or dropped): if the copy kept is still that store's, it is served near only under its generation from now on.
  /// A copy of a later store of the key keeps its own mark.
  void written(ticket_key_id key, std::uint64_t unwritten) noexcept;
  /// Drops the ticket kept under the Redis key `key`, if any.
  void erase(ticket_key_id key) noexcept;
  /// Drops the ticket kept for exactly `who`, if any.
  void erase(ticket_identity_view who) noexcept;
  /// The ticket stored for exactly `who` if `now` is before its reuse limit. Valid until the next store or erase.
  [[nodiscard]] local_ticket const* find(ticket_identity_view who, std::chrono::system_clock::time_point now) const;
  /// As `find`, and only a copy kept under `generation` (never one of generation 0), or an unwritten one.
  [[nodiscard]] local_ticket const* find_near(ticket_identity_view who, std::chrono::system_clock::time_point now,
                                              std::uint64_t generation) const;
  [[nodiscard]] std::size_t size() const noexcept { return by_identity_.size(); }
  /// What the tickets kept take, as `max_bytes` counts it.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
  using slot_index = std::uint32_t;
  struct no_slot {
    static constexpr slot_index empty() noexcept { return ~slot_index{0}; }
  };

  /// An identity in one buffer (its four texts one after the other) with the lengths that split it: compared with
  /// a lookup's strings in one or two cache lines, and rewritten in place when the slot is reused.
  struct packed_identity {
    std::string text; ///< viewer_ref, union_info, film_ref and intent, in that order
    std::uint32_t viewer_size = 0;
    std::uint32_t device_size = 0;
    std::uint32_t film_size = 0;
    int episode_no = 0;

    void assign(ticket_identity_view who);
    [[nodiscard]] bool operator==(ticket_identity_view who) const noexcept;
  };

  /// A slot of `entries_`: in use while `by_identity_` holds its `hash`, free (on `free_`) otherwise. The fields a
  /// lookup reads come first.
  struct entry {
    std::size_t hash = 0;                              ///< the identity's hash: its id in `by_identity_`
    std::chrono::system_clock::time_point reuse_until; ///< served until then
    std::uint64_t generation = 0;                      ///< the subscription it was kept under; 0 when none was live
    std::uint64_t unwritten = 0; ///< this process's own store's token while its write has not ended; 0 after
    ticket_key_id key = 0;       ///< its Redis key's id: its id in `by_key_`
    packed_identity who;
    local_ticket value;
    std::size_t bytes = 0; ///< `entry_bytes` of what it holds, while in use
  };

  /// An element of the eviction heap: the entry's reuse limit and store order, copied here so that the heap is
  /// ordered without reading the entries.
  struct expiry {
    std::chrono::system_clock::time_point reuse_until;
    std::uint64_t order = 0; ///< when the entry was (last) stored: of equal limits, the lowest goes first
    slot_index slot = 0;

    [[nodiscard]] bool operator<(expiry const& other) const noexcept {
      return reuse_until < other.reuse_until || (reuse_until == other.reuse_until && order < other.order);
    }
  };

  [[nodiscard]] entry const* live_entry(ticket_identity_view who, std::chrono::system_clock::time_point now) const;
  /// Frees slot `at`: out of both indexes and the heap, its ticket released (its identity's buffer kept).
  void drop(slot_index at) noexcept;
  /// Drops the tickets past their reuse limit at `now`, soonest first: one look at the earliest when none is.
  void drop_expired(std::chrono::system_clock::time_point now) noexcept;

  // The eviction heap (a binary min-heap on `expiry`), with each slot's place in it kept in `heap_at_`.
  void heap_place(std::size_t at, expiry e) noexcept;
  void heap_sift_up(std::size_t at) noexcept;
  void heap_sift_down(std::size_t at) noexcept;
  void heap_erase(std::size_t at) noexcept;

  std::size_t capacity_;
  hasher hash_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;                     ///< of the entries in use
  std::vector<entry> entries_;                ///< slots, in use or free; never more than `capacity_`
  std::vector<slot_index> free_;              ///< the free slots of `entries_`
  std::vector<expiry> heap_;                  ///< every entry in use, soonest reuse limit first
  std::vector<slot_index> heap_at_;           ///< slot -> its place in `heap_` (while in use)
  std::uint64_t stores_ = 0;                  ///< stores so far: `expiry::order`
  id_table<slot_index, no_slot> by_identity_; ///< identity hash -> slot
  /// Redis key's id -> slot, for erases heard and writes ended. Two keys sharing an id (64 of the key's 128 bits)
  /// would only make one drop the other's copy, which costs a Redis lookup, never a wrong ticket.
  id_table<slot_index, no_slot> by_key_;
};

} // namespace wandura::detail
