// Writes request bodies as JSON (docs/protocol.md §1). Not public API (wandura::detail): the client uses it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "wandura/playback/ticket.hpp"

namespace wandura::detail {

/// Appends `text` to `out` as a JSON string literal, quotes included: `"` and `\` are escaped, control characters
/// (U+0000-U+001F) become `\b \f \n \r \t` or `\u00XX`, everything else (non-ASCII included) is copied as UTF-8.
/// @pre `text` is valid UTF-8 (checked by `write_ticket_batch`; call `is_valid_utf8` first otherwise).
void append_json_string(std::string& out, std::string_view text);

/// True when `text` is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
[[nodiscard]] bool is_valid_utf8(std::string_view text) noexcept;

/// Writes the body of `POST /v1/playback/tickets` into `out` (cleared first, capacity kept and grown once, so a
/// reused string allocates nothing in the steady state):
/// `{"episodes":[{"film_ref":"...","episode_no":4,"intent":"play"},...],"union_info":"...","drm_kek":"...",
/// "viewer_ref":"..."}` (`viewer_ref` only when set).
///
/// Completes with an empty code, or with `errc::invalid_argument` and nothing usable in `out` when the batch is
/// one the server would refuse or that cannot be written: no episode or more than `ticket_batch::max_episodes`, an
/// empty `film_ref`, `episode_no` < 1, `intent::other`, an empty `union_info` or `drm_kek`, an empty `viewer_ref`
/// when one is given, or any string that is not valid UTF-8. `message`, when given, receives what was wrong, e.g.
/// "episodes[1].film_ref is not valid UTF-8".
[[nodiscard]] std::error_code write_ticket_batch(ticket_batch const& batch, std::string& out,
                                                 std::string* message = nullptr);

/// `write_ticket_batch`'s checks alone: an empty code when the batch can be written, else `errc::invalid_argument`
/// with what was wrong in `message` (when given).
[[nodiscard]] std::error_code check_ticket_batch(ticket_batch const& batch, std::string* message = nullptr);

/// Writes into `out` (replaced) the body of `POST /v1/playback/tickets` for the episodes of `batch` at the indexes
/// `episodes`, in that order, with the batch's `union_info`, `drm_kek` and `viewer_ref`: the bytes
/// `write_ticket_batch` writes for a batch of those episodes alone, without copying them into one.
/// @pre `check_ticket_batch(batch)` succeeded; `episodes` is not empty and each index is below
/// `batch.episodes.size()`.
void write_checked_ticket_batch(ticket_batch const& batch, std::span<std::size_t const> episodes, std::string& out);

} // namespace wandura::detail
