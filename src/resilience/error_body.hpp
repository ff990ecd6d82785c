// The flat error body of the Wandura API (docs/protocol.md §1 "Errors"):
// `{"error":"<human text>","error_code":"<code>","reason":"<optional>","request_id":"req_..."}`.
// The retry loop needs `error_code` (a string, or a number as in docs/protocol.md §3 code table) and `reason`; the
// human text and the request id go into `wandura::error_info` for the caller.
//
// Thread safety: pure function; uses a thread-local simdjson parser (no suspension happens while it is in use).
#pragma once

#include <string>

#include "wandura/transport/http_response.hpp"

namespace wandura::detail {

struct error_body {
  std::string error_code; ///< `error_code` as text: `"not_ready"` stays `not_ready`, `50200` becomes `50200`.
  std::string reason;     ///< `reason`, e.g. `prefetch_shed`; empty when absent.
  std::string message;    ///< `error`, the human text; empty when absent.
  std::string request_id; ///< `request_id`; empty when absent.
};

/// Reads the top-level fields of an error body with simdjson On Demand, straight from the padded buffer.
/// Tolerant: unknown fields are ignored, fields of the wrong type are skipped, a body that is not a JSON object
/// (empty, HTML, an array) gives an all-empty result, and a malformed or truncated object gives the fields read
/// before the damage, if any. Never throws a simdjson exception.
[[nodiscard]] error_body parse_error_body(response_body const& body);

} // namespace wandura::detail
