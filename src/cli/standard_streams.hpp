// What every command line of the project (`wandura`, `wandura-emulator`) does with its standard streams: a closed
// one is held on /dev/null before anything else opens a descriptor, and output that stdout could not take fails the
// run. Header-only, built into the programs, never installed.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace wandura::cli {

/// Holds each of stdin, stdout and stderr that was closed open on /dev/null, for reading only. Left closed, its
/// number would go to the first socket or eventfd opened, and the output meant for the user would be written into
/// it (a connection to the API, or one a server accepted, included); read-only, a write to it fails and
/// `flush_stdout` reports it. Call first thing in main, before any descriptor is opened.
inline void hold_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int const held = ::open("/dev/null", O_RDONLY); // the lowest free number: fd itself
      if (held != fd && held >= 0) {
        ::close(held);
      }
    }
  }
}

/// Flushes stdout and returns true when everything written to it so far was taken. Otherwise (stdout closed, a full
/// disk, a reader gone) prints `PROGRAM: cannot write the output to stdout: REASON` on stderr and returns false: a
/// caller, a script reading the output among them, must never take a truncated or lost output for a success.
/// A failure is reported once: a later call checks only what was written after it.
[[nodiscard]] inline bool flush_stdout(std::string_view program) {
  errno = 0;
  bool const flushed = std::fflush(stdout) == 0;
  if (flushed && std::ferror(stdout) == 0) {
    return true;
  }
  int const err = errno;
  std::fprintf(stderr, "%.*s: cannot write the output to stdout: %s\n", static_cast<int>(program.size()),
               program.data(), err != 0 ? std::strerror(err) : "a write failed");
  std::clearerr(stdout); // glibc has dropped what the failed write held: a later check sees only later output
  return false;
}

} // namespace wandura::cli
