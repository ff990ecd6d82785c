#include "reply_size.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include <hiredis/hiredis.h>

namespace wandura::detail {
namespace {

/// hiredis's own `createArray`, for a count that the reader's `declared_elements` (its privdata) admits.
void* create_bounded_array(redisReadTask const* task, int count) {
  if (!static_cast<declared_elements*>(task->privdata)->admit(*task, count)) {
    return nullptr; // taken as out of memory: the reader fails
  }
  return hiredis_reply_functions().createArray(task, count);
}

} // namespace

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

bool declared_elements::admit(redisReadTask const& task, int count) noexcept {
  if (task.parent == nullptr) {
    declared_ = 0; // a reply begins
  }
  auto const added = static_cast<std::size_t>(std::max(count, 0));
  if (added > most_ - declared_) {
    return false;
  }
  declared_ += added;
  return true;
}

redisReplyObjectFunctions const& hiredis_reply_functions() {
  // hiredis keeps its default functions in a static table that every reader points to; a reader is the only way to
  // reach it. A failed first look-up throws, and the next call tries again (the static is then still unset).
  static redisReplyObjectFunctions const* const own = [] {
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
      throw std::bad_alloc();
    }
    redisReplyObjectFunctions const* fn = reader->fn;
    redisReaderFree(reader);
    return fn;
  }();
  return *own;
}

void bound_arrays(redisReader& reader, declared_elements& elements) {
  static redisReplyObjectFunctions bounded = [] {
    redisReplyObjectFunctions functions = hiredis_reply_functions();
    functions.createArray = &create_bounded_array;
    return functions;
  }();
  reader.fn = &bounded;
  reader.privdata = &elements;
}

} // namespace wandura::detail
