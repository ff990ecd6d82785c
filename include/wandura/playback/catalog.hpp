// Values returned by the read endpoints of docs/protocol.md §1: `GET /v1/config` (`org_config`), `GET
// /v1/catalog/films/{ref}`
// (`film`), `GET /v1/videos` and `GET /v1/videos/{ref}` (`video`), `GET /v1/creatives` (`creative`).
//
// Readers of these bodies are tolerant (docs/protocol.md §3): unknown fields are ignored and
// optional fields may be absent; only the identifying field of each object is required.
//
// Thread safety: plain values; distinct objects may be used from distinct threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wandura {

/// One rate-limit counter's limit for the organisation (docs/protocol.md §2).
struct counter_limit {
  /// The counter: "playback", "catalog", "creatives", "videos", "video", "config", or a newer one kept as text.
  std::string counter;
  /// Units per 60-second window: tickets for `playback`, requests for the others. Non-negative.
  std::int64_t per_minute = 0;

  friend bool operator==(counter_limit const&, counter_limit const&) = default;
};

/// `GET /v1/config`: `{"org_id":"org_demo","limits":{"playback":6000,"catalog":1200,...}}`.
struct org_config {
  std::string org_id; ///< May be empty when the server omits it.
  /// In the server's order, each counter once: one the server names twice is where it first named it, with the
  /// last value.
  std::vector<counter_limit> limits;

  /// The limit of `counter`, or nullopt when the server did not list it.
  [[nodiscard]] std::optional<std::int64_t> limit(std::string_view counter) const noexcept {
    for (auto const& l : limits) {
      if (l.counter == counter) {
        return l.per_minute;
      }
    }
    return std::nullopt;
  }

  friend bool operator==(org_config const&, org_config const&) = default;
};

/// `GET /v1/catalog/films/{film_ref}`: `{"film_ref":"...","title":"...","episodes":12}`. `episodes` may also be a
/// list with one object or number per episode (an element of another type fails the read, `errc::invalid_response`);
/// its length is then the count. As for every optional field, null reads as absent.
struct film {
  std::string film_ref;           ///< Required.
  std::string title;              ///< May be empty.
  std::int32_t episode_count = 0; ///< Released episodes, numbered 1..episode_count.

  friend bool operator==(film const&, film const&) = default;
};

/// One open video: an element of `GET /v1/videos` `{"videos":[...]}`, or the body of `GET /v1/videos/{video_ref}`:
/// `{"video_ref":"...","title":"...","url":"..."}`.
struct video {
  std::string video_ref; ///< Required.
  std::string title;     ///< May be empty.
  std::string url;       ///< May be empty.

  friend bool operator==(video const&, video const&) = default;
};

/// One element of `GET /v1/creatives` `{"creatives":[{"creative_id":"...","url":"..."}]}`.
struct creative {
  std::string creative_id; ///< Required.
  std::string url;         ///< May be empty.

  friend bool operator==(creative const&, creative const&) = default;
};

} // namespace wandura
