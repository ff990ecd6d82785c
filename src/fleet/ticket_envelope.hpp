// The value stored under a ticket key: the identity it was issued for, its expiry and the serialized ticket, as
// length-prefixed fields (`wt1|<len>:<bytes>...`), so that a reader checks who the ticket is for before serving
// it. Inside it, the payload the fleet's ticket store writes: one `wandura::ticket` and the id of the process that
// stored it (`wp1|<len>:<bytes>...`), so that a lookup tells a ticket another process issued. Not public API.
#pragma once

#include <chrono>
#include <cstdint>
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

/// Where each field of a ticket store's payload lies in its bytes: read once, then any field is a view of the
/// bytes and the ticket a copy of them, with no string of its own kept meanwhile. Offsets, not views: the bytes may
/// move (a `std::string` moved into a container).
struct ticket_payload_fields {
  struct field {
    std::uint32_t at = 0;
    std::uint32_t size = 0;
    [[nodiscard]] std::string_view in(std::string_view bytes) const noexcept { return bytes.substr(at, size); }
  };
  field process_id;
  field ticket_id;
  field manifest_url;
  field license_url;
  field expires_at_text;
  field drm_payload;
  std::chrono::system_clock::time_point expires_at; ///< to the nanosecond

  /// The ticket, copied out of `bytes` (the payload these fields were read from).
  [[nodiscard]] wandura::ticket ticket(std::string_view bytes) const;
  /// The ticket and the storing process's id, copied out of `bytes`.
  [[nodiscard]] stored_ticket stored(std::string_view bytes) const;
};

[[nodiscard]] std::string encode_ticket_payload(std::string_view process_id, wandura::ticket const& value);
/// Nothing when `bytes` is not a payload of this version (corrupt, truncated, another writer, 4 GiB or more).
[[nodiscard]] std::optional<ticket_payload_fields> read_ticket_payload(std::string_view bytes) noexcept;
/// `read_ticket_payload`, the fields copied out.
[[nodiscard]] std::optional<stored_ticket> decode_ticket_payload(std::string_view bytes);

} // namespace wandura::detail
