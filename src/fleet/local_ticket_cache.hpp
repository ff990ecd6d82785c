// The ticket cache's local copy: the tickets this process stored or read from Redis, with the same reuse rule as in
// Redis. It answers every lookup while Redis is away (the fallback), and, for copies kept while the cache's erase
// notifications were subscribed, lookups with Redis up too (the near cache). Entries are found by the ticket's
// identity itself (a cheap hash of its fields, no SHA-256, no Redis key built) and keep the fleet ticket store's
// payload decoded, so that a near hit is a lookup and a copy. Not public API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

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
/// wrote (`encode_ticket_payload`), that payload decoded once, so that serving it parses nothing.
struct local_ticket {
  cached_ticket cached;
  std::optional<stored_ticket> decoded; ///< nothing for a payload of another format (served as bytes only)
};

/// `cached` with its payload decoded when it is a ticket store's.
[[nodiscard]] local_ticket with_decoded(cached_ticket cached);

class local_ticket_cache {
public:
  explicit local_ticket_cache(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `value` for `who` until `reuse_until`, under the id of its Redis key `key` (`ticket_key_id_of`: what
  /// erase notifications name, and the store's write ends under), as a
  /// near copy of subscription `generation` (0: a fallback copy only), and with a non-zero `unwritten` token as a
  /// copy of this process's own store whose write to Redis has not ended yet (`written`): served near whatever its
  /// generation, as Redis would serve it once written. A later store for `who`, or for `key`, replaces it. When full,
  /// tickets past their reuse limit at `now` make room; if none is, the ticket with the least reuse time left goes (of
  /// several with as little, the earliest stored), or this one is not kept if it has less than all.
  void store(ticket_key_id key, ticket_identity who, local_ticket value,
             std::chrono::system_clock::time_point reuse_until, std::chrono::system_clock::time_point now,
             std::uint64_t generation = 0, std::uint64_t unwritten = 0);
  /// The write of the store with token `unwritten` of the ticket kept under `key` has ended (written, fallen back
  /// or dropped): if the copy kept is still that store's, it is served near only under its generation from now on.
  /// A copy of a later store of the key keeps its own mark.
  void written(ticket_key_id key, std::uint64_t unwritten);
  /// Drops the ticket kept under the Redis key `key`, if any.
  void erase(ticket_key_id key);
  /// Drops the ticket kept for exactly `who`, if any.
  void erase(ticket_identity_view who);
  /// The ticket stored for exactly `who` if `now` is before its reuse limit. Valid until the next store or erase.
  [[nodiscard]] local_ticket const* find(ticket_identity_view who, std::chrono::system_clock::time_point now) const;
  /// As `find`, and only a copy kept under `generation` (never one of generation 0), or an unwritten one.
  [[nodiscard]] local_ticket const* find_near(ticket_identity_view who, std::chrono::system_clock::time_point now,
                                              std::uint64_t generation) const;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

private:
  /// The map's key: an identity with its hash, computed once (a lookup walking a bucket compares hashes first and
  /// never hashes a stored identity again). The hash comes first: it shares the node's first cache line with the
  /// bucket chain's link, so that a walk past another entry touches one line of it, not two.
  struct hashed_identity {
    std::size_t hash = 0;
    ticket_identity who;
  };
  /// A lookup's key: the caller's strings, not copied.
  struct hashed_view {
    ticket_identity_view who;
    std::size_t hash = 0;
  };
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(hashed_identity const& k) const noexcept { return k.hash; }
    std::size_t operator()(hashed_view const& k) const noexcept { return k.hash; }
  };
  struct key_equal {
    using is_transparent = void;
    template <class A, class B> bool operator()(A const& a, B const& b) const noexcept {
      return a.hash == b.hash && ticket_identity_view(a.who) == ticket_identity_view(b.who);
    }
  };
  using expiry_index = std::multimap<std::chrono::system_clock::time_point, hashed_identity const*>;
  struct entry {
    ticket_key_id key = 0; ///< its Redis key's id (`by_key_`)
    local_ticket value;
    expiry_index::iterator expiry; ///< this entry's place in `by_expiry_` (its key is the reuse limit)
    std::uint64_t generation = 0;  ///< the subscription it was kept under; 0 when none was live
    std::uint64_t unwritten = 0;   ///< this process's own store's token while its write has not ended; 0 after
  };
  using entry_map = std::unordered_map<hashed_identity, entry, key_hash, key_equal>;

  [[nodiscard]] entry const* live_entry(ticket_identity_view who, std::chrono::system_clock::time_point now) const;
  void drop(entry_map::const_iterator it);
  void drop(hashed_identity const* who) { drop(entries_.find(*who)); }
  /// Drops the tickets past their reuse limit at `now`, soonest first: one look at the earliest when none is.
  void drop_expired(std::chrono::system_clock::time_point now);

  std::size_t capacity_;
  entry_map entries_; ///< node-based: the identities and keys the indexes point to stay where they are
  struct no_identity {
    static constexpr hashed_identity const* empty() noexcept { return nullptr; }
  };
  /// Redis key's id -> entry, for erases heard and writes ended. Two keys sharing an id (64 of the key's 128 bits)
  /// would only make one drop the other's copy, which costs a Redis lookup, never a wrong ticket.
  id_table<hashed_identity const*, no_identity> by_key_;
  expiry_index by_expiry_; ///< every entry by its reuse limit: a full cache finds what to drop without a scan
};

} // namespace wandura::detail
