// The commands of the `wandura` command line. Each takes the arguments after its name and returns the exit status
// (0 success, 1 the call failed or a ticket was not granted, 2 usage error); usage errors are thrown as
// `cli::usage_error` and printed by main with a pointer to `wandura <command> --help`.
#pragma once

#include <span>

namespace wandura::cli {

/// `wandura tickets`: one ticket batch (SPEC §1 `POST /v1/playback/tickets`).
int run_tickets(std::span<char* const> args);

/// `wandura config`: the organisation's limits (`GET /v1/config`).
int run_config(std::span<char* const> args);

/// `wandura emulator`: the in-process emulator as a server, with the flags of `wandura-emulator` (SPEC §4). Built
/// only with the emulator library (WANDURA_CLI_EMULATOR).
int run_emulator(std::span<char* const> args);

} // namespace wandura::cli
