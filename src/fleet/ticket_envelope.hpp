// The value stored under a ticket key: the identity it was issued for, its expiry and the serialized ticket, as
// length-prefixed fields (`wt1|<len>:<bytes>...`), so that a reader checks who the ticket is for before serving
// it. Inside it, the payload the fleet's ticket store writes: one `wandura::ticket` and the id of the process that
// stored it (`wp1|<len>:<bytes>...`), so that a lookup tells a ticket another process issued. Not public API.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/playback/ticket.hpp"

namespace wandura::detail {

struct ticket_envelope {
  ticket_identity who;
  cached_ticket ticket;
};

[[nodiscard]] std::string encode_envelope(ticket_identity const& who, cached_ticket const& ticket);
/// Nothing when `bytes` is not an envelope of this version (corrupt, truncated, another writer).
[[nodiscard]] std::optional<ticket_envelope> decode_envelope(std::string_view bytes);

/// A ticket as the fleet's ticket store keeps it in `cached_ticket::payload`.
struct stored_ticket {
  std::string process_id; ///< `fleet_options::process_id` of the process that stored it
  wandura::ticket value;  ///< every field, `expires_at` to the nanosecond
};

[[nodiscard]] std::string encode_ticket_payload(std::string_view process_id, wandura::ticket const& value);
/// Nothing when `bytes` is not a payload of this version (corrupt, truncated, another writer).
[[nodiscard]] std::optional<stored_ticket> decode_ticket_payload(std::string_view bytes);

} // namespace wandura::detail
