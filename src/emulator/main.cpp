// wandura-emulator: the Wandura API emulator as a command (docs/protocol.md); see wandura/emulator/command_line.hpp.
#include "wandura/emulator/command_line.hpp"

#include "cli/standard_streams.hpp"

int main(int argc, char** argv) {
  wandura::cli::hold_standard_descriptors();
  return wandura::emulator::run_command_line({argv + 1, static_cast<std::size_t>(argc - 1)}, "wandura-emulator");
}
