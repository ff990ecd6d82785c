// wandura: the command line of the Wandura SDK.
//
//   wandura tickets --film REF --episode N [...]   ask for the tickets of one batch
//   wandura config [--json]                         the organisation's limits
//   wandura emulator --port N [...]                 run the API emulator
//
// Base URL and key: --base-url/--api-key, else WANDURA_BASE_URL/WANDURA_API_KEY. Exit status 0 on success, 1 when
// a call failed or a ticket was not granted, 2 for a usage error.
#include <cstdio>
#include <exception>
#include <span>

#include "wandura/error.hpp"
#include <string_view>

#include "apps/cli.hpp"
#include "apps/commands.hpp"

namespace {

constexpr char const* main_usage =
    R"(usage: wandura <command> [options]

commands:
  tickets    ask for the tickets of one batch: episode N as play, the next ones as prefetch
  config     print the organisation's rate limits
  emulator   run the Wandura API emulator on loopback

Run "wandura <command> --help" for a command's options. The API's address and key come from --base-url and
--api-key, else from WANDURA_BASE_URL (default http://127.0.0.1:8787) and WANDURA_API_KEY.
)";

struct command {
  std::string_view name;
  int (*run)(std::span<char* const>);
};

constexpr command commands[] = {
    {"tickets", wandura::cli::run_tickets},
    {"config", wandura::cli::run_config},
#ifdef WANDURA_CLI_EMULATOR
    {"emulator", wandura::cli::run_emulator},
#endif
};

} // namespace

int main(int argc, char** argv) {
  std::span<char* const> const args(argv, static_cast<std::size_t>(argc));
  if (args.size() < 2) {
    std::fputs(main_usage, stderr);
    return wandura::cli::exit_usage;
  }
  std::string_view const name = args[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::fputs(main_usage, stdout);
    return wandura::cli::exit_ok;
  }
  for (auto const& c : commands) {
    if (c.name != name) {
      continue;
    }
    try {
      return c.run(args.subspan(2));
    } catch (wandura::cli::usage_error const& e) {
      std::fprintf(stderr, "wandura %.*s: %s\nRun \"wandura %.*s --help\" for its options.\n",
                   static_cast<int>(name.size()), name.data(), e.what(), static_cast<int>(name.size()), name.data());
      return wandura::cli::exit_usage;
    } catch (wandura::error const& e) {
      // The SDK refused an argument before sending anything (a base URL that is not http(s), ...): a usage error.
      bool const usage = e.code() == wandura::errc::invalid_argument;
      std::fprintf(stderr, "wandura %.*s: %s\n", static_cast<int>(name.size()), name.data(), e.what());
      return usage ? wandura::cli::exit_usage : wandura::cli::exit_failed;
    } catch (std::exception const& e) {
      std::fprintf(stderr, "wandura %.*s: %s\n", static_cast<int>(name.size()), name.data(), e.what());
      return wandura::cli::exit_failed;
    }
  }
#ifndef WANDURA_CLI_EMULATOR
  if (name == "emulator") {
    std::fputs("wandura: this build has no emulator (configured with WANDURA_BUILD_EMULATOR=OFF)\n", stderr);
    return wandura::cli::exit_failed;
  }
#endif
  std::fprintf(stderr, "wandura: unknown command \"%.*s\"\n\n%s", static_cast<int>(name.size()), name.data(),
               main_usage);
  return wandura::cli::exit_usage;
}
