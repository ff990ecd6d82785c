// The ticket cache's local copy (src/fleet/local_ticket_cache.hpp): same identity rule, bounded, near copies by
// subscription generation, found by identity, dropped by Redis key, the ticket store's payload kept decoded.
#include "fleet/local_ticket_cache.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

namespace {
wandura::ticket_identity viewer_on(std::string device) {
  return {"viewer:ref", std::move(device), "film", 4, "play"};
}
auto const t0 = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'590'400'000));
wandura::detail::local_ticket kept(std::string payload, std::chrono::system_clock::time_point expires_at) {
  return {{std::move(payload), expires_at}, std::nullopt};
}
/// The id of a Redis key named `name` in these tests.
wandura::detail::ticket_key_id key(std::string_view name) {
  return std::hash<std::string_view>{}(name);
}
} // namespace

TEST_CASE("local ticket cache: found only for the identity it was stored for, until its reuse limit") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0);
  CHECK(cache.find(viewer_on("device-7"), t0)->cached.payload == "tkt_7");
  CHECK_FALSE(cache.find(viewer_on("device-8"), t0)); // another device: never served
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0 + 25min));
  cache.erase(key("k7"));
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
}

TEST_CASE("local ticket cache: erased by identity, that identity's ticket goes and nothing else") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 1);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 1);
  cache.erase(viewer_on("device-9")); // nothing kept for it
  CHECK(cache.size() == 2);
  cache.erase(viewer_on("device-7"));
  CHECK(cache.size() == 1);
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
  CHECK(cache.find_near(viewer_on("device-8"), t0, 1)->cached.payload == "tkt_8");
  // Its key and its place by expiry went with it: the key names another identity's ticket now, and a full cache
  // still makes room by expiry.
  cache.store(key("k7"), viewer_on("device-9"), kept("tkt_9", t0 + 30min), t0 + 25min, t0);
  CHECK(cache.find(viewer_on("device-9"), t0)->cached.payload == "tkt_9");
  cache.erase(key("k7"));
  CHECK(cache.size() == 1);
}

TEST_CASE(
    "local ticket cache: when full, expired tickets make room, then the live one with the least reuse time left") {
  wandura::detail::local_ticket_cache cache(2);
  auto const now = t0;
  cache.store(key("old"), viewer_on("a"), kept("tkt_old", now), now - 1ms, now); // already past its reuse limit
  cache.store(key("live"), viewer_on("b"), kept("tkt_live", now + 30min), now + 25min, now);
  cache.store(key("new"), viewer_on("c"), kept("tkt_new", now + 30min), now + 25min, now);
  CHECK(cache.find(viewer_on("c"), now));
  cache.store(key("less"), viewer_on("d"), kept("tkt_less", now + 29min), now + 24min, now); // full, less time left
  CHECK_FALSE(cache.find(viewer_on("d"), now));
  CHECK(cache.find(viewer_on("b"), now));
  CHECK(cache.find(viewer_on("c"), now));
  cache.store(key("live"), viewer_on("b"), kept("tkt_live2", now + 40min), now + 35min, now); // replacing needs no room
  CHECK(cache.find(viewer_on("b"), now)->cached.payload == "tkt_live2");
  CHECK(cache.find(viewer_on("c"), now));
}

TEST_CASE("local ticket cache: of a full cache's tickets with as little reuse time left, the earliest stored goes") {
  wandura::detail::local_ticket_cache cache(2);
  auto const now = t0;
  // Issued in one second: one expiry.
  cache.store(key("b"), viewer_on("b"), kept("tkt_b", now + 30min), now + 25min, now);
  cache.store(key("c"), viewer_on("c"), kept("tkt_c", now + 30min), now + 25min, now);
  cache.store(key("d"), viewer_on("d"), kept("tkt_d", now + 30min), now + 25min, now);
  CHECK_FALSE(cache.find(viewer_on("b"), now));
  CHECK(cache.find(viewer_on("c"), now));
  CHECK(cache.find(viewer_on("d"), now));
  cache.store(key("c"), viewer_on("c"), kept("tkt_c2", now + 30min), now + 25min, now); // stored again: now the newest
  cache.store(key("e"), viewer_on("e"), kept("tkt_e", now + 30min), now + 25min, now);
  CHECK_FALSE(cache.find(viewer_on("d"), now));
  CHECK(cache.find(viewer_on("c"), now)->cached.payload == "tkt_c2");
  CHECK(cache.find(viewer_on("e"), now));
  CHECK(cache.size() == 2);
}

