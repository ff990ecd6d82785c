#include "reply_size.hpp"

#include <cstring>

#include <hiredis/hiredis.h>

namespace wandura::detail {

bool reply_too_large(redisReader const& reader, std::size_t max_reply_bytes) noexcept {
  std::size_t const unread = reader.len - reader.pos;
  if (unread > max_reply_bytes) {
    return true;
  }
  if (unread <= max_reply_line_bytes || reader.ridx < 0) {
    return false;
  }
  // hiredis has read the type byte of its current item and waits for the rest (reader.pos is past the type byte).
  switch (reader.rstack[reader.ridx].type) {
  case REDIS_REPLY_STATUS:
  case REDIS_REPLY_ERROR:
  case REDIS_REPLY_INTEGER: return true; // a complete line would have been consumed: this one has no end yet
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_ARRAY: // the header line (`$<length>` or `*<count>`) must end within the bound
    return std::memchr(reader.buf + reader.pos, '\r', max_reply_line_bytes) == nullptr;
  default: return false;
  }
}

} // namespace wandura::detail
