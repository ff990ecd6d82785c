#include "redis_viewer_limit.hpp"

#include <chrono>
#include <limits>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>

#include "run_on.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

asio::awaitable<viewer_limit::decision>
acquire_on_strand(std::shared_ptr<fleet_state> state, shared_viewer_limit& limit, std::string viewer_ref, int tickets) {
  auto take = limit.try_acquire(std::move(viewer_ref), tickets); // named: GCC 12 and co_await temporaries
  viewer_limit_decision const decided = co_await std::move(take);
  state->publish();
  co_return viewer_limit::decision{decided.granted, decided.retry_after, decided.taken_from};
}

asio::awaitable<void> release_on_strand(std::shared_ptr<fleet_state> state, shared_viewer_limit& limit,
                                        std::string viewer_ref, int tickets, viewer_limit::account taken_from) {
  try {
    auto give = limit.release(std::move(viewer_ref), tickets, taken_from);
    co_await std::move(give);
  } catch (std::exception const&) {
    // Cancelled with the io_context, or a viewer_ref the limit refuses: the bucket refills by itself.
  }
  state->publish();
}

int to_int(std::uint32_t tickets) {
  if (tickets > static_cast<std::uint32_t>(std::numeric_limits<int>::max())) {
    throw error(errc::invalid_argument, "viewer limit: too many tickets at once");
  }
  return static_cast<int>(tickets);
}

} // namespace

redis_viewer_limit::redis_viewer_limit(std::shared_ptr<fleet_state> state, shared_viewer_limit& limit) noexcept
    : state_(std::move(state)), limit_(limit) {}

asio::awaitable<viewer_limit::decision> redis_viewer_limit::acquire(std::string viewer_ref, std::uint32_t tickets) {
  if (tickets == 0) {
    co_return decision{true, std::chrono::milliseconds(0)};
  }
  auto on_strand = acquire_on_strand(state_, limit_, std::move(viewer_ref), to_int(tickets));
  co_return co_await run_on(state_->strand, std::move(on_strand));
}

void redis_viewer_limit::release(std::string_view viewer_ref, std::uint32_t tickets, account taken_from) noexcept {
  if (tickets == 0 || viewer_ref.empty()) {
    return;
  }
  try {
    // Detached: called where nothing can be awaited (a call's settlement, its destructor included). The coroutine
    // holds the fleet's state, so it completes after the client (and the fleet object) are gone; it is posted to
    // the strand, so it runs before any acquire this process starts after it.
    asio::co_spawn(state_->strand,
                   release_on_strand(state_, limit_, std::string(viewer_ref), to_int(tickets), taken_from),
                   asio::detached);
  } catch (std::exception const&) {
    // Out of memory: the tickets are not given back; the bucket refills by itself within a minute.
  }
}

} // namespace wandura::detail
