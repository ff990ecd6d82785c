// The key-presence replica (src/fleet/known_keys.hpp): a ticket key's id read from its text or computed from its
// identity, and the replica's states (off, syncing, complete, lost track), its expiries, its removals and its bounded
// size (expired keys make room, else it overflows and asks for a resync).
#include "fleet/known_keys.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <catch2/catch.hpp>

#include "wandura/fleet/key_layout.hpp"

using namespace std::chrono_literals;

namespace {
using wandura::detail::known_keys;
using wandura::detail::ticket_key_id;
using wandura::detail::ticket_key_id_for;
using wandura::detail::ticket_key_id_of;

constexpr std::string_view prefix = "wandura:{o}:ticket:";
// A fixed instant: nothing below depends on the real time except the overflow tests, which say so.
auto const t0 = known_keys::clock::time_point(1000h);

std::string key_with(std::string_view hex) {
  return std::string(prefix) + std::string(hex);
}

/// The id `fleet_keys::ticket` names for `who` in organisation `org`, read back from the key's text.
std::optional<ticket_key_id> id_of_key(std::string_view org, wandura::ticket_identity const& who) {
  return ticket_key_id_of(wandura::fleet_keys::ticket(org, who), "wandura:{" + std::string(org) + "}:ticket:");
}

ticket_key_id id_for(wandura::ticket_identity const& who) {
  return ticket_key_id_for(who.viewer_ref, who.union_info, who.film_ref, who.episode_no, who.intent);
}

/// A replica of `capacity` keys, resynced and complete.
known_keys complete_replica(std::size_t capacity) {
  known_keys keys(capacity);
  keys.begin(1);
  REQUIRE(keys.resynced(1));
  return keys;
}
} // namespace

TEST_CASE("known keys: a ticket key's id is the number its first 16 hex digits spell") {
  CHECK(ticket_key_id_of(key_with("0123456789abcdeffedcba9876543210"), prefix) == ticket_key_id{0x0123456789abcdef});
  CHECK(ticket_key_id_of(key_with("fedcba98765432100123456789abcdef"), prefix) == ticket_key_id{0xfedcba9876543210});
  CHECK(ticket_key_id_of(key_with("00000000000000000000000000000000"), prefix) == ticket_key_id{0});
  CHECK(ticket_key_id_of(key_with("ffffffffffffffffffffffffffffffff"), prefix) ==
        std::numeric_limits<ticket_key_id>::max());
  // The second half is checked but not counted: keys differing only there share an id.
  CHECK(ticket_key_id_of(key_with("0123456789abcdef0000000000000000"), prefix) == ticket_key_id{0x0123456789abcdef});
  CHECK(ticket_key_id_of(key_with("0123456789abcdefaaaaaaaaaaaaaaaa"), prefix) == ticket_key_id{0x0123456789abcdef});
  // Any prefix works, the organisation's own.
  CHECK(ticket_key_id_of("wandura:{org_demo}:ticket:00000000000000010123456789abcdef", "wandura:{org_demo}:ticket:") ==
        ticket_key_id{1});
}

TEST_CASE("known keys: anything but the prefix and 32 lowercase hex digits is not a ticket key") {
  auto const hex = std::string("0123456789abcdeffedcba9876543210");
  REQUIRE(ticket_key_id_of(key_with(hex), prefix)); // the well-formed key the rejections below alter
  // Wrong prefix: another organisation of the same length, another kind, no prefix at all.
  CHECK_FALSE(ticket_key_id_of("wandura:{p}:ticket:" + hex, prefix));
  CHECK_FALSE(ticket_key_id_of("wandura:{o}:viewer:" + hex, prefix));
  CHECK_FALSE(ticket_key_id_of("wandura:{o}:tickets" + hex, prefix));
  CHECK_FALSE(ticket_key_id_of(hex, prefix));
  CHECK_FALSE(ticket_key_id_of("x" + key_with(hex.substr(1)), prefix));
  // 31 or 33 digits.
  CHECK_FALSE(ticket_key_id_of(key_with(hex.substr(0, 31)), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with(hex + "0"), prefix));
  // Uppercase hex, in either half.
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789ABCDEFfedcba9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789abcdefFEDCBA9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("A123456789abcdeffedcba9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789abcdeffedcba987654321F"), prefix));
  // A non-hex character in the first or the second half.
  CHECK_FALSE(ticket_key_id_of(key_with("0123456g89abcdeffedcba9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("g123456789abcdeffedcba9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789abcdeffedcba98765432z0"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789abcdef:edcba9876543210"), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with("0123456789abcdeffedcba987654321 "), prefix));
  CHECK_FALSE(ticket_key_id_of(key_with(std::string(31, '0') + '\0'), prefix));
  // Empty, or the prefix alone.
  CHECK_FALSE(ticket_key_id_of("", prefix));
  CHECK_FALSE(ticket_key_id_of(prefix, prefix));
}

