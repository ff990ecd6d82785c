// The ticket cache's local copy: the tickets this process stored or read from Redis, under the same keys and the
// same reuse rule as in Redis. It answers every lookup while Redis is away (the fallback), and, for copies kept
// while the cache's erase notifications were subscribed, lookups with Redis up too (the near cache). Not public API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace wandura::detail {

class local_ticket_cache {
public:
  explicit local_ticket_cache(std::size_t capacity) : capacity_(capacity) {}

  /// Keeps `ticket` for `who` under `key` until `reuse_until` (a later store for the key replaces it), as a near
  /// copy of subscription `generation` (0: a fallback copy only). When full, tickets past their reuse limit at
  /// `now` make room; if none is, the ticket with the least reuse time left, this one included, is not kept.
  void store(std::string const& key, ticket_identity const& who, cached_ticket const& ticket,
             std::chrono::system_clock::time_point reuse_until, std::chrono::system_clock::time_point now,
             std::uint64_t generation = 0);
  void erase(std::string const& key);
  /// The ticket under `key` if it was stored for exactly `who` and `now` is before its reuse limit.
  [[nodiscard]] std::optional<cached_ticket> find(std::string const& key, ticket_identity const& who,
                                                  std::chrono::system_clock::time_point now) const;
  /// As `find`, and only a copy kept under `generation` (never one of generation 0).
  [[nodiscard]] std::optional<cached_ticket> find_near(std::string const& key, ticket_identity const& who,
                                                       std::chrono::system_clock::time_point now,
                                                       std::uint64_t generation) const;

private:
  using expiry_index = std::multimap<std::chrono::system_clock::time_point, std::string>;
  struct entry {
    ticket_identity who;
    cached_ticket ticket;
    expiry_index::iterator expiry; ///< this entry's place in `by_expiry_` (its key is the reuse limit)
    std::uint64_t generation = 0;  ///< the subscription it was kept under; 0 when none was live
  };
  [[nodiscard]] entry const* live_entry(std::string const& key, ticket_identity const& who,
                                        std::chrono::system_clock::time_point now) const;
  /// Drops the tickets past their reuse limit at `now`, soonest first: one look at the earliest when none is.
  void drop_expired(std::chrono::system_clock::time_point now);

  std::size_t capacity_;
  std::unordered_map<std::string, entry> entries_;
  expiry_index by_expiry_; ///< every entry by its reuse limit: a full cache finds what to drop without a scan
};

} // namespace wandura::detail
