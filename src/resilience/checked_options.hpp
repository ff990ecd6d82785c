// The checks a retry engine and an admission gate make of their options, callable before either exists: a client
// refuses its options before it makes its transport.
#pragma once

#include "wandura/resilience/admission_gate.hpp"
#include "wandura/resilience/retry_engine.hpp"

namespace wandura::detail {

/// `options` with its durations over 100 years taken as 100 years.
/// @throws wandura::error `errc::invalid_argument` naming the first field outside its range (admission_gate.hpp).
[[nodiscard]] admission_gate_options checked_admission_options(admission_gate_options options);

/// `options` once its policy, budget and admission options are checked (retry_engine.hpp, the constructor).
/// @throws wandura::error `errc::invalid_argument` naming what it refuses.
[[nodiscard]] retry_options checked_retry_options(retry_options options);

} // namespace wandura::detail
