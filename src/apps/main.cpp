// wandura: the command line of the Wandura SDK.
//
//   wandura tickets --film REF --episode N [...]   ask for the tickets of one batch
//   wandura config [--json]                         the organisation's limits
//   wandura emulator --port N [...]                 run the API emulator
//   wandura --version                               the SDK's version and the libcurl and OpenSSL it runs with
//
// Base URL and key: --base-url/--api-key, else WANDURA_BASE_URL/WANDURA_API_KEY. Exit status 0 on success, 1 when
// a call failed, a ticket was not granted or stdout could not take the output, 2 for a usage error.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "cli/standard_streams.hpp"
#include "wandura/error.hpp"

namespace {

using namespace wandura::cli;

/// Runs the command the command line selected, reporting what it throws in the shared style.
int run(command const& c) {
  std::string const name = full_name(*c.app);
  try {
    return c.run();
  } catch (usage_error const& e) {
    return report_usage_error(name, e.what());
  } catch (wandura::error const& e) {
    // The SDK refused an argument before sending anything (a base URL that is not http(s), ...): a usage error.
    if (e.code() == wandura::errc::invalid_argument) {
      return report_usage_error(name, e.what());
    }
    std::fprintf(stderr, "%s: %s\n", name.c_str(), wandura::detail::printable(e.what(), whole_line).c_str());
    return exit_failed;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), wandura::detail::printable(e.what(), whole_line).c_str());
    return exit_failed;
  }
}

/// `status`, or exit_failed when stdout could not take the output (`cli::flush_stdout`).
int output_status(int status) {
  return flush_stdout("wandura") || status != exit_ok ? status : exit_failed;
}

/// Everything main does but the check of the output.
int run_main(int argc, char** argv) {
  CLI::App app("The command line of the Wandura SDK: ask for playback tickets, read the organisation's limits, run "
               "the API emulator.",
               "wandura");
  apply_style(app, "Run \"wandura <command> --help\" for a command's options. The API's address and key come from "
                   "--base-url and --api-key,\nelse from WANDURA_BASE_URL (default http://127.0.0.1:8787) and "
                   "WANDURA_API_KEY.\nExit status: 0 on success, 1 when a call failed, a ticket was not granted or the "
                   "output could not be written,\n2 for a usage error.");
  app.set_version_flag("--version", version_text(), "print the versions of wandura, libcurl and OpenSSL and exit");
  app.require_subcommand(1);
  std::vector<command> commands{add_tickets_command(app), add_config_command(app)};
#ifdef WANDURA_CLI_EMULATOR
  commands.push_back(add_emulator_command(app));
#endif

  refuse_options_as_values(app);

  std::span<char* const> args(argv + 1, static_cast<std::size_t>(argc - 1));
#ifndef WANDURA_CLI_EMULATOR
  if (!args.empty() && std::string_view(args[0]) == "emulator") {
    std::fputs("wandura: this build has no emulator (configured with WANDURA_BUILD_EMULATOR=OFF)\n", stderr);
    return exit_failed;
  }
#endif
  auto const known = [&commands](std::string_view name) {
    return std::any_of(commands.begin(), commands.end(), [&](command const& c) { return c.app->get_name() == name; });
  };
  // A first word that is no option and no command: said so, as `help` says it, rather than as an argument.
  if (!args.empty() && args[0][0] != '-' && std::string_view(args[0]) != "help" && !known(args[0])) {
    return report_usage_error("wandura", "no command named \"" + std::string(args[0]) + "\"");
  }
  // `wandura help` as `wandura --help`, and `wandura help COMMAND` as `wandura COMMAND --help`.
  std::string help_flag = "--help";
  std::vector<char*> help_args;
  if (!args.empty() && std::string_view(args[0]) == "help") {
    if (args.size() == 1) {
      std::fputs(app.help().c_str(), stdout);
      return exit_ok;
    }
    if (!known(args[1])) {
      return report_usage_error("wandura", "help: no command named \"" + std::string(args[1]) + "\"");
    }
    if (args.size() > 2) {
      return report_usage_error("wandura", "help: one command name only, got \"" + std::string(args[2]) + "\" too");
    }
    help_args = {args[1], help_flag.data()};
    args = help_args;
  }
  if (auto const done = parse(app, args)) {
    return *done;
  }
  for (auto const& c : commands) {
    if (c.app->parsed()) {
      return run(c);
    }
  }
  return report_usage_error("wandura", "no command given");
}

} // namespace

int main(int argc, char** argv) {
  hold_standard_descriptors();
  std::signal(SIGPIPE, SIG_IGN); // a TLS write to a closed connection fails with EPIPE instead (transport.hpp, Signals)
  return output_status(run_main(argc, argv));
}
