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

namespace {
/// A value weighing its length, as a ticket weighs its fields.
struct string_bytes {
  std::size_t operator()(std::string const& s) const noexcept { return s.size(); }
};
} // namespace

TEST_CASE("expiring map: bounded in bytes of keys and values too, the entries of no use soonest making room") {
  expiring_map<std::string, int, string_bytes> map(100, 20);
  map.put("a", std::string(4, 'x'), 10); // 5 bytes
  map.put("b", std::string(4, 'x'), 5);  // 10
  map.put("c", std::string(4, 'x'), 20); // 15
  CHECK(map.bytes() == 15);
  map.put("d", std::string(9, 'x'), 15); // 25 > 20: b (of no use at 5) goes
  CHECK(map.find("b") == nullptr);
  CHECK(map.find("a") != nullptr);
  CHECK(map.find("c") != nullptr);
  CHECK(map.find("d") != nullptr);
  CHECK(map.bytes() == 20);
  // One entry heavier than the whole bound is not kept, and neither is its key's earlier entry.
  map.put("c", std::string(30, 'x'), 30);
  CHECK(map.find("c") == nullptr);
  CHECK(map.bytes() == 15);
  // A replacement no heavier is made in place; a heavier one makes room as a new entry does.
  map.put("d", std::string(2, 'x'), 50);
  CHECK(map.bytes() == 8);
  map.put("e", std::string(9, 'x'), 60);
  CHECK(map.bytes() == 18);
  map.put("d", std::string(9, 'x'), 70); // 3 -> 10 bytes: 25 > 20, a (10) goes
  CHECK(map.find("a") == nullptr);
  CHECK(map.find("e") != nullptr);
  CHECK(map.bytes() == 20);
  map.put("d", std::string(10, 'x'), 80); // 11 bytes: e (60) goes for it
  CHECK(map.find("e") == nullptr);
  REQUIRE(map.find("d") != nullptr);
  CHECK(map.find("d")->size() == 10);
  CHECK(map.size() == 1);
  CHECK(map.bytes() == 11);
}
