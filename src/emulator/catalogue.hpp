// The demo catalogue (docs/protocol.md §4: films of 1-40 episodes, `the-heiress-returns` has 12) and the open videos
// and creatives the emulator serves. Deterministic: the same on every run, whatever the seed.
#pragma once

#include "wandura/emulator/emulator.hpp"

#include <string>
#include <vector>

namespace wandura::emulator::detail {

/// "the-heiress-returns" -> "The Heiress Returns".
std::string title_from_ref(std::string_view film_ref);

/// About 50 films with 1-40 episodes each; `the-heiress-returns` (12 episodes) comes first.
std::vector<film> demo_catalogue();

/// An open (free) video.
struct open_video {
  std::string video_ref;
  std::string title;
  std::string url;
};

/// The open videos of `GET /v1/videos`.
std::vector<open_video> demo_videos();

/// An ad creative.
struct creative {
  std::string creative_id;
  std::string url;
};

/// The creatives of `GET /v1/creatives`.
std::vector<creative> demo_creatives();

} // namespace wandura::emulator::detail