TEST_CASE("local ticket cache: a full cache drops exactly its expired tickets, soonest first, erase included") {
  wandura::detail::local_ticket_cache cache(3);
  auto const now = t0;
  cache.store(key("a"), viewer_on("a"), kept("tkt_a", now + 30min), now + 10min, now);
  cache.store(key("b"), viewer_on("b"), kept("tkt_b", now + 30min), now + 5min, now);
  cache.store(key("c"), viewer_on("c"), kept("tkt_c", now + 30min), now + 20min, now);
  cache.erase(key("c")); // its place in the expiry order goes with it
  cache.store(key("d"), viewer_on("d"), kept("tkt_d", now + 30min), now + 20min, now);
  auto const later = now + 6min; // only b is past its limit
  cache.store(key("e"), viewer_on("e"), kept("tkt_e", now + 30min), now + 20min, later);
  CHECK(cache.find(viewer_on("e"), later));
  CHECK(cache.find(viewer_on("a"), later));
  CHECK(cache.find(viewer_on("d"), later));
  CHECK_FALSE(cache.find(viewer_on("b"), now)); // dropped, not merely past its limit
  cache.store(key("f"), viewer_on("f"), kept("tkt_f", now + 30min), now + 20min, later); // full of live ones: a goes
  CHECK(cache.find(viewer_on("f"), later));
  CHECK_FALSE(cache.find(viewer_on("a"), later));
  CHECK(cache.find(viewer_on("d"), later));
  CHECK(cache.find(viewer_on("e"), later));
  cache.store(key("g"), viewer_on("g"), kept("tkt_g", now + 30min), now + 15min,
              later); // less time left than all: not kept
  CHECK_FALSE(cache.find(viewer_on("g"), later));
}

TEST_CASE("local ticket cache: a near copy is found only under the generation it was kept in, never generation 0") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 3);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0); // a fallback copy only
  CHECK(cache.find_near(viewer_on("device-7"), t0, 3)->cached.payload == "tkt_7");
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0, 4));         // the subscription changed since
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 3));         // never another device
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0 + 25min, 3)); // past its reuse limit
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 0));
  CHECK(cache.find(viewer_on("device-8"), t0));                                                // still the fallback
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 4); // read again: near now
  CHECK(cache.find_near(viewer_on("device-8"), t0, 4));
}

TEST_CASE("local ticket cache: an unwritten copy is near under any generation until its write ends, then only "
          "under its own") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 0, 11);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 3, 12);
  CHECK(cache.find_near(viewer_on("device-7"), t0, 0)->cached.payload == "tkt_7"); // no subscription at all
  CHECK(cache.find_near(viewer_on("device-7"), t0, 5));
  CHECK_FALSE(cache.find_near(viewer_on("device-9"), t0, 0));         // never another device
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0 + 25min, 0)); // nor past its reuse limit
  cache.written(key("k7"), 99); // another store's write: k7's copy is not that store's
  CHECK(cache.find_near(viewer_on("device-7"), t0, 0));
  cache.written(key("k7"), 11);
  cache.written(key("k8"), 12);
  cache.written(key("k9"), 13); // nothing kept under it: nothing happens
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0, 0));
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0, 5));
  CHECK(cache.find(viewer_on("device-7"), t0)); // still the fallback's
  CHECK(cache.find_near(viewer_on("device-8"), t0, 3));
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 4));
  // Stored again: as the new store says. A newer store's copy keeps its mark when an older write ends.
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 0, 14);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8b", t0 + 30min), t0 + 25min, t0, 0, 15);
  cache.written(key("k8"), 14);
  CHECK(cache.find_near(viewer_on("device-8"), t0, 4)->cached.payload == "tkt_8b");
  cache.written(key("k8"), 15);
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 4));
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 4);
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 5));
  CHECK(cache.find_near(viewer_on("device-8"), t0, 4));
}

TEST_CASE("local ticket cache: every field of the identity tells a ticket apart, whether looked up owned or viewed") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 1);
  std::string const viewer = "viewer:ref";
  std::string const device = "device-7";
  std::string const film = "film";
  using view = wandura::detail::ticket_identity_view;
  CHECK(cache.find_near(view(viewer, device, film, 4, "play"), t0, 1)->cached.payload == "tkt_7");
  CHECK_FALSE(cache.find(view("viewer:other", device, film, 4, "play"), t0));
  CHECK_FALSE(cache.find(view(viewer, "device-70", film, 4, "play"), t0));
  CHECK_FALSE(cache.find(view(viewer, device, "film-2", 4, "play"), t0));
  CHECK_FALSE(cache.find(view(viewer, device, film, 5, "play"), t0));
  CHECK_FALSE(cache.find(view(viewer, device, film, 4, "prefetch"), t0));
  // Fields are not concatenated: moving a character from one field to the next is another identity.
  CHECK_FALSE(cache.find(view("viewer:re", "fdevice-7", film, 4, "play"), t0));
}

