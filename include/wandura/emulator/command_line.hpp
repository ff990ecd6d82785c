// The emulator as a command (docs/protocol.md §4), shared by the `wandura-emulator` binary and `wandura emulator`:
//
//   PROGRAM --port 8787 [--host 127.0.0.1] [--config FILE.json] [--seed N] [--manual-clock] [--threads N]
//   PROGRAM --help | --version
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace wandura::emulator {

/// The usage text of the command, naming it `program` (e.g. "wandura-emulator" or "wandura emulator").
[[nodiscard]] std::string usage(std::string_view program);

/// Parses the flags in `args` (without the program name), starts the emulator, prints
/// `listening on http://HOST:PORT` to stdout once it accepts connections, and serves until SIGINT or SIGTERM.
/// Flags win over the configuration file. Blocks SIGINT and SIGTERM in the calling thread (and so in the server's
/// threads) and ignores SIGPIPE.
///
/// @returns 0 after a stop signal, `--help` or `--version` (the line `wandura --version` starts with), 1 when the
///          server cannot start (address in use, ...) or stdout cannot take the `listening on` line (a full disk, a
///          closed stdout: the server stops at once and stderr says why), 2 for a usage or configuration error
///          (reported on stderr, followed by the usage text).
/// @par Thread safety
/// Call from the main thread before other threads are started: it changes the process's signal handling.
int run_command_line(std::span<char* const> args, std::string_view program);

} // namespace wandura::emulator
