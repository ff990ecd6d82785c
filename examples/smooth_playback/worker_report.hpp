// What a worker process sends its parent at the end of a fleet run: its `client_run` as one line of JSON (no
// newline inside), read back by the parent. Both sides are this program, so the format is private to it.
#pragma once

#include <string>
#include <string_view>

#include "client_session.hpp"

namespace demo {

/// `run` as one line of JSON, without the trailing newline.
[[nodiscard]] std::string worker_report_json(client_run const& run);

/// Reads what `worker_report_json` wrote. `sim.started` is left default (the parent knows the run's time 0).
/// @throws std::runtime_error naming the first field missing or of the wrong type.
[[nodiscard]] client_run read_worker_report(std::string_view json);

} // namespace demo
