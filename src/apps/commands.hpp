// The commands of the `wandura` command line. Each adds its subcommand, with its options, to the `wandura`
// application and returns how to run it. Exit statuses: 0 success, 1 the call failed or a ticket was not granted,
// 2 usage error (src/cli/style.hpp).
#pragma once

#include "apps/cli.hpp"

namespace wandura::cli {

/// `wandura tickets`: one ticket batch (`POST /v1/playback/tickets`, docs/protocol.md).
command add_tickets_command(CLI::App& wandura);

/// `wandura config`: the organisation's limits (`GET /v1/config`).
command add_config_command(CLI::App& wandura);

/// `wandura emulator`: the in-process emulator as a server, with the flags of `wandura-emulator`. Built only with
/// the emulator library (WANDURA_CLI_EMULATOR).
command add_emulator_command(CLI::App& wandura);

} // namespace wandura::cli
