#include "client_session.hpp"

#include "log_line.hpp"

#include <stdexcept>
#include <utility>

#include "wandura/transport/transport.hpp"

#ifdef WANDURA_DEMO_HAS_FLEET
#include "wandura/fleet/fleet.hpp"
#endif

namespace demo {

#ifdef WANDURA_DEMO_HAS_FLEET
struct client_session::shared_state {
  wandura::fleet fleet;
  shared_state(asio::any_io_executor ex, wandura::fleet_options o) : fleet(std::move(ex), std::move(o)) {}
};
#else
struct client_session::shared_state {};
#endif

client_session::client_session(client_session_options options) : work_(asio::make_work_guard(io_)) {
  wandura::client_options copt;
  copt.base_url = std::move(options.base_url);
  copt.api_key = std::move(options.api_key);
  copt.retry.policy = wandura::retry_policy::interactive();
  copt.retry.on_retry = [this](wandura::retry_event const&) { retry_events_.fetch_add(1); };
  auto on_log = std::make_shared<std::function<void(wandura::log_level, std::string_view)>>(std::move(options.on_log));
  copt.retry.log = [this, on_log](wandura::log_level level, std::string_view message) {
    if (level != wandura::log_level::warn) {
      return;
    }
    warn_lines_.fetch_add(1);
    if (*on_log) {
      (*on_log)(level, message);
    }
  };
  if (options.shared_state) {
#ifdef WANDURA_DEMO_HAS_FLEET
    wandura::fleet_options fopt;
    fopt.redis.url = *options.shared_state;
    fopt.org = "smooth-playback";
    fopt.process_id = options.process_id;
    // One line when a part of the shared state starts answering locally, one when Redis is back: shown as they come.
    fopt.fallback.log = [on_log](std::string_view line) {
      if (*on_log) {
        auto const [level, text] = split_level(line, wandura::log_level::warn);
        (*on_log)(level, text);
      }
    };
    shared_ = std::make_shared<shared_state>(io_.get_executor(), std::move(fopt));
    shared_->fleet.configure(copt);
#else
    throw std::runtime_error("shared state needs the fleet layer, which this build does not have");
#endif
  }
  // The client sends through a counter of ticket items (play items sent, answered 429), not its own transport.
  sender_ = std::make_shared<counting_sender>(std::make_shared<wandura::transport>(io_.get_executor()));
  api_ = std::make_unique<wandura::client>(sender_, std::move(copt));
  for (unsigned i = 0; i < options.threads; ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
}

client_session::~client_session() {
  api_.reset();
  shared_.reset();
  work_.reset();
  io_.stop();
  for (auto& t : threads_) {
    t.join();
  }
}

client_run client_session::play(audience const& plan, simulation_options options) {
  auto const before = api_->stats();
  auto const items_before = sender_->counts();
  auto const retries_before = retry_events_.load();
  auto const warn_before = warn_lines_.load();
#ifdef WANDURA_DEMO_HAS_FLEET
  auto const shared_before = shared_ ? shared_->fleet.stats() : wandura::fleet_stats{};
#endif
  options.retries_so_far = [this, retries_before] { return retry_events_.load() - retries_before; };
  options.items_so_far = [this] { return sender_->counts(); };

  client_run out;
  out.sim = run(run_audience(io_.get_executor(), *api_, plan, std::move(options)));

  auto const after = api_->stats();
  auto const items = sender_->counts();
  auto& s = out.sim.totals;
  s.cache_hits = after.metrics.cache_hits - before.metrics.cache_hits;
  s.coalesced = after.metrics.coalesced - before.metrics.coalesced;
  s.retries = retry_events_.load() - retries_before; // every retry fires on_retry once (SPEC §3)
  s.budget_denied = after.metrics.budget_denied - before.metrics.budget_denied;
  s.requests = after.metrics.attempts - before.metrics.attempts;
  s.failures_by_reason = out.sim.failures_by_reason;
  s.play_items_sent = items.play_sent - items_before.play_sent;
  s.play_429 = items.play_429 - items_before.play_429;
  out.calls = after.metrics.calls - before.metrics.calls;
  out.held_off = after.metrics.held_off - before.metrics.held_off;
  out.warn_lines = warn_lines_.load() - warn_before;
#ifdef WANDURA_DEMO_HAS_FLEET
  if (shared_) {
    auto const shared_after = shared_->fleet.stats();
    out.cross_process_reuse = shared_after.cross_process_reuse - shared_before.cross_process_reuse;
    out.shared_state_fallbacks = shared_after.fallbacks - shared_before.fallbacks;
  }
#endif
  return out;
}

} // namespace demo
