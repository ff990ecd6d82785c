// The demo's in-process emulator: started with the run's limit and seed, its playback counter spent down by a
// warm-up before the first viewer, then its scripted 503s installed (docs/demo.md "The server").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include <asio/awaitable.hpp>

#include "audience.hpp"
#include "demo_options.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/playback/client.hpp"

namespace demo {

/// Starts the emulator on an ephemeral loopback port with `plan.limit`, the seed and, for `--catalogue`, its films.
[[nodiscard]] std::unique_ptr<wandura::emulator::server> start_emulator(demo_options const& o, run_plan const& plan);

/// Spends the in-process emulator's playback counter down to `left` of its limit with batches of three plays for
/// throw-away devices (no viewer_ref: nothing reused). Returns the tickets received.
/// @throws std::runtime_error when a batch gets no fresh ticket (the counter would never go down).
[[nodiscard]] asio::awaitable<std::uint64_t> warm_up(wandura::client& api, wandura::emulator::server& emu,
                                                     catalogue_film film, double limit_per_min, double left,
                                                     std::chrono::steady_clock::time_point emulator_started);

/// SPEC §2 "a ticket cannot be issued in time": `probability` of ticket requests answered 503 with Retry-After: 1.
/// Installed after the warm-up, so only viewers meet it. Nothing for 0.
void script_unavailable(wandura::emulator::server& emu, double probability);

} // namespace demo
