// The level of a log line the demo relays: the SDK's retry log gives it apart, the fleet's fallback log
// (`fallback_options::log`) writes it as the line's first word (`INFO fleet ticket_cache: redis ... is back`). A
// worker sends each line to its parent as `log LEVEL text`; the parent prints `LEVEL worker K: text`.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "wandura/resilience/retry_event.hpp"

namespace demo {

/// `DEBUG`, `INFO`, `WARN` or `ERROR`.
[[nodiscard]] inline std::string_view level_name(wandura::log_level level) noexcept {
  constexpr std::array<std::string_view, 4> names{"DEBUG", "INFO", "WARN", "ERROR"};
  return names[static_cast<std::size_t>(level)];
}

/// The level `level_name` gives that name; nullopt for other text.
[[nodiscard]] inline std::optional<wandura::log_level> level_from_name(std::string_view name) noexcept {
  for (auto const level :
       {wandura::log_level::debug, wandura::log_level::info, wandura::log_level::warn, wandura::log_level::error}) {
    if (name == level_name(level)) {
      return level;
    }
  }
  return std::nullopt;
}

/// A line and its level.
struct log_line {
  wandura::log_level level;
  std::string_view text; ///< Without the level; a view into the line given to `split_level`.
};

/// The level a line starts with (`WARN fleet ...`: warn, `fleet ...`) and the rest; a line that starts with no level
/// name and a space is `otherwise`, whole.
[[nodiscard]] inline log_line split_level(std::string_view line, wandura::log_level otherwise) noexcept {
  auto const space = line.find(' ');
  if (space != std::string_view::npos) {
    if (auto const level = level_from_name(line.substr(0, space))) {
      return {*level, line.substr(space + 1)};
    }
  }
  return {otherwise, line};
}

} // namespace demo
