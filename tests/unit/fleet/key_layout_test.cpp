#include "wandura/fleet/key_layout.hpp"

#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

namespace {
wandura::ticket_identity who() {
  return {"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "device-7", "the-heiress-returns", 4, "play"};
}
} // namespace

TEST_CASE("key layout: every key carries the organisation as a hash tag") {
  CHECK(wandura::fleet_keys::ticket("org_demo", who()).starts_with("wandura:{org_demo}:ticket:"));
  CHECK(wandura::fleet_keys::ticket("org_demo", who()).size() == std::string("wandura:{org_demo}:ticket:").size() + 32);
  CHECK(wandura::fleet_keys::viewer("org_demo", {30, 30}, "v:1") == "wandura:{org_demo}:viewer:30pm-b30:v:1");
  CHECK(wandura::fleet_keys::pace("org_demo", "playback") == "wandura:{org_demo}:pace:playback");
  CHECK(wandura::fleet_keys::ticket_erasures("org_demo") == "wandura:{org_demo}:ticket-erased");
  CHECK(wandura::fleet_keys::ticket_erasures("org_demo", 0) == "wandura:{org_demo}:ticket-erased");
  CHECK(wandura::fleet_keys::ticket_erasures("org_demo", 3) == "wandura:{org_demo}:ticket-erased@3"); // per database
}

TEST_CASE("key layout: each part of a ticket's identity changes its key") {
  auto const base = wandura::fleet_keys::ticket("o", who());
  auto other_device = who();
  other_device.union_info = "device-8";
  auto other_viewer = who();
  other_viewer.viewer_ref = "other:viewer";
  auto other_intent = who();
  other_intent.intent = "prefetch";
  auto other_episode = who();
  other_episode.episode_no = 5;
  for (auto const& changed : {other_device, other_viewer, other_intent, other_episode}) {
    CHECK(wandura::fleet_keys::ticket("o", changed) != base);
  }
  CHECK(wandura::fleet_keys::ticket("p", who()) != base);
  // Length prefixes: moving a character from one field to the next is another identity.
  CHECK(wandura::fleet_keys::ticket("o", {"ab", "c", "f", 1, "play"}) !=
        wandura::fleet_keys::ticket("o", {"a", "bc", "f", 1, "play"}));
}

TEST_CASE("key layout: a viewer's key names the limit's rate and burst, so each limit has its own bucket") {
  using wandura::fleet_keys::viewer;
  std::string const ref = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";
  CHECK(viewer("o", {3, 3}, ref) == "wandura:{o}:viewer:3pm-b3:" + ref);
  CHECK(viewer("o", {0.5, 2}, ref) == "wandura:{o}:viewer:0.5pm-b2:" + ref);
  CHECK(viewer("o", {1.0 / 3, 10}, "v") == "wandura:{o}:viewer:0.3333333333333333pm-b10:v"); // reads back exactly
  // Another rate, another burst, another viewer, another organisation: another key. The same: the same key.
  auto const base = viewer("o", {30, 30}, ref);
  CHECK(viewer("o", {30, 30}, ref) == base);
  for (auto const& other : {viewer("o", {3, 30}, ref), viewer("o", {30, 60}, ref), viewer("o", {30.5, 30}, ref),
                            viewer("o", {30, 30}, "other"), viewer("p", {30, 30}, ref)}) {
    CHECK(other != base);
  }
  // The rate part has no ':' of its own, so a viewer_ref that looks like one cannot reach another limit's key.
  CHECK(viewer("o", {3, 3}, "30pm-b30:v") != viewer("o", {30, 30}, "v"));
  CHECK(viewer("o", {3, 3}, "30pm-b30:v").starts_with("wandura:{o}:viewer:3pm-b3:"));
}

TEST_CASE("key layout: a viewer limit's rate or burst that is not finite and positive is refused") {
  double const inf = std::numeric_limits<double>::infinity();
  double const nan = std::numeric_limits<double>::quiet_NaN();
  for (wandura::viewer_rate bad :
       {wandura::viewer_rate{0, 30}, wandura::viewer_rate{-1, 30}, wandura::viewer_rate{30, 0},
        wandura::viewer_rate{inf, 30}, wandura::viewer_rate{30, inf}, wandura::viewer_rate{nan, 30},
        wandura::viewer_rate{30, nan}}) {
    CHECK_THROWS_AS(wandura::fleet_keys::viewer("o", bad, "v"), wandura::error);
  }
}

TEST_CASE("key layout: an organisation that could break the hash tag is refused") {
  for (char const* bad :
       {"", "a}b", "{a}", "a b", "0123456789012345678901234567890123456789012345678901234567890123x"}) {
    CHECK_THROWS_AS(wandura::fleet_keys::check_org(bad), wandura::error);
  }
  CHECK_NOTHROW(wandura::fleet_keys::check_org("org_demo-1.eu"));
}
