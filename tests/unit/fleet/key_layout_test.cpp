#include "wandura/fleet/key_layout.hpp"

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
  CHECK(wandura::fleet_keys::viewer("org_demo", "v:1") == "wandura:{org_demo}:viewer:v:1");
  CHECK(wandura::fleet_keys::pace("org_demo", "playback") == "wandura:{org_demo}:pace:playback");
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

TEST_CASE("key layout: an organisation that could break the hash tag is refused") {
  for (char const* bad :
       {"", "a}b", "{a}", "a b", "0123456789012345678901234567890123456789012345678901234567890123x"}) {
    CHECK_THROWS_AS(wandura::fleet_keys::check_org(bad), wandura::error);
  }
  CHECK_NOTHROW(wandura::fleet_keys::check_org("org_demo-1.eu"));
}
