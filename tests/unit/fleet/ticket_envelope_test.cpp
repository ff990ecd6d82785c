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

TEST_CASE("ticket envelope: an expiry the system clock cannot hold is refused as corrupt, never converted") {
  std::string const bytes = wandura::detail::encode_envelope(who(), ticket());
  std::string const stored = "13:1764590400123";
  auto const at = bytes.find(stored);
  REQUIRE(at != std::string::npos);
  auto with_expiry = [&](std::string const& ms) {
    return wandura::detail::decode_envelope(bytes.substr(0, at) + std::to_string(ms.size()) + ":" + ms +
                                            bytes.substr(at + stored.size()));
  };
  // The clock (nanoseconds) holds about +-9223372036854 ms from the epoch.
  CHECK_FALSE(with_expiry("9223372036854775807"));
  CHECK_FALSE(with_expiry("-9223372036854775808"));
  CHECK_FALSE(with_expiry("9223372036855"));
  CHECK_FALSE(with_expiry("-9223372036855"));
  auto const last = with_expiry("9223372036854");
  REQUIRE(last);
  CHECK(last->ticket.expires_at.time_since_epoch() == std::chrono::milliseconds(9223372036854));
  CHECK(with_expiry("-9223372036854"));
}

namespace {
wandura::ticket full_ticket() {
  wandura::ticket t;
  t.ticket_id = "tkt_7f3a";
  t.manifest_url = "https://cdn.example/m/7f3a.mpd";
  t.license_url = "https://drm.example/l/7f3a";
  t.expires_at = std::chrono::system_clock::time_point(std::chrono::nanoseconds(1'764'590'400'123'456'789));
  t.expires_at_text = "2025-12-01T12:00:00.123456789Z";
  t.drm_payload = std::string("opaque\0|3:bytes", 15);
  return t;
}
} // namespace

TEST_CASE("ticket payload: every field of a ticket and the storing process survive a round trip") {
  auto const stored =
      wandura::detail::decode_ticket_payload(wandura::detail::encode_ticket_payload("host-a:4242", full_ticket()));
  REQUIRE(stored);
  CHECK(stored->process_id == "host-a:4242");
  CHECK(stored->value == full_ticket()); // expires_at to the nanosecond
}

TEST_CASE("ticket payload: anything cut, extended or of another version is refused") {
  std::string const bytes = wandura::detail::encode_ticket_payload("p", full_ticket());
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO(cut);
    CHECK_FALSE(wandura::detail::decode_ticket_payload(std::string_view(bytes).substr(0, cut)));
  }
  CHECK_FALSE(wandura::detail::decode_ticket_payload(bytes + "x"));
  CHECK_FALSE(wandura::detail::decode_ticket_payload("wp2|" + bytes.substr(4)));
  CHECK_FALSE(wandura::detail::decode_ticket_payload(wandura::detail::encode_envelope(who(), ticket())));
}
