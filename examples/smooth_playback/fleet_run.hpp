// The demo as a fleet (`--processes N`, `--shared-state`): one in-process emulator, N worker processes each with
// its own client against it (worker.hpp), every viewer action routed to one of them as a load balancer without
// affinity would (fleet_route.hpp), their results gathered and totalled (docs/demo.md "A fleet of processes").
#pragma once

#include "demo_options.hpp"

namespace demo {

/// Runs the fleet and reports as `finish_run` does, with the fleet's fields. Returns the exit status (0 or 1).
/// @throws std::runtime_error when a worker cannot be started, fails, dies or does not finish in time (the others
///         are killed and reaped first), or when `--shared-state auto` finds no redis-server.
[[nodiscard]] int run_fleet(demo_options const& o);

} // namespace demo