TEST_CASE("known keys: the id computed from an identity, alone or with its key, is the id of the key fleet_keys names "
          "for it") {
  std::vector<wandura::ticket_identity> const identities{
      {"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "device-7", "the-heiress-returns", 4, "play"},
      {"viewer:ref", "device-8", "film", 0, "prefetch"},
      {"viewer:ref", "device-8", "film", -1, "play"},
      {"viewer:ref", "device-8", "film", std::numeric_limits<int>::min(), "play"},
      {"viewer:ref", "device-8", "film", std::numeric_limits<int>::max(), "play"},
      {"viewer:ref", "device-8", "", 1, ""},
      {std::string(1000, 'v'), std::string(513, 'd'), std::string(4096, 'f'), 123456, std::string(300, 'i')},
      {std::string("v\0iewer", 7), "d:e:v", "f\xc3\xa9lm", 7, "play"}, // a NUL, a colon, UTF-8
  };
  for (auto const& who : identities) {
    for (std::string_view const org : {"o", "org_demo", "A.b-c_9"}) {
      INFO("viewer_ref " << who.viewer_ref.substr(0, 40) << ", episode " << who.episode_no << ", org " << org);
      auto const from_key = id_of_key(org, who);
      REQUIRE(from_key);
      CHECK(id_for(who) == *from_key);
      auto const [key, id] = wandura::detail::ticket_key_with_id(org, who); // the key and its id from one hash
      CHECK(key == wandura::fleet_keys::ticket(org, who));
      CHECK(id == *from_key);
    }
  }
}

TEST_CASE("known keys: the id computed from an identity changes with each of its fields") {
  wandura::ticket_identity const base{"viewer:ref", "device-7", "film", 4, "play"};
  auto const base_id = id_for(base);
  CHECK(id_for(base) == base_id); // the same identity, the same id

  auto other = base;
  other.viewer_ref = "viewer:reg";
  CHECK(id_for(other) != base_id);
  other = base;
  other.union_info = "device-8";
  CHECK(id_for(other) != base_id);
  other = base;
  other.film_ref = "film2";
  CHECK(id_for(other) != base_id);
  other = base;
  other.film_ref = "";
  CHECK(id_for(other) != base_id);
  other = base;
  other.episode_no = 5;
  CHECK(id_for(other) != base_id);
  other = base;
  other.episode_no = -4;
  CHECK(id_for(other) != base_id);
  other = base;
  other.intent = "prefetch";
  CHECK(id_for(other) != base_id);
  other = base;
  other.intent = "";
  CHECK(id_for(other) != base_id);
  // The fields are length-prefixed: a character moved from one field to the next makes another identity.
  CHECK(ticket_key_id_for("viewer:ref", "device-7", "film", 4, "play") !=
        ticket_key_id_for("viewer:re", "fdevice-7", "film", 4, "play"));
  CHECK(ticket_key_id_for("viewer:ref", "device-7", "film", 4, "play") !=
        ticket_key_id_for("viewer:ref", "device-7f", "ilm", 4, "play"));
}

TEST_CASE("known keys: a new replica is off, incomplete and knows nothing absent") {
  known_keys const keys(16);
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.resync_wanted());
  CHECK(keys.size() == 0);
  CHECK(keys.overflows() == 0);
  CHECK_FALSE(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(0, t0));
  CHECK_FALSE(keys.absent(std::numeric_limits<ticket_key_id>::max(), t0));
}