TEST_CASE("local ticket cache: an erase names the Redis key, and drops the copy kept under it and no other") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 1);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 1);
  cache.erase(key("k9")); // nothing under it
  CHECK(cache.size() == 2);
  cache.erase(key("k7"));
  CHECK_FALSE(cache.find_near(viewer_on("device-7"), t0, 1));
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
  CHECK(cache.find_near(viewer_on("device-8"), t0, 1));
  CHECK(cache.size() == 1);
  // Stored again after the erase: found again, and the new copy is dropped by the next erase too.
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7b", t0 + 30min), t0 + 25min, t0, 1);
  CHECK(cache.find_near(viewer_on("device-7"), t0, 1)->cached.payload == "tkt_7b");
  cache.erase(key("k7"));
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
}

TEST_CASE("local ticket cache: a store under a key another identity holds replaces that identity's copy") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 1);
  cache.store(key("k7"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 1);
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
  CHECK(cache.find(viewer_on("device-8"), t0)->cached.payload == "tkt_8");
  CHECK(cache.size() == 1);
  cache.erase(key("k7"));
  CHECK_FALSE(cache.find(viewer_on("device-8"), t0));
  CHECK(cache.size() == 0);
}

TEST_CASE("local ticket cache: a ticket store's payload is kept decoded, any other payload as bytes only") {
  wandura::ticket t;
  t.ticket_id = "tkt_7f3a";
  t.manifest_url = "https://cdn.example/m/7f3a.mpd";
  t.expires_at = t0 + 30min;
  t.expires_at_text = "2025-12-01T12:30:00Z";
  t.drm_payload = std::string("k\0ey", 4);
  auto const ours = wandura::detail::with_decoded({wandura::detail::encode_ticket_payload("host-a:12", t), t0 + 30min});
  REQUIRE(ours.decoded);
  CHECK(ours.process_id() == "host-a:12");
  CHECK(ours.ticket() == t);
  CHECK(ours.cached.payload == wandura::detail::encode_ticket_payload("host-a:12", t));
  // Kept in a cache (the payload's bytes moved into it), the fields still read from the bytes as they are now.
  wandura::detail::local_ticket_cache cache(4);
  cache.store(key("k7"), viewer_on("device-7"), ours, t0 + 25min, t0, 1);
  auto const* const kept_copy = cache.find(viewer_on("device-7"), t0);
  REQUIRE(kept_copy);
  CHECK(kept_copy->process_id() == "host-a:12");
  CHECK(kept_copy->ticket() == t);
  auto const other = wandura::detail::with_decoded({"{\"ticket_id\":\"tkt_1\"}", t0 + 30min});
  CHECK_FALSE(other.decoded);
  CHECK(other.cached.payload == "{\"ticket_id\":\"tkt_1\"}");
}

namespace {

/// The local copy's documented rules, written plainly over a vector: what `local_ticket_cache` must agree with.
struct reference_cache {
  struct row {
    std::string key;
    wandura::ticket_identity who;
    std::string payload;
    std::chrono::system_clock::time_point reuse_until;
    std::uint64_t generation = 0;
    std::uint64_t stored = 0; ///< when it was (last) stored: of equal reuse limits, the lowest goes first
  };
  std::size_t capacity;
  wandura::detail::local_ticket_cache::hasher hash;
  std::vector<row> rows;
  std::uint64_t clock = 0;

