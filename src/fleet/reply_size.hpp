// The bounds on a reply a hiredis 0.14 reader has not finished: its reader has none, so a peer that sends a huge or
// never-ending reply would be buffered whole (and an unfinished line searched for its CR LF again from its start at
// every read: quadratic), and one that declares a huge array would have a pointer allocated per declared element at
// once, then an object per element as each arrives. Both readers of the fleet (the command connection's and the
// subscription's) check the bytes after every feed and the arrays as each begins. Not public API.
#pragma once

#include <algorithm>
#include <cstddef>

struct redisReader;
struct redisReadTask;
struct redisReplyObjectFunctions;

namespace wandura::detail {

/// The longest unfinished line a reader may hold: a status, error or integer reply, or the header of a bulk string
/// or an array. Error replies are the longest lines the fleet reads (a script's error: well under a kilobyte);
/// checked at every feed, at most 1 MiB is searched per read: the search for the line's end stays linear.
inline constexpr std::size_t max_reply_line_bytes = std::size_t{1} << 20U;

/// True when `reader` holds more than `max_reply_bytes` unread bytes, or an unfinished line of more than
/// `max_reply_line_bytes`: the peer is not a Redis answering the fleet's commands, and the connection is dropped as
/// `errc::protocol_error`.
[[nodiscard]] bool reply_too_large(redisReader const& reader, std::size_t max_reply_bytes) noexcept;

/// The fewest bytes an element of an array takes on the wire: its type byte and the CR LF that ends its line, with
/// nothing between: an empty status or error (`+\r\n`, `-\r\n`), which hiredis 0.14 reads as such. Every other
/// element takes more: an integer needs a digit (`:0\r\n`; hiredis refuses `:\r\n`), a nil five bytes (`$-1\r\n`,
/// `*-1\r\n`), an empty array four (`*0\r\n`).
inline constexpr std::size_t min_element_bytes = 3;

/// The elements that the arrays of the reply being read declared (`*<count>`, those of its nested arrays included),
/// against `redis_options::max_reply_elements` and what `max_reply_bytes` could carry (`max_reply_bytes /
/// min_element_bytes`: each declared element, at whatever depth, is an item of its own on the wire, so a reply that
/// declares more could not fit in the bound).
///
/// hiredis 0.14 takes a count up to 2^31 - 1 and allocates an array's pointers as its header is read (`calloc`:
/// 16 GiB for `*2000000000`), then an object per element as each arrives; `reply_too_large` sees none of it, an
/// element read being no longer unread. Checked as each array begins, before hiredis allocates for it. One per
/// reader.
class declared_elements {
public:
  /// At most `max_elements` in all, and never more than `max_reply_bytes` could carry.
  declared_elements(std::size_t max_reply_bytes, std::size_t max_elements) noexcept
      : most_(std::min(max_reply_bytes / min_element_bytes, max_elements)) {}

  /// An array of `count` elements begins at `task` (one without a parent begins a reply): true when the arrays of
  /// its reply declare no more than `max_reply_bytes` could carry with it.
  [[nodiscard]] bool admit(redisReadTask const& task, int count) noexcept;

private:
  std::size_t most_;
  std::size_t declared_ = 0; ///< by the arrays of the reply being read
};

/// hiredis's own object functions: one table, the one every reader starts with. Looked up on the first call (through
/// a reader made and freed for it), which must come before any reader's callbacks can need it.
/// @throws std::bad_alloc on the first call, when that reader cannot be made (a later call tries again)
[[nodiscard]] redisReplyObjectFunctions const& hiredis_reply_functions();

/// Makes `reader` build its replies with hiredis's own functions, but refuse an array that `elements` does not
/// admit, before anything is allocated for it: hiredis takes the refusal as out of memory, and the reader fails
/// (`redisReaderGetReply` returns `REDIS_ERR`). For a reader whose `privdata` is free: it points to `elements`,
/// which must outlive the reader's use.
void bound_arrays(redisReader& reader, declared_elements& elements);

} // namespace wandura::detail
