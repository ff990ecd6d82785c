// CPU time readings the benchmarks share: the calling thread's (an event loop's alone, not the other threads of the
// process) and another process's (a server's on the same cores, which the side that uses it pays too).
#pragma once

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/types.h>
#include <unistd.h>

namespace wandura::bench {

/// CPU time of the calling thread so far, in seconds.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// CPU time (user + system) of process `pid` so far, in seconds, from /proc/<pid>/stat (clock ticks, 10 ms): read it
/// over thousands of operations. 0 when it cannot be read.
inline double process_cpu_seconds_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  auto const after_name = text.rfind(')'); // the command name may hold spaces
  if (after_name == std::string::npos) {
    return 0;
  }
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) { // utime and stime are fields 14 and 15
    if (i >= 14) {
      ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

} // namespace wandura::bench