TEST_CASE("known keys: a new replica takes no keys before begin") {
  known_keys keys(16);
  keys.add(1, t0 + 1min);
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.resynced(0)); // nothing begun: no resync to end
  CHECK_FALSE(keys.complete());
}

TEST_CASE("known keys: begun, it takes keys while syncing but knows nothing absent until resynced") {
  known_keys keys(16);
  keys.begin(7);
  CHECK(keys.syncing());
  CHECK(keys.generation() == 7);
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.resync_wanted());
  keys.add(1, t0 + 1min);
  CHECK(keys.size() == 1);
  CHECK_FALSE(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(2, t0));

  CHECK(keys.resynced(7));
  CHECK(keys.complete());
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.resync_wanted());
  CHECK(keys.absent(2, t0)); // never added
  CHECK_FALSE(keys.absent(1, t0));
  keys.add(3, t0 + 1min); // complete: still taking keys
  CHECK(keys.size() == 2);
  CHECK_FALSE(keys.absent(3, t0));
}

TEST_CASE("known keys: the resync of another generation does not complete it") {
  known_keys keys(16);
  keys.begin(7);
  CHECK_FALSE(keys.resynced(6));
  CHECK_FALSE(keys.resynced(8));
  CHECK_FALSE(keys.complete());
  CHECK(keys.syncing());
  CHECK_FALSE(keys.absent(2, t0));
  CHECK(keys.resynced(7)); // its own still does
  CHECK(keys.complete());
}

TEST_CASE("known keys: a resync ends once, the second report of it returns false") {
  known_keys keys(16);
  keys.begin(7);
  CHECK(keys.resynced(7));
  CHECK_FALSE(keys.resynced(7));
  CHECK(keys.complete()); // and it stays complete
}

TEST_CASE("known keys: lost, it empties, is incomplete and takes nothing until begun again") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 1min);
  keys.add(2, t0 + 1min);
  REQUIRE(keys.size() == 2);
  keys.lose();
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.resync_wanted());
  CHECK_FALSE(keys.absent(3, t0));
  keys.add(3, t0 + 1min);
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.resynced(1)); // the resync of the lost subscription no longer completes it
  CHECK_FALSE(keys.complete());

  keys.begin(2);
  CHECK(keys.syncing());
  keys.add(3, t0 + 1min);
  CHECK(keys.size() == 1);
}

TEST_CASE("known keys: lost while syncing, it takes nothing and its resync does not complete it") {
  known_keys keys(16);
  keys.begin(4);
  keys.add(1, t0 + 1min);
  keys.lose();
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.resynced(4));
  CHECK_FALSE(keys.complete());
}

TEST_CASE("known keys: begun again, it drops what it held and is incomplete until the new resync") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 1min);
  keys.add(2, t0 + 1min);
  keys.begin(2);
  CHECK(keys.size() == 0);
  CHECK(keys.syncing());
  CHECK_FALSE(keys.complete());
  CHECK(keys.generation() == 2);
  CHECK_FALSE(keys.resynced(1)); // the old generation's resync
  CHECK(keys.resynced(2));
  CHECK(keys.absent(1, t0)); // held before the new subscription: dropped
}

TEST_CASE("known keys: losing track while complete empties it and wants a resync") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 1min);
  keys.lose_track();
  CHECK(keys.size() == 0);
  CHECK(keys.resync_wanted());
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(2, t0));
  keys.add(2, t0 + 1min); // a store may have been missed: nothing taken until the resync begins
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.resynced(1)); // the generation's resync has ended already
  CHECK(keys.resync_wanted());

  keys.begin(keys.generation());
  CHECK(keys.syncing());
  CHECK_FALSE(keys.resync_wanted());
  keys.add(2, t0 + 1min);
  CHECK(keys.size() == 1);
  CHECK(keys.resynced(1));
  CHECK(keys.complete());
  CHECK(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(2, t0));
}

