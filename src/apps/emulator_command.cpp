// `wandura emulator`: the Wandura API emulator as a server, with exactly the flags of the `wandura-emulator` binary
// (SPEC §4); both run wandura::emulator::run_command_line.
#include "apps/commands.hpp"
#include "wandura/emulator/command_line.hpp"

namespace wandura::cli {

int run_emulator(std::span<char* const> args) {
  return wandura::emulator::run_command_line(args, "wandura emulator");
}

} // namespace wandura::cli
