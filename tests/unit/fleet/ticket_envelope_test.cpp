// The stored form of a shared ticket (src/fleet/ticket_envelope.hpp).
#include "fleet/ticket_envelope.hpp"

#include <catch2/catch.hpp>

namespace {
wandura::ticket_identity who() {
  return {"viewer:ref", "device-7", "film", 4, "play"};
}
wandura::cached_ticket ticket() {
  return {std::string("{\"ticket_id\":\"tkt_1\"}\0|5:x", 27),
          std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'590'400'123))};
}
} // namespace

TEST_CASE("ticket envelope: identity, expiry and binary payload survive a round trip") {
  auto const env = wandura::detail::decode_envelope(wandura::detail::encode_envelope(who(), ticket()));
  REQUIRE(env);
  CHECK(env->who == who());
  CHECK(env->ticket == ticket());
}

TEST_CASE("ticket envelope: anything cut or changed is refused, never half read") {
  std::string const bytes = wandura::detail::encode_envelope(who(), ticket());
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO(cut);
    CHECK_FALSE(wandura::detail::decode_envelope(std::string_view(bytes).substr(0, cut)));
  }
  CHECK_FALSE(wandura::detail::decode_envelope(bytes + "x"));
  CHECK_FALSE(wandura::detail::decode_envelope("wt2|" + bytes.substr(4)));
  CHECK_FALSE(wandura::detail::decode_envelope("plain ticket json"));
}