TEST_CASE("known keys: losing track while syncing empties it and its resync does not complete it") {
  known_keys keys(16);
  keys.begin(3);
  keys.add(1, t0 + 1min);
  keys.lose_track();
  CHECK(keys.size() == 0);
  CHECK(keys.resync_wanted());
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.complete());
  keys.add(2, t0 + 1min);
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.resynced(3));
  CHECK_FALSE(keys.complete());
  CHECK(keys.resync_wanted());

  keys.begin(keys.generation());
  CHECK(keys.generation() == 3);
  CHECK(keys.syncing());
  CHECK(keys.resynced(3));
  CHECK(keys.complete());
}

TEST_CASE("known keys: losing track when off does nothing") {
  known_keys never_begun(16);
  never_begun.lose_track();
  CHECK_FALSE(never_begun.resync_wanted());
  CHECK_FALSE(never_begun.syncing());
  CHECK_FALSE(never_begun.complete());

  auto lost = complete_replica(16);
  lost.lose();
  lost.lose_track();
  CHECK_FALSE(lost.resync_wanted());
  CHECK_FALSE(lost.syncing());
  CHECK_FALSE(lost.complete());
}

TEST_CASE("known keys: lost after losing track, it is off and no longer wants a resync") {
  auto keys = complete_replica(16);
  keys.lose_track();
  REQUIRE(keys.resync_wanted());
  keys.lose();
  CHECK_FALSE(keys.resync_wanted());
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.syncing());
}

TEST_CASE("known keys: with capacity 0 it is never on and never complete") {
  known_keys keys(0);
  keys.begin(1);
  CHECK_FALSE(keys.syncing());
  CHECK_FALSE(keys.resync_wanted());
  keys.add(1, t0 + 1min);
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.resynced(1));
  CHECK_FALSE(keys.complete());
  CHECK_FALSE(keys.absent(2, t0));
  keys.lose_track();
  CHECK_FALSE(keys.resync_wanted());
  CHECK(keys.overflows() == 0);
}

TEST_CASE("known keys: a key is present until its expiry and absent from then on") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 1min);
  CHECK_FALSE(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(1, t0 + 1min - 1ns));
  CHECK(keys.absent(1, t0 + 1min));
  CHECK(keys.absent(1, t0 + 2min));
  CHECK(keys.size() == 1); // expired keys are held until dropped, and count as absent

  keys.add(2, t0 - 1ms); // heard with an expiry already past
  CHECK(keys.absent(2, t0));
  CHECK_FALSE(keys.absent(2, t0 - 2ms));
  keys.add(3, t0); // expiring now
  CHECK(keys.absent(3, t0));
  CHECK_FALSE(keys.absent(3, t0 - 1ns));
}

TEST_CASE("known keys: a key added again keeps the later expiry, in either order") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 10min);
  keys.add(1, t0 + 1min); // earlier: does not shorten it
  CHECK(keys.size() == 1);
  CHECK_FALSE(keys.absent(1, t0 + 5min));
  CHECK_FALSE(keys.absent(1, t0 + 10min - 1ns));
  CHECK(keys.absent(1, t0 + 10min));

  keys.add(2, t0 + 1min);
  keys.add(2, t0 + 10min); // later: lengthens it
  CHECK(keys.size() == 2);
  CHECK_FALSE(keys.absent(2, t0 + 5min));
  CHECK(keys.absent(2, t0 + 10min));

  keys.add(3, t0 - 1min); // expired, then heard again live
  keys.add(3, t0 + 1min);
  CHECK_FALSE(keys.absent(3, t0));
}

TEST_CASE("known keys: a removed key is absent, and removing an unknown one is harmless") {
  auto keys = complete_replica(16);
  keys.add(1, t0 + 1min);
  keys.add(2, t0 + 1min);
  keys.remove(1);
  CHECK(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(2, t0));
  CHECK(keys.size() == 1);
  keys.remove(99);
  keys.remove(1); // twice
  CHECK(keys.size() == 1);
  CHECK(keys.complete());
  CHECK_FALSE(keys.absent(2, t0));
  CHECK(keys.absent(99, t0));
  keys.add(1, t0 + 1min); // heard again after its removal
  CHECK_FALSE(keys.absent(1, t0));
}

