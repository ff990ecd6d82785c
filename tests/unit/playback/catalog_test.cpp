#include "wandura/playback/catalog.hpp"

#include <catch2/catch.hpp>

TEST_CASE("org config: a counter's limit is found by name, a missing one is absent") {
  wandura::org_config config{"org_demo", {{"playback", 6000}, {"catalog", 1200}, {"video", 0}}};
  CHECK(config.limit("playback") == 6000);
  CHECK(config.limit("catalog") == 1200);
  CHECK(config.limit("video") == 0);
  CHECK_FALSE(config.limit("creatives"));
  CHECK_FALSE(config.limit("Playback"));
}

TEST_CASE("catalog values: compare by content") {
  CHECK(wandura::film{"f", "t", 12} == wandura::film{"f", "t", 12});
  CHECK_FALSE(wandura::film{"f", "t", 12} == wandura::film{"f", "t", 11});
  CHECK(wandura::video{"v", "t", "u"} == wandura::video{"v", "t", "u"});
  CHECK_FALSE(wandura::creative{"c", "u"} == wandura::creative{"c", "x"});
}