  void drop_if(auto pred) { std::erase_if(rows, pred); }
  void store(std::string const& key, wandura::ticket_identity const& who, std::string const& payload,
             std::chrono::system_clock::time_point reuse_until, std::chrono::system_clock::time_point now,
             std::uint64_t generation) {
    for (auto& r : rows) {
      if (r.who == who && r.key == key) { // stored again: replaced in place, needs no room
        r = {key, who, payload, reuse_until, generation, ++clock};
        return;
      }
    }
    // Another identity of the same hash is replaced too (the cache indexes identities by their hash alone).
    drop_if([&](row const& r) { return hash(r.who) == hash(who) || r.key == key; });
    if (rows.size() >= capacity) {
      drop_if([&](row const& r) { return now >= r.reuse_until; });
    }
    if (rows.size() >= capacity) {
      if (capacity == 0) {
        return;
      }
      auto least = rows.begin();
      for (auto it = rows.begin(); it != rows.end(); ++it) {
        if (it->reuse_until < least->reuse_until ||
            (it->reuse_until == least->reuse_until && it->stored < least->stored)) {
          least = it;
        }
      }
      if (reuse_until < least->reuse_until) {
        return; // less reuse time left than every kept ticket
      }
      rows.erase(least);
    }
    rows.push_back({key, who, payload, reuse_until, generation, ++clock});
  }
  void erase(std::string const& key) {
    drop_if([&](row const& r) { return r.key == key; });
  }
  [[nodiscard]] row const* find(wandura::ticket_identity const& who, std::chrono::system_clock::time_point now) const {
    for (auto const& r : rows) {
      if (r.who == who && now < r.reuse_until) {
        return &r;
      }
    }
    return nullptr;
  }
};

/// A long random run of stores, erases and clock steps over `who`, the cache checked against `reference_cache` after
/// every step. Keys are mostly the identity's own and sometimes one that identities share; reuse limits are drawn
/// from a few instants, so that many are equal and many have passed.
void agree_with_rules(std::size_t capacity, std::vector<wandura::ticket_identity> const& who, int steps,
                      wandura::detail::local_ticket_cache::hasher hash) {
  std::mt19937 random(static_cast<std::uint32_t>(capacity) + 1U); // fixed: a failure replays
  wandura::detail::local_ticket_cache cache(capacity, hash);
  reference_cache model{capacity, hash, {}};
  auto now = t0;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    auto const pick = [&random](std::size_t n) { return static_cast<std::size_t>(random() % n); };
    auto const& id = who[pick(who.size())];
    std::size_t const id_at = static_cast<std::size_t>(&id - who.data());
    std::string const key_name = pick(5) == 0 ? "shared" : "k" + std::to_string(id_at);
    switch (pick(8)) {
    case 0: now += std::chrono::minutes(pick(3)); break;
    case 1:
    case 2: {
      std::string const key_named = pick(3) == 0 ? "shared" : "k" + std::to_string(pick(who.size()));
      cache.erase(key(key_named));
      model.erase(key_named);
      break;
    }
    case 3:
      if (pick(4) == 0) { // by identity, as a fallen-back erase does
        cache.erase(wandura::detail::ticket_identity_view(id));
        model.drop_if([&](reference_cache::row const& r) { return r.who == id; });
        break;
      }
      [[fallthrough]];
    default: {
      auto const reuse_until = now + std::chrono::minutes(static_cast<int>(pick(6)) - 1);
      std::string const payload = "tkt_" + std::to_string(step);
      std::uint64_t const generation = pick(3);
      cache.store(key(key_name), id, kept(payload, reuse_until + 5min), reuse_until, now, generation);
      model.store(key_name, id, payload, reuse_until, now, generation);
      break;
    }
    }
    REQUIRE(cache.size() == model.rows.size());
    for (auto const& w : who) {
      auto const* const mine = cache.find(w, now);
      auto const* const ref = model.find(w, now);
      REQUIRE((mine != nullptr) == (ref != nullptr));
      if (ref != nullptr) {
        REQUIRE(mine->cached.payload == ref->payload);
        for (std::uint64_t g : {0U, 1U, 2U}) {
          REQUIRE((cache.find_near(w, now, g) != nullptr) == (g != 0 && ref->generation == g));
        }
      } else {
        REQUIRE_FALSE(cache.find_near(w, now, 1));
      }
    }
  }
}

std::size_t real_hash(wandura::detail::ticket_identity_view who) noexcept {
  return wandura::detail::ticket_identity_hash{}(who);
}

} // namespace

TEST_CASE("local ticket cache: long random runs of stores, erases and key collisions agree with its rules") {
  // Identities that differ in one field, or only where one field ends and the next begins.
  std::vector<wandura::ticket_identity> const few = {
      {"ab", "c", "film", 1, "play"}, {"a", "bc", "film", 1, "play"}, {"v", "d", "film", 1, "play"},
      {"v", "d", "film", 11, "play"}, {"v", "d", "film1", 1, "play"}, {"v", "d", "film", 1, "playdownload"},
      {"v", "dfilm", "", 1, "play"},  {"v", "d", "film", -1, "play"},
  };
  for (std::size_t capacity : {0U, 1U, 2U, 3U, 5U}) {
    CAPTURE(capacity);
    agree_with_rules(capacity, few, 4000, &real_hash);
  }
  // Enough tickets for the eviction heap to be several levels deep, and for slots to be freed and reused in any
  // order.
  std::vector<wandura::ticket_identity> many;
  for (int i = 0; i < 48; ++i) {
    many.push_back({"viewer-" + std::to_string(i % 7), "device-" + std::to_string(i), "film", i % 3, "play"});
  }
  for (std::size_t capacity : {17U, 40U}) {
    CAPTURE(capacity);
    agree_with_rules(capacity, many, 3000, &real_hash);
  }
}