TEST_CASE("known keys: removing while off or syncing is harmless") {
  known_keys keys(16);
  keys.remove(1);
  CHECK(keys.size() == 0);
  keys.begin(1);
  keys.add(1, t0 + 1min);
  keys.add(2, t0 + 1min);
  keys.remove(1);
  CHECK(keys.size() == 1);
  CHECK(keys.syncing());
  REQUIRE(keys.resynced(1));
  CHECK(keys.absent(1, t0));
  CHECK_FALSE(keys.absent(2, t0));
}

TEST_CASE("known keys: size counts the keys held, expired or not, each id once") {
  auto keys = complete_replica(16);
  CHECK(keys.size() == 0);
  keys.add(1, t0 + 1min);
  CHECK(keys.size() == 1);
  keys.add(2, t0 - 1min);
  CHECK(keys.size() == 2);
  keys.add(1, t0 + 2min);
  CHECK(keys.size() == 2);
  keys.add(std::numeric_limits<ticket_key_id>::max(), t0 + 1min);
  keys.add(0, t0 + 1min);
  CHECK(keys.size() == 4);
  keys.remove(2);
  CHECK(keys.size() == 3);
}

// The overflow tests compare expiries with the real clock, as `add` does when the replica is full.
TEST_CASE("known keys: full of live keys, one more overflows it, emptying it and wanting a resync") {
  constexpr std::size_t capacity = 8;
  auto keys = complete_replica(capacity);
  auto const live = known_keys::clock::now() + 1h;
  for (ticket_key_id id = 1; id <= capacity; ++id) {
    keys.add(id, live);
  }
  CHECK(keys.size() == capacity);
  CHECK(keys.complete());
  CHECK(keys.overflows() == 0);
  keys.add(1, live + 1min); // a key held already needs no room
  CHECK(keys.size() == capacity);
  CHECK(keys.overflows() == 0);

  keys.add(capacity + 1, live);
  CHECK(keys.overflows() == 1);
  CHECK(keys.size() == 0);
  CHECK_FALSE(keys.complete());
  CHECK(keys.resync_wanted());
  CHECK_FALSE(keys.absent(capacity + 2, known_keys::clock::now()));

  // The resync it asks for brings it back.
  keys.begin(keys.generation());
  keys.add(capacity + 1, live);
  CHECK(keys.size() == 1);
  CHECK(keys.resynced(keys.generation()));
  CHECK(keys.complete());
  CHECK(keys.overflows() == 1);
}

TEST_CASE("known keys: full while syncing, one more overflows it and its resync does not complete it") {
  constexpr std::size_t capacity = 8;
  known_keys keys(capacity);
  keys.begin(5);
  auto const live = known_keys::clock::now() + 1h;
  for (ticket_key_id id = 1; id <= capacity + 1; ++id) {
    keys.add(id, live);
  }
  CHECK(keys.overflows() == 1);
  CHECK(keys.size() == 0);
  CHECK(keys.resync_wanted());
  CHECK_FALSE(keys.resynced(5));
  CHECK_FALSE(keys.complete());
}

TEST_CASE("known keys: full of expired keys, a new one drops them instead of overflowing") {
  constexpr std::size_t capacity = 8;
  auto keys = complete_replica(capacity);
  auto const expired = known_keys::clock::now() - 1s;
  for (ticket_key_id id = 1; id <= capacity; ++id) {
    keys.add(id, expired);
  }
  REQUIRE(keys.size() == capacity);
  keys.add(capacity + 1, known_keys::clock::now() + 1h);
  CHECK(keys.overflows() == 0);
  CHECK(keys.size() == 1);
  CHECK(keys.complete());
  CHECK_FALSE(keys.resync_wanted());
  auto const now = known_keys::clock::now();
  CHECK_FALSE(keys.absent(capacity + 1, now));
  CHECK(keys.absent(1, now));
}

