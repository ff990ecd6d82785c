// The viewers and tickets the Redis benchmarks store and look up.
#pragma once

#include <string>

#include "wandura/fleet/shared_ticket_cache.hpp"

namespace wandura::bench {

/// Viewer `i`'s play ticket of one episode, each viewer on a device of its own.
inline ticket_identity identity(int i) {
  return {"k3Jd9sQm2vXa7LpT0bWc1e:viewer" + std::to_string(i), "dev_0a1b2c3d4e5f" + std::to_string(i),
          "the-heiress-returns", 4, "play"};
}

/// A ticket as the API returns it (docs/protocol.md), about 300 bytes.
inline std::string ticket_json(int i) {
  return R"({"ticket_id":"tkt_)" + std::to_string(i) +
         R"(","manifest_url":"https://cdn.wandura.example/m/the-heiress-returns/4/manifest.mpd",)"
         R"("license_url":"https://drm.wandura.example/license","expires_at":"2026-11-30T11:00:00Z",)"
         R"("drm_payload":"eyJhbGciOiJSUzI1NiJ9.eyJkZXYiOiJkZXZfMGExYjJjM2Q0ZTVmIn0.c2lnbmF0dXJlc2lnbmF0dXJl"})";
}

} // namespace wandura::bench
