// The emulator's bounded stores (src/emulator/expiring_map.hpp): a full map drops the entry of no use soonest.
#include "emulator/expiring_map.hpp"

#include <catch2/catch.hpp>

using wandura::emulator::detail::expiring_map;

TEST_CASE("expiring map: when full, the entry of no use soonest makes room, and a replaced entry is reindexed") {
  expiring_map<std::string, int> map(3);
  map.put("a", "A", 10);
  map.put("b", "B", 5);
  map.put("c", "C", 20);
  map.put("d", "D", 15); // full: b (5) goes
  CHECK(map.size() == 3);
  CHECK(map.find("b") == nullptr);
  REQUIRE(map.find("a") != nullptr);
  CHECK(*map.find("a") == "A");
  map.put("a", "A2", 30); // replaced: now useless last, no room needed
  CHECK(map.size() == 3);
  CHECK(*map.find("a") == "A2");
  map.put("e", "E", 25); // full: d (15) goes, not a (its old 10 is gone from the index)
  CHECK(map.find("d") == nullptr);
  CHECK(map.find("a") != nullptr);
  CHECK(map.find("c") != nullptr);
  CHECK(map.find("e") != nullptr);
  map.put("f", "F", 1); // full: c (20) goes even though f itself is useless sooner
  CHECK(map.find("c") == nullptr);
  CHECK(map.find("f") != nullptr);
  map.put("g", "G", 40); // full: f (1) goes
  CHECK(map.find("f") == nullptr);
  CHECK(map.size() == 3);
}

TEST_CASE("expiring map: a map of capacity zero keeps nothing") {
  expiring_map<int, int> map(0);
  map.put("a", 1, 10);
  CHECK(map.size() == 0);
  CHECK(map.find("a") == nullptr);
}

TEST_CASE("expiring map: a full map of 200,000 entries stores in bounded time, not by scanning") {
  constexpr int capacity = 200'000;
  expiring_map<int, int> map(capacity);
  for (int i = 0; i < capacity + 50'000; ++i) { // every store past the capacity drops one entry
    map.put(std::to_string(i), i, i);
  }
  CHECK(map.size() == capacity);
  CHECK(map.find("0") == nullptr);
  CHECK(map.find("49999") == nullptr);
  REQUIRE(map.find("50000") != nullptr);
  CHECK(*map.find("50000") == 50'000);
}
