// The bound on the bytes a hiredis 0.14 reader holds for a reply it has not finished: its reader has none, so a
// peer that sends a huge or never-ending reply would be buffered whole (and an unfinished line searched for its
// CR LF again from its start at every read: quadratic). Both readers of the fleet (the command connection's and the
// subscription's) check it after every feed. Not public API.
#pragma once

#include <cstddef>

struct redisReader;

namespace wandura::detail {

/// The longest unfinished line a reader may hold: a status, error or integer reply, or the header of a bulk string
/// or an array. Error replies are the longest lines the fleet reads (a script's error: well under a kilobyte);
/// checked at every feed, at most 1 MiB is searched per read: the search for the line's end stays linear.
inline constexpr std::size_t max_reply_line_bytes = std::size_t{1} << 20U;

/// True when `reader` holds more than `max_reply_bytes` unread bytes, or an unfinished line of more than
/// `max_reply_line_bytes`: the peer is not a Redis answering the fleet's commands, and the connection is dropped as
/// `errc::protocol_error`.
[[nodiscard]] bool reply_too_large(redisReader const& reader, std::size_t max_reply_bytes) noexcept;

} // namespace wandura::detail
