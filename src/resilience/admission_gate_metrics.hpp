// The text of `admission_gate::metrics_text()`, written from statistics alone so that the text of any statistics
// can be checked. Not public API.
#pragma once

#include <string>
#include <vector>

#include "wandura/resilience/admission_gate.hpp"

namespace wandura::detail {

/// `stats` (as `admission_gate::stats()` reads them) in the Prometheus text exposition format 0.0.4, as
/// `admission_gate::metrics_text()` writes them: `wandura_gate_*` families with a `counter` label.
[[nodiscard]] std::string admission_gate_metrics_text(std::vector<admission_counter_stats> const& stats);

} // namespace wandura::detail
