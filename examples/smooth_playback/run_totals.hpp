// The runs of a fleet's processes as one run: what the summary table and report.json total.
#pragma once

#include <cstdint>
#include <vector>

#include "client_session.hpp"

namespace demo {

/// Counts summed, percentiles and the success rate computed over every play of every process, failures by reason
/// and outcomes summed, the first 20 failures kept; samples summed per second of the run (rates add up; the p50 and
/// p95 of each second are those of the plays of every process that completed in it). `viewers` is
/// `plan_viewers`: a viewer whose actions went to several processes counts once. One run comes back as it is.
/// @param runs not empty, all started at the same time 0.
[[nodiscard]] client_run combine_runs(std::vector<client_run> const& runs, std::uint64_t plan_viewers);

} // namespace demo
