// The client's `viewer_limit` over the fleet's `shared_viewer_limit`: one per-viewer ticket limit for every process
// of a fleet, held in Redis (docs/adr/0008). Not public API: `fleet::configure` sets it as
// `client_options::viewer_limit`.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "fleet_state.hpp"
#include "wandura/playback/viewer_limit.hpp"

namespace wandura::detail {

/// A `viewer_limit` whose buckets live in Redis under `wandura:{org}:viewer:<N>pm-b<B>:<viewer_ref>` (one per viewer
/// and rate: `fleet_keys::viewer`); one script round trip per decision. When Redis is slow, down or failing,
/// decisions come from a local bucket per viewer at the same rate within the command timeout (degrade, never block):
/// `account::primary` is the bucket in Redis, `account::fallback` the local one, and a give-back goes to the one
/// its tickets were taken from.
///
/// @par Thread safety
/// Any thread, any executor: `acquire` hops to the fleet's strand and completes back on the caller's executor;
/// `release` starts a give-back on the strand (holding the fleet's state, so it completes after the client is
/// gone too) and returns.
/// @par Cancellation
/// `acquire`: through the awaiting coroutine's cancellation slot, by throwing `wandura::error` with
/// `operation_aborted`; a script already sent still runs, and when it took tickets they are given back as its
/// reply comes (`shared_viewer_limit::try_acquire`).
class redis_viewer_limit final : public viewer_limit {
public:
  /// @param limit one of `state`'s limits (`fleet_state::viewer_limit_for`).
  redis_viewer_limit(std::shared_ptr<fleet_state> state, shared_viewer_limit& limit) noexcept;

  [[nodiscard]] asio::awaitable<decision> acquire(std::string viewer_ref, std::uint32_t tickets) override;
  void release(std::string_view viewer_ref, std::uint32_t tickets, account taken_from) noexcept override;

private:
  std::shared_ptr<fleet_state> state_;
  shared_viewer_limit& limit_;
};

} // namespace wandura::detail
