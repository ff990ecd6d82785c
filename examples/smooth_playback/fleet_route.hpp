// Which process of a fleet run takes a viewer's action: a load balancer without affinity, so a viewer's restart or
// next binge step may land on another process than its first start.
#pragma once

#include <cstddef>
#include <cstdint>

namespace demo {

/// The process (0 to `processes` - 1) that takes step `step` of viewer `viewer`: a hash (splitmix64) of the seed,
/// the viewer and the step, so every process of a run computes the same routing without talking to the others.
/// @param processes >= 1.
[[nodiscard]] std::uint32_t process_of_action(std::uint64_t seed, std::uint32_t viewer, std::size_t step,
                                              std::uint32_t processes) noexcept;

} // namespace demo
