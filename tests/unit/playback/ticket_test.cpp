#include "wandura/playback/ticket.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono;

namespace {
system_clock::time_point utc(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s};
}
} // namespace

TEST_CASE("intent: wire text round-trips and unknown text reads as other") {
  CHECK(wandura::to_string(wandura::intent::play) == "play");
  CHECK(wandura::to_string(wandura::intent::prefetch) == "prefetch");
  CHECK(wandura::intent_from_string("play") == wandura::intent::play);
  CHECK(wandura::intent_from_string("prefetch") == wandura::intent::prefetch);
  CHECK(wandura::intent_from_string("Play") == wandura::intent::other);
  CHECK(wandura::intent_from_string("preload") == wandura::intent::other);
  CHECK(wandura::intent_from_string("") == wandura::intent::other);
}

TEST_CASE("rfc 3339: the SPEC's UTC form parses to the exact instant") {
  auto t = wandura::parse_rfc3339("2026-11-30T11:00:00Z");
  REQUIRE(t);
  CHECK(*t == utc(2026, 11, 30, 11, 0, 0));
  CHECK(wandura::parse_rfc3339("2026-11-30t11:00:00z") == utc(2026, 11, 30, 11, 0, 0));
  CHECK(wandura::parse_rfc3339("2026-11-30 11:00:00Z") == utc(2026, 11, 30, 11, 0, 0));
}

TEST_CASE("rfc 3339: offsets are normalised to UTC and fractions are kept") {
  CHECK(wandura::parse_rfc3339("2026-11-30T12:30:00+01:30") == utc(2026, 11, 30, 11, 0, 0));
  CHECK(wandura::parse_rfc3339("2026-11-30T06:00:00-05:00") == utc(2026, 11, 30, 11, 0, 0));
  CHECK(wandura::parse_rfc3339("2026-12-31T23:30:00-01:00") == utc(2027, 1, 1, 0, 30, 0));
  auto t = wandura::parse_rfc3339("2026-11-30T11:00:00.250Z");
  REQUIRE(t);
  CHECK(*t - utc(2026, 11, 30, 11, 0, 0) == milliseconds(250));
  CHECK(wandura::parse_rfc3339("2024-02-29T00:00:00Z") == utc(2024, 2, 29, 0, 0, 0));
  CHECK(wandura::parse_rfc3339("2016-12-31T23:59:60Z") == utc(2016, 12, 31, 23, 59, 59));
}

TEST_CASE("rfc 3339: malformed or out-of-range text is refused") {
  for (char const* bad :
       {"", "2026-11-30", "2026-11-30T11:00:00", "2026-11-30T11:00Z", "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z",
        "2025-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T11:60:00Z", "2026-11-30T11:00:61Z",
        "2026-11-30T11:00:00.Z", "2026-11-30T11:00:00+0100", "2026-11-30T11:00:00+24:00", "2026-11-30T11:00:00Zjunk",
        "26-11-30T11:00:00Z", "2026/11/30T11:00:00Z", "2026-11-30X11:00:00Z", "２026-11-30T11:00:00Z", "1764500400"}) {
    INFO(bad);
    CHECK_FALSE(wandura::parse_rfc3339(bad));
  }
}

TEST_CASE("ticket batch: values compare by content") {
  wandura::ticket_batch a{{{"film", 4, wandura::intent::play}}, "device", "kek", std::nullopt};
  auto b = a;
  CHECK(a == b);
  b.viewer_ref = "v:r";
  CHECK_FALSE(a == b);
  CHECK(wandura::ticket_batch::max_episodes == 3);
}
