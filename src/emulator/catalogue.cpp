#include "emulator/catalogue.hpp"

#include <array>
#include <cstdint>
#include <set>

namespace wandura::emulator::detail {

std::string title_from_ref(std::string_view film_ref) {
  std::string title;
  bool start = true;
  for (char c : film_ref) {
    if (c == '-' || c == '_') {
      title.push_back(' ');
      start = true;
    } else {
      title.push_back(start && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
      start = false;
    }
  }
  return title;
}

std::vector<film> demo_catalogue() {
  static constexpr std::array<std::string_view, 10> first = {
      "the-heiress", "midnight", "crimson", "the-last", "silent", "golden", "broken", "secret", "eternal", "forbidden"};
  static constexpr std::array<std::string_view, 10> second = {"returns", "vows",    "empire", "letters", "harbour",
                                                              "promise", "dynasty", "garden", "verdict", "crown"};
  std::vector<film> films;
  films.push_back({"the-heiress-returns", "The Heiress Returns", 12, true});
  std::set<std::string> seen{"the-heiress-returns"};
  // A fixed linear congruential sequence: deterministic, independent of the emulator's seed.
  std::uint32_t state = 20261130u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  while (films.size() < 50) {
    // Built with append: GCC 12 at -O3 reports a false -Wrestrict for `string + "-" + string` here.
    std::string ref;
    ref.append(first[next() % first.size()]).append("-").append(second[next() % second.size()]);
    if (!seen.insert(ref).second) {
      ref.append("-").append(std::to_string(films.size()));
      seen.insert(ref);
    }
    auto episodes = 1 + next() % 40;
    films.push_back({ref, title_from_ref(ref), episodes, true});
  }
  return films;
}

std::vector<open_video> demo_videos() {
  std::vector<open_video> videos;
  static constexpr std::array<std::string_view, 8> refs = {"trailer-heiress",  "behind-the-scenes", "cast-interview",
                                                           "recap-season-one", "sneak-peek",        "bloopers",
                                                           "music-video",      "making-of"};
  for (auto ref : refs) {
    std::string url = "https://cdn.wandura.example/open/";
    url.append(ref).append("/master.m3u8");
    videos.push_back({std::string(ref), title_from_ref(ref), std::move(url)});
  }
  return videos;
}

std::vector<creative> demo_creatives() {
  std::vector<creative> creatives;
  for (int i = 1; i <= 6; ++i) {
    auto id = "crv_" + std::to_string(1000 + i);
    creatives.push_back({id, "https://ads.wandura.example/creatives/" + id + ".mp4"});
  }
  return creatives;
}

} // namespace wandura::emulator::detail

namespace wandura::emulator {

std::vector<film> demo_catalogue() {
  return detail::demo_catalogue();
}

} // namespace wandura::emulator
