// `wandura emulator`: the Wandura API emulator as a server, with exactly the flags of the `wandura-emulator`
// binary; both run wandura::emulator::run_command_line, which parses them.
#include <vector>

#include "apps/commands.hpp"
#include "wandura/emulator/command_line.hpp"

namespace wandura::cli {

command add_emulator_command(CLI::App& wandura) {
  auto* app =
      add_command(wandura, "emulator", "run the Wandura API emulator (on loopback unless --host says otherwise)", "");
  // Every argument after `emulator`, --help included, goes to the emulator's own command line.
  app->prefix_command();
  app->set_help_flag();
  return {app, [app] {
            std::vector<std::string> args = app->remaining();
            std::vector<char*> argv;
            argv.reserve(args.size());
            for (auto& a : args) {
              argv.push_back(a.data());
            }
            return wandura::emulator::run_command_line(argv, "wandura emulator");
          }};
}

} // namespace wandura::cli