TEST_CASE("local ticket cache: identities of one hash replace each other and are never served for each other") {
  auto const one_hash = [](wandura::detail::ticket_identity_view) noexcept -> std::size_t { return 42; };
  wandura::detail::local_ticket_cache cache(10, one_hash);
  cache.store(key("k7"), viewer_on("device-7"), kept("tkt_7", t0 + 30min), t0 + 25min, t0, 1);
  CHECK(cache.find(viewer_on("device-7"), t0)->cached.payload == "tkt_7");
  CHECK_FALSE(cache.find(viewer_on("device-8"), t0));
  CHECK_FALSE(cache.find_near(viewer_on("device-8"), t0, 1));
  cache.erase(wandura::detail::ticket_identity_view(viewer_on("device-8"))); // nothing kept for it
  CHECK(cache.size() == 1);
  cache.store(key("k8"), viewer_on("device-8"), kept("tkt_8", t0 + 30min), t0 + 25min, t0, 1);
  CHECK(cache.size() == 1);
  CHECK_FALSE(cache.find(viewer_on("device-7"), t0));
  CHECK(cache.find_near(viewer_on("device-8"), t0, 1)->cached.payload == "tkt_8");
  cache.erase(key("k7")); // went with device-7's copy
  CHECK(cache.find(viewer_on("device-8"), t0));
  // A long run where hashes collide often (a handful of values for 48 identities) agrees with the rules as well.
  std::vector<wandura::ticket_identity> many;
  for (int i = 0; i < 48; ++i) {
    many.push_back({"viewer-" + std::to_string(i % 7), "device-" + std::to_string(i), "film", i % 3, "play"});
  }
  auto const few_hashes = [](wandura::detail::ticket_identity_view who) noexcept -> std::size_t {
    return static_cast<unsigned char>(who.union_info.back()) % 5U;
  };
  agree_with_rules(12, many, 3000, few_hashes);
}

TEST_CASE("local ticket cache: max_bytes bounds what its tickets take, in the order entries are evicted") {
  using wandura::detail::local_ticket_cache;
  auto const payload = [](std::size_t n) { return std::string(n, 'p'); };
  std::size_t const one = local_ticket_cache::entry_bytes(viewer_on("device-0"), kept(payload(10'000), t0));
  local_ticket_cache cache(100, &local_ticket_cache::hash_of, 3 * one); // room for three such tickets
  // Stored with reuse limits 21-25 min: the earliest limits go first when room is made.
  for (int i = 0; i < 5; ++i) {
    auto const device = "device-" + std::to_string(i);
    cache.store(key(device), viewer_on(device), kept(payload(10'000), t0 + 30min), t0 + 21min + i * 1min, t0);
    CHECK(cache.bytes() <= 3 * one);
  }
  CHECK(cache.size() == 3);
  CHECK(cache.bytes() == 3 * one);
  CHECK_FALSE(cache.find(viewer_on("device-0"), t0));
  CHECK_FALSE(cache.find(viewer_on("device-1"), t0));
  CHECK(cache.find(viewer_on("device-4"), t0));
  // A ticket with less reuse time left than all those kept is not kept, when room would have to be made for it.
  cache.store(key("device-9"), viewer_on("device-9"), kept(payload(10'000), t0 + 30min), t0 + 1min, t0);
  CHECK_FALSE(cache.find(viewer_on("device-9"), t0));
  CHECK(cache.size() == 3);
  // A larger ticket for a kept identity makes room for itself; a smaller one gives bytes back in place.
  cache.store(key("device-4"), viewer_on("device-4"), kept(payload(15'000), t0 + 30min), t0 + 26min, t0);
  CHECK(cache.bytes() <= 3 * one);
  CHECK(cache.find(viewer_on("device-4"), t0)->cached.payload.size() == 15'000);
  CHECK(cache.size() == 2);
  auto const before = cache.bytes();
  cache.store(key("device-4"), viewer_on("device-4"), kept(payload(100), t0 + 30min), t0 + 26min, t0);
  CHECK(cache.bytes() == before - 14'900);
  // One over max_bytes alone is not kept, and replaces its identity's ticket by none.
  cache.store(key("device-4"), viewer_on("device-4"), kept(payload(4 * one), t0 + 30min), t0 + 26min, t0);
  CHECK_FALSE(cache.find(viewer_on("device-4"), t0));
  CHECK(cache.size() == 1);
  cache.erase(key("device-3"));
  CHECK(cache.size() == 0);
  CHECK(cache.bytes() == 0);
}
