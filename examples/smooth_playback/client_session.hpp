// One process's client for the demo: a `wandura::client` on its own io_context and threads, sending through a
// `counting_sender`, optionally configured by a `wandura::fleet` (shared state through Redis), and the run of an
// audience through it with the client's own counts taken before and after. The single-process demo and each worker
// process of a fleet run use it the same way.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include "audience.hpp"
#include "counting_sender.hpp"
#include "simulation.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/resilience/retry_event.hpp"

namespace demo {

/// What one client (one process) did while the viewers ran.
struct client_run {
  /// The viewers' side; `sim.totals` also holds the client's own counts (cache hits, retries, requests, play items
  /// sent and answered 429...).
  simulation_result sim;
  std::uint64_t calls = 0;      ///< `issue_tickets` calls (the client's metrics).
  std::uint64_t held_off = 0;   ///< Requests that queued at the admission gate.
  std::uint64_t warn_lines = 0; ///< WARN lines the SDK logged.
  /// Tickets this process reused that another process had issued (`wandura::fleet_stats`); 0 without shared state.
  std::uint64_t cross_process_reuse = 0;
  /// Shared-state operations answered from local state because Redis was slow, down or failing.
  std::uint64_t shared_state_fallbacks = 0;
};

struct client_session_options {
  std::string base_url;
  std::string api_key;
  unsigned threads = 2;
  /// `redis://...`: the client is configured by a `wandura::fleet` on this Redis; empty: no shared state.
  std::optional<std::string> shared_state;
  /// This process's name in the shared state (`fleet_options::process_id`).
  std::string process_id;
  /// Called with each WARN line of the SDK's retry loop and each line of the fleet's fallback log (INFO when a part
  /// of the shared state is back, WARN when it fails; the level apart, log_line.hpp), from any thread; must be
  /// thread-safe.
  std::function<void(wandura::log_level, std::string_view)> on_log;
};

/// @par Thread safety
/// `run` and `play` block the calling thread, which must not be one of the session's own.
class client_session {
public:
  /// Starts the threads and builds the client (and the fleet). @throws wandura::error as `wandura::client` and
  /// `wandura::fleet` do for bad options; std::runtime_error when shared state is asked of a build without the
  /// fleet layer.
  explicit client_session(client_session_options options);
  client_session(client_session const&) = delete;
  client_session& operator=(client_session const&) = delete;
  /// Destroys the client and the fleet, then stops and joins the threads.
  ~client_session();

  [[nodiscard]] wandura::client& api() noexcept { return *api_; }
  [[nodiscard]] asio::io_context& io() noexcept { return io_; }

  /// Runs `op` on the session's executor and waits for its result. @throws what `op` throws.
  template <typename T> T run(asio::awaitable<T> op) {
    return asio::co_spawn(io_, std::move(op), asio::use_future).get();
  }

  /// Plays `plan` (the steps `options.runs_step` keeps) and returns what the viewers saw and what the client did
  /// meanwhile. `options.retries_so_far` and `items_so_far` are set here.
  [[nodiscard]] client_run play(audience const& plan, simulation_options options);

private:
  struct shared_state;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  std::atomic<std::uint64_t> retry_events_{0};
  std::atomic<std::uint64_t> warn_lines_{0};
  std::shared_ptr<shared_state> shared_;
  std::shared_ptr<counting_sender> sender_;
  std::unique_ptr<wandura::client> api_;
};

} // namespace demo
