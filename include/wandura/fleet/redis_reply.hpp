// wandura::redis_reply: one RESP2 reply, copied out of hiredis's `redisReply` into a plain value.
//
// Thread safety: a value type; distinct objects may be used from different threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wandura {

/// One reply of Redis (RESP2, as hiredis 0.14 reads it). Owns its bytes: it stays valid after the connection is
/// gone.
struct redis_reply {
  enum class kind {
    nil,     ///< `$-1` or `*-1`: no value (a missing key).
    status,  ///< `+OK`: `text` holds the status.
    error,   ///< `-ERR ...`: `text` holds the whole error line, e.g. "NOSCRIPT No matching script...".
    integer, ///< `:42`: `integer` holds the value.
    string,  ///< `$3 foo`: `text` holds the bytes (binary safe).
    array,   ///< `*2 ...`: `elements` holds the items in order.
  };

  kind type = kind::nil;
  std::string text;
  std::int64_t integer = 0;
  std::vector<redis_reply> elements;

  [[nodiscard]] bool is_nil() const noexcept { return type == kind::nil; }
  [[nodiscard]] bool is_error() const noexcept { return type == kind::error; }
};

} // namespace wandura
