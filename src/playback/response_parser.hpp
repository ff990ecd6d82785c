// Readers of the API's JSON bodies (docs/protocol.md §1), built on simdjson On Demand.
//
// Not public API (wandura::detail): the client uses it, and so do its benchmark and tests. The scanning helpers
// are in json_scan.hpp; the ticket batch reader in ticket_batch_reader.cpp, the typed reads in typed_reads_reader.cpp.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <simdjson.h>

#include "wandura/playback/catalog.hpp"
#include "wandura/playback/ticket_result.hpp"
#include "wandura/transport/http_response.hpp"

namespace wandura::detail {

static_assert(wandura::body_padding == simdjson::SIMDJSON_PADDING,
              "response_body must keep exactly the slack simdjson reads past the end of a document");

/// Reads response bodies into typed values in one pass.
///
/// Each `parse_*` function reads the body once with simdjson On Demand, dispatching on each key with a `switch`;
/// unknown keys are skipped, unknown enum values keep their raw text, `null` reads as "absent" for optional fields.
/// Keys are matched in place; one spelled with escapes (the API never escapes its keys) is unescaped first and
/// means what it spells. Strings are copied into the output before the function returns, so the output never points
/// into the parser or the body. On success the output is fully replaced; on failure its content is unspecified. Passing
/// the same output object again reuses its storage (strings, items, tickets), so that a steady stream of responses is
/// read without allocating.
///
/// Every function completes with an empty `std::error_code` or with `errc::invalid_response`, and then
/// `message()` says what was wrong ("truncated or malformed JSON (...)", "not a JSON object", "items[1]: missing
/// status", "items[0]: episode_no out of range", ...). No exception escapes: simdjson is used through its error-code
/// API only; only `std::bad_alloc` can propagate.
///
/// A key repeated within one object (RFC 8259 leaves its meaning open): the last one counts, for every field, a
/// list (`items`, `videos`, `creatives`), the `limits` object and a counter named twice within it alike.
///
/// Bodies passed as `response_body` are parsed in place (its padding is what simdjson needs). Bodies passed as a
/// `std::string_view` are first copied into a reused padded scratch buffer.
///
/// @par Thread safety
/// One `response_parser` per thread or coroutine: a parser keeps its simdjson buffers for reuse and must not be
/// used by two callers at once. Distinct parsers are independent.
class response_parser {
public:
  response_parser() = default;
  response_parser(response_parser const&) = delete;
  response_parser& operator=(response_parser const&) = delete;
  response_parser(response_parser&&) noexcept = default;
  response_parser& operator=(response_parser&&) noexcept = default;
  ~response_parser() = default;

  /// The body of `POST /v1/playback/tickets` (any status): `request_id` and `items` (required; may be empty).
  /// Each item needs `film_ref` (string), `episode_no` (1..2^31-1), `intent` (string), `status` (100..599); a 2xx
  /// item needs a `ticket` with a non-empty `ticket_id` and an RFC 3339 `expires_at`. `retry_after` must be a
  /// number of seconds in [0, 10^7] (fractions round up). `outcome` and `error` come from `classify_item`.
  /// An item that breaks these rules fails alone (`unreadable_item_code`, with `detail`); the body fails as a whole
  /// only when it is not valid JSON, not an object, or has no `items` array (or `request_id` is not a string).
  /// `http_status`, `attempts` and `replayed` are left for the caller, which knows them.
  [[nodiscard]] std::error_code parse_ticket_batch(response_body const& body, ticket_batch_result& out);
  [[nodiscard]] std::error_code parse_ticket_batch(std::string_view body, ticket_batch_result& out);

  /// `GET /v1/config`: `{"org_id":"...","limits":{"<counter>":<non-negative integer>,...}}`.
  [[nodiscard]] std::error_code parse_org_config(response_body const& body, org_config& out);
  [[nodiscard]] std::error_code parse_org_config(std::string_view body, org_config& out);

  /// `GET /v1/catalog/films/{film_ref}`: `{"film_ref":"...","title":"...","episodes":12}` (`episodes` may be a
  /// list, counted). `film_ref` required.
  [[nodiscard]] std::error_code parse_film(response_body const& body, film& out);
  [[nodiscard]] std::error_code parse_film(std::string_view body, film& out);

  /// `GET /v1/videos`: `{"videos":[{"video_ref":"...","title":"...","url":"..."},...]}`.
  [[nodiscard]] std::error_code parse_videos(response_body const& body, std::vector<video>& out);
  [[nodiscard]] std::error_code parse_videos(std::string_view body, std::vector<video>& out);

  /// `GET /v1/videos/{video_ref}`: one video object.
  [[nodiscard]] std::error_code parse_video(response_body const& body, video& out);
  [[nodiscard]] std::error_code parse_video(std::string_view body, video& out);

  /// `GET /v1/creatives`: `{"creatives":[{"creative_id":"...","url":"..."},...]}`; an integer `creative_id` is
  /// kept as its decimal text.
  [[nodiscard]] std::error_code parse_creatives(response_body const& body, std::vector<creative>& out);
  [[nodiscard]] std::error_code parse_creatives(std::string_view body, std::vector<creative>& out);

  /// What the last failed call found wrong; empty after a success.
  [[nodiscard]] std::string const& message() const noexcept { return message_; }

private:
  static simdjson::padded_string_view padded(response_body const& body) noexcept;
  simdjson::padded_string_view padded(std::string_view body);
  std::error_code read_ticket_batch(simdjson::padded_string_view json, ticket_batch_result& out);
  std::error_code read_org_config(simdjson::padded_string_view json, org_config& out);
  std::error_code read_film(simdjson::padded_string_view json, film& out);
  std::error_code read_videos(simdjson::padded_string_view json, std::vector<video>& out);
  std::error_code read_video(simdjson::padded_string_view json, video& out);
  std::error_code read_creatives(simdjson::padded_string_view json, std::vector<creative>& out);

  simdjson::ondemand::parser parser_;
  std::string scratch_;
  std::string message_;
  std::vector<ticket> spare_tickets_; // storage of tickets dropped from reused results, for the next ones
};

} // namespace wandura::detail
