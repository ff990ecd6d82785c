// What a backend asks for and what it gets back for one episode: `intent`, `episode_request`, `ticket_batch`
// (the body of `POST /v1/playback/tickets`, docs/protocol.md §1) and `ticket` (one granted playback ticket).
//
// Thread safety: plain values; distinct objects may be used from distinct threads, one object from one thread at a
// time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wandura {

/// Why an episode's ticket is wanted (docs/protocol.md §1 `intent`; docs/protocol.md §3).
///
/// The server grants `play` even when it is close to its limit and may hold it up to ~0.5 s; `prefetch` is refused
/// first ("prefetch_shed") and never held. A response may carry a value this SDK does not know yet: it reads as
/// `other`, and the raw text is kept next to it (`ticket_item_result::intent_text`), per the tolerant-reader rule of
/// docs/protocol.md §3.
enum class intent : std::uint8_t {
  play = 0,     ///< The viewer pressed play on this episode: "play" on the wire.
  prefetch = 1, ///< An episode the viewer will probably watch next: "prefetch" on the wire.
  other = 2,    ///< A value the server sent that this SDK does not know. Never sent by the SDK.
};

/// The wire text of `i`: "play", "prefetch"; "other" for `intent::other` (which is never written to a request).
[[nodiscard]] constexpr std::string_view to_string(intent i) noexcept {
  switch (i) {
  case intent::play: return "play";
  case intent::prefetch: return "prefetch";
  case intent::other: break;
  }
  return "other";
}

/// Reads the wire text of an intent: "play" and "prefetch" (exact, case-sensitive); anything else is
/// `intent::other`.
[[nodiscard]] constexpr intent intent_from_string(std::string_view text) noexcept {
  if (text == "play") {
    return intent::play;
  }
  if (text == "prefetch") {
    return intent::prefetch;
  }
  return intent::other;
}

/// One episode of a ticket batch: `{"film_ref":..., "episode_no":..., "intent":...}` on the wire.
struct episode_request {
  /// The film's catalog reference, e.g. "the-heiress-returns". Must not be empty. UTF-8.
  std::string film_ref;
  /// Episode number, 1-based. Must be >= 1.
  std::int32_t episode_no = 1;
  /// `play` or `prefetch`; `other` is refused before sending (`errc::invalid_argument`).
  wandura::intent intent = wandura::intent::play;

  friend bool operator==(episode_request const&, episode_request const&) = default;
};

/// The body of `POST /v1/playback/tickets` (docs/protocol.md §1).
///
/// Every string is UTF-8; the SDK escapes it on the wire and refuses invalid UTF-8 with `errc::invalid_argument`
/// before anything is sent.
struct ticket_batch {
  /// At most `max_episodes` items (more is refused before sending with `errc::invalid_argument`; the server would
  /// answer `400 invalid_request`). At least one.
  std::vector<episode_request> episodes;
  /// The device id from the player SDK. Required (non-empty). Tickets are bound to it and never reused across
  /// devices (docs/protocol.md §3).
  std::string union_info;
  /// The device public key from the player SDK. Required (non-empty).
  std::string drm_kek;
  /// A stable, non-personal viewer id (see `make_viewer_ref`). Optional: without it neither the server nor the SDK
  /// reuses tickets. When set it must not be empty (refused before sending with `errc::invalid_argument`: leave it
  /// unset instead); `viewer::viewer_ref`, for `client::start_episode`, takes an empty one for none.
  std::optional<std::string> viewer_ref;

  /// The most episodes one request may carry (docs/protocol.md §1).
  static constexpr std::size_t max_episodes = 3;

  friend bool operator==(ticket_batch const&, ticket_batch const&) = default;
};

/// One granted playback ticket (docs/protocol.md §1 `items[].ticket`). Bound to the device (`union_info`) it was issued
/// for.
struct ticket {
  std::string ticket_id;    ///< e.g. "tkt_..."; never empty in a parsed ticket.
  std::string manifest_url; ///< Where the player fetches the stream manifest.
  std::string license_url;  ///< Where the player fetches the DRM licence.
  /// When the ticket stops working, from `expires_at` (RFC 3339, any offset, normalised to UTC). The SDK reuses a
  /// ticket only until 5 minutes before this instant (docs/protocol.md §3). A ticket is reported as the server
  /// granted it even when this instant has passed by the local clock (the server's clock decides; a local clock
  /// ahead of it would otherwise turn every grant into an error); such a ticket is not kept for reuse.
  std::chrono::system_clock::time_point expires_at{};
  std::string expires_at_text; ///< `expires_at` exactly as the server wrote it, e.g. "2026-11-30T11:00:00Z".
  std::string drm_payload;     ///< Opaque DRM data for the player; passed through unchanged.

  friend bool operator==(ticket const&, ticket const&) = default;
};

/// Parses an RFC 3339 date-time ("2026-11-30T11:00:00Z", "2026-11-30T12:00:00.250+01:00"; 'T'/'t' or ' ' as the
/// separator, 'Z'/'z' or a numeric offset) into a UTC time point. Fractional seconds are kept to the clock's
/// precision. Returns nullopt for anything else, including out-of-range fields (month 13, 31 April, hour 24) and
/// trailing text, and instants outside `system_clock`'s range (years 1678-2262 with GCC's nanosecond clock). A leap
/// second (:60) reads as second :59 (system_clock has no leap seconds).
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) noexcept;

} // namespace wandura
