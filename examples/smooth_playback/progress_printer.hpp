// The live progress line: redrawn in place on a terminal, one line every 5 s otherwise (CI logs).
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "simulation.hpp"

namespace demo {

/// @par Thread safety
/// Every member may be called from any thread.
class progress_printer {
public:
  explicit progress_printer(bool tty) : tty_(tty) {}

  void update(progress const& p) {
    std::lock_guard lock(mutex_);
    if (!tty_ && p.t_s < next_line_s_) {
      return;
    }
    next_line_s_ = p.t_s + 5;
    char line[200];
    std::snprintf(
        line, sizeof line, "t=%5.1fs  viewers %llu/%llu  plays ok %llu/%llu  tickets/s %5.0f  retries %llu  shed %llu",
        p.t_s, static_cast<unsigned long long>(p.viewers_started), static_cast<unsigned long long>(p.viewers),
        static_cast<unsigned long long>(p.plays_done - p.play_failures), static_cast<unsigned long long>(p.plays_done),
        p.tickets_per_s, static_cast<unsigned long long>(p.retries), static_cast<unsigned long long>(p.shed));
    if (tty_) {
      std::printf("\r\033[K%s", line);
    } else {
      std::printf("%s\n", line);
    }
    std::fflush(stdout);
    drawn_ = tty_;
  }

  /// Prints `text` as its own line, above the progress line on a terminal.
  void note(std::string const& text) {
    std::lock_guard lock(mutex_);
    if (drawn_) {
      std::printf("\r\033[K");
    }
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }

  void finish() {
    std::lock_guard lock(mutex_);
    if (drawn_) {
      std::printf("\n");
      drawn_ = false;
    }
  }

private:
  std::mutex mutex_;
  bool tty_;
  bool drawn_ = false;
  double next_line_s_ = 0;
};

} // namespace demo
