// A worker process of a fleet run (`smooth_playback --worker K`, started by its parent, never by hand): builds the
// run's plan from the same options as its parent, its own `wandura::client` (configured by a `wandura::fleet` with
// `--shared-state`), says `ready`, waits for the run's time 0 on stdin, plays the viewer actions routed to it
// (fleet_route.hpp) and sends its `client_run` to the parent (worker_process.hpp describes the lines).
#pragma once

#include "demo_options.hpp"

namespace demo {

/// Runs worker `*o.worker`. Returns 0 when it sent its report, 1 otherwise (the reason sent as an `error` line, or
/// on stderr when the parent is gone). Exits with the parent: it asks the kernel for SIGKILL when the parent dies.
[[nodiscard]] int run_worker(demo_options const& o);

} // namespace demo
