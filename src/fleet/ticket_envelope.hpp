// The value stored under a ticket key: the identity it was issued for, its expiry and the serialized ticket, as
// length-prefixed fields (`wt1|<len>:<bytes>...`), so that a reader checks who the ticket is for before serving
// it. Not public API.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"

namespace wandura::detail {

struct ticket_envelope {
  ticket_identity who;
  cached_ticket ticket;
};

[[nodiscard]] std::string encode_envelope(ticket_identity const& who, cached_ticket const& ticket);
/// Nothing when `bytes` is not an envelope of this version (corrupt, truncated, another writer).
[[nodiscard]] std::optional<ticket_envelope> decode_envelope(std::string_view bytes);

} // namespace wandura::detail
