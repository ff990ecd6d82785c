// The ticket cache's local copy (src/fleet/local_ticket_cache.hpp): same identity rule, bounded, near copies by
// subscription generation.
#include "fleet/local_ticket_cache.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

namespace {
wandura::ticket_identity viewer_on(std::string device) {
  return {"viewer:ref", std::move(device), "film", 4, "play"};
}
auto const t0 = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'590'400'000));
} // namespace

TEST_CASE("local ticket cache: found only for the identity it was stored for, until its reuse limit") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store("k7", viewer_on("device-7"), {"tkt_7", t0 + 30min}, t0 + 25min, t0);
  CHECK(cache.find("k7", viewer_on("device-7"), t0)->payload == "tkt_7");
  CHECK_FALSE(cache.find("k7", viewer_on("device-8"), t0)); // same key, another device: never served
  CHECK_FALSE(cache.find("k7", viewer_on("device-7"), t0 + 25min));
  cache.erase("k7");
  CHECK_FALSE(cache.find("k7", viewer_on("device-7"), t0));
}

TEST_CASE(
    "local ticket cache: when full, expired tickets make room, then the live one with the least reuse time left") {
  wandura::detail::local_ticket_cache cache(2);
  auto const now = t0;
  cache.store("old", viewer_on("a"), {"tkt_old", now}, now - 1ms, now); // already past its reuse limit
  cache.store("live", viewer_on("b"), {"tkt_live", now + 30min}, now + 25min, now);
  cache.store("new", viewer_on("c"), {"tkt_new", now + 30min}, now + 25min, now);
  CHECK(cache.find("new", viewer_on("c"), now));
  cache.store("more", viewer_on("d"), {"tkt_more", now + 30min}, now + 25min, now); // full, none lives longer
  CHECK_FALSE(cache.find("more", viewer_on("d"), now));
  CHECK(cache.find("live", viewer_on("b"), now));
  CHECK(cache.find("new", viewer_on("c"), now));
  cache.store("live", viewer_on("b"), {"tkt_live2", now + 40min}, now + 35min, now); // replacing needs no room
  CHECK(cache.find("live", viewer_on("b"), now)->payload == "tkt_live2");
}

TEST_CASE("local ticket cache: a full cache drops exactly its expired tickets, soonest first, erase included") {
  wandura::detail::local_ticket_cache cache(3);
  auto const now = t0;
  cache.store("a", viewer_on("a"), {"tkt_a", now + 30min}, now + 10min, now);
  cache.store("b", viewer_on("b"), {"tkt_b", now + 30min}, now + 5min, now);
  cache.store("c", viewer_on("c"), {"tkt_c", now + 30min}, now + 20min, now);
  cache.erase("c"); // its place in the expiry order goes with it
  cache.store("d", viewer_on("d"), {"tkt_d", now + 30min}, now + 20min, now);
  auto const later = now + 6min; // only b is past its limit
  cache.store("e", viewer_on("e"), {"tkt_e", now + 30min}, now + 20min, later);
  CHECK(cache.find("e", viewer_on("e"), later));
  CHECK(cache.find("a", viewer_on("a"), later));
  CHECK(cache.find("d", viewer_on("d"), later));
  CHECK_FALSE(cache.find("b", viewer_on("b"), now));                            // dropped, not merely past its limit
  cache.store("f", viewer_on("f"), {"tkt_f", now + 30min}, now + 20min, later); // full of live ones: a goes
  CHECK(cache.find("f", viewer_on("f"), later));
  CHECK_FALSE(cache.find("a", viewer_on("a"), later));
  CHECK(cache.find("d", viewer_on("d"), later));
  CHECK(cache.find("e", viewer_on("e"), later));
  cache.store("g", viewer_on("g"), {"tkt_g", now + 30min}, now + 15min, later); // less time left than all: not kept
  CHECK_FALSE(cache.find("g", viewer_on("g"), later));
}

TEST_CASE("local ticket cache: a near copy is found only under the generation it was kept in, never generation 0") {
  wandura::detail::local_ticket_cache cache(10);
  cache.store("k7", viewer_on("device-7"), {"tkt_7", t0 + 30min}, t0 + 25min, t0, 3);
  cache.store("k8", viewer_on("device-8"), {"tkt_8", t0 + 30min}, t0 + 25min, t0); // a fallback copy only
  CHECK(cache.find_near("k7", viewer_on("device-7"), t0, 3)->payload == "tkt_7");
  CHECK_FALSE(cache.find_near("k7", viewer_on("device-7"), t0, 4));         // the subscription changed since
  CHECK_FALSE(cache.find_near("k7", viewer_on("device-8"), t0, 3));         // never another device
  CHECK_FALSE(cache.find_near("k7", viewer_on("device-7"), t0 + 25min, 3)); // past its reuse limit
  CHECK_FALSE(cache.find_near("k8", viewer_on("device-8"), t0, 0));
  CHECK(cache.find("k8", viewer_on("device-8"), t0));                                 // still the fallback
  cache.store("k8", viewer_on("device-8"), {"tkt_8", t0 + 30min}, t0 + 25min, t0, 4); // read again: near now
  CHECK(cache.find_near("k8", viewer_on("device-8"), t0, 4));
}