TEST_CASE("known keys: dropping expired keys must free more than an eighth of the capacity, else it overflows") {
  constexpr std::size_t capacity = 8;
  auto const live = known_keys::clock::now() + 1h;
  auto const expired = known_keys::clock::now() - 1s;

  SECTION("7 live and 1 expired: 7 left after dropping, no room for an eighth more, overflow") {
    auto keys = complete_replica(capacity);
    for (ticket_key_id id = 1; id <= 7; ++id) {
      keys.add(id, live);
    }
    keys.add(8, expired);
    REQUIRE(keys.size() == capacity);
    keys.add(9, live);
    CHECK(keys.overflows() == 1);
    CHECK(keys.size() == 0);
    CHECK_FALSE(keys.complete());
    CHECK(keys.resync_wanted());
  }
  SECTION("6 live and 2 expired: 6 left after dropping, room enough, no overflow") {
    auto keys = complete_replica(capacity);
    for (ticket_key_id id = 1; id <= 6; ++id) {
      keys.add(id, live);
    }
    keys.add(7, expired);
    keys.add(8, expired);
    REQUIRE(keys.size() == capacity);
    keys.add(9, live);
    CHECK(keys.overflows() == 0);
    CHECK(keys.size() == 7);
    CHECK(keys.complete());
    CHECK_FALSE(keys.resync_wanted());
    auto const now = known_keys::clock::now();
    CHECK(keys.absent(7, now));
    CHECK(keys.absent(8, now));
    CHECK_FALSE(keys.absent(9, now));
    CHECK_FALSE(keys.absent(1, now));
    keys.add(10, live); // room again without a sweep
    CHECK(keys.size() == capacity);
    CHECK(keys.overflows() == 0);
  }
}

TEST_CASE("known keys: with a capacity under 8, a full replica of live keys overflows at the next new key") {
  constexpr std::size_t capacity = 3;
  auto keys = complete_replica(capacity);
  auto const live = known_keys::clock::now() + 1h;
  keys.add(1, live);
  keys.add(2, live);
  keys.add(3, live);
  CHECK(keys.size() == 3);
  CHECK(keys.complete());
  keys.add(4, live);
  CHECK(keys.overflows() == 1);
  CHECK(keys.size() == 0);
  CHECK(keys.resync_wanted());
}

TEST_CASE("known keys: each overflow is counted") {
  constexpr std::size_t capacity = 2;
  known_keys keys(capacity);
  auto const live = known_keys::clock::now() + 1h;
  for (std::uint64_t generation = 1; generation <= 3; ++generation) {
    keys.begin(generation);
    keys.add(1, live);
    keys.add(2, live);
    keys.add(3, live);
    CHECK(keys.resync_wanted());
    CHECK(keys.overflows() == generation);
  }
}

TEST_CASE("known keys: long random runs of adds, removes and expiries agree with a map of the same keys") {
  // Ids are drawn from a small pool (so that removals hit) that holds 0 and ids crowded into a few low and high
  // bits; expiries from a few instants around `now`; the replica grows from empty to thousands of keys.
  std::mt19937_64 random(7); // fixed: a failure replays
  std::vector<ticket_key_id> pool = {0, 1, 2, std::numeric_limits<ticket_key_id>::max()};
  for (ticket_key_id i = 1; i <= 40; ++i) {
    pool.push_back(i << 58U); // differ only in the top bits
    pool.push_back(i);        // only in the bottom bits
  }
  while (pool.size() < 3000) {
    pool.push_back(random());
  }
  auto const pick = [&random](std::size_t n) { return static_cast<std::size_t>(random() % n); };
  constexpr std::size_t capacity = 1'000'000; // never full here: the overflow tests above cover that
  auto keys = complete_replica(capacity);
  std::unordered_map<ticket_key_id, known_keys::clock::time_point> model;
  auto now = t0;
  for (int step = 0; step < 60'000; ++step) {
    auto const id = pool[pick(pool.size())];
    switch (pick(10)) {
    case 0: now += 1min; break;
    case 1:
    case 2:
    case 3:
      keys.remove(id);
      model.erase(id);
      break;
    default: {
      auto const until = now + std::chrono::minutes(static_cast<int>(pick(5)) - 1);
      keys.add(id, until);
      auto& held = model.try_emplace(id, until).first->second;
      held = std::max(held, until);
      break;
    }
    }
    if (step % 97 == 0 || step > 59'000) {
      REQUIRE(keys.size() == model.size());
      for (auto const other : pool) {
        auto const held = model.find(other);
        REQUIRE(keys.absent(other, now) == (held == model.end() || held->second <= now));
      }
    }
  }
  CHECK(keys.size() > 500);
}
