#include "simulation.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "failure_reason.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/viewer_ref.hpp"

namespace demo {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

/// The run's shared state: written by every viewer coroutine (on any thread of the client's executor).
struct run_state {
  audience const& plan;
  simulation_options options;
  clock_type::time_point started;

  std::atomic<std::uint64_t> viewers_started{0}; // viewers whose first step here has started
  std::atomic<std::uint64_t> viewers_done{0};
  std::atomic<std::uint64_t> asked{0}; // tickets asked for (play + prefetch items)
  std::atomic<std::uint64_t> fresh{0};
  std::atomic<std::uint64_t> plays_done{0};
  std::atomic<std::uint64_t> play_failures{0};
  std::atomic<std::uint64_t> shed{0};

  std::mutex mutex; // guards everything below
  simulation_result result;
  std::vector<double> interval_latencies_ms;

  run_state(audience const& p, simulation_options o)
      : plan(p), options(std::move(o)), started(options.start_at.value_or(clock_type::now())) {}

  [[nodiscard]] double now_s() const { return std::chrono::duration<double>(clock_type::now() - started).count(); }

  void count_item(wandura::ticket_item_result const& item, bool is_play) {
    std::string key = is_play ? "play " : "prefetch ";
    key += wandura::to_string(item.outcome);
    if (item.outcome == wandura::item_outcome::granted) {
      ++result.totals.tickets_granted;
      if (item.reused) {
        ++result.totals.tickets_reused;
        key += " (reused)";
      } else {
        ++result.totals.tickets_fresh;
        fresh.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (!is_play) {
      ++result.totals.prefetch_requested;
      if (item.outcome == wandura::item_outcome::shed) {
        ++result.totals.prefetch_shed;
        shed.fetch_add(1, std::memory_order_relaxed);
      }
    }
    ++result.outcomes_by_kind[key];
  }

  // With `mutex` held.
  void record_latency(double latency_ms) {
    result.play_latencies_ms.push_back(latency_ms);
    result.play_done_s.push_back(now_s());
    interval_latencies_ms.push_back(latency_ms);
  }

  void record_start(viewer_plan const& v, viewer_step const& s, wandura::episode_start const& got, double latency_ms) {
    std::lock_guard lock(mutex);
    ++result.starts;
    ++result.totals.play_requests;
    record_latency(latency_ms);
    count_item(got.play, true);
    for (auto const& p : got.prefetch) {
      count_item(p, false);
    }
    if (got.play.outcome != wandura::item_outcome::granted) {
      ++result.totals.play_failures;
      play_failures.fetch_add(1, std::memory_order_relaxed);
      auto const policy = options.call.policy.value_or(wandura::retry_policy::interactive());
      ++result.failures_by_reason[failure_reason(got, latency_ms, policy)];
      if (result.failures.size() < 20) {
        result.failures.push_back({v.id, got.play.film_ref, s.episode_no,
                                   std::string(wandura::to_string(got.play.outcome)) + " (status " +
                                       std::to_string(got.play.status) +
                                       (got.play.error_code.empty() ? "" : " " + got.play.error_code) + ")"});
      }
    }
    plays_done.fetch_add(1, std::memory_order_relaxed);
  }

  void record_failure(viewer_plan const& v, viewer_step const& s, std::string what, std::string reason,
                      double latency_ms) {
    std::lock_guard lock(mutex);
    ++result.failures_by_reason[std::move(reason)];
    ++result.starts;
    ++result.totals.play_requests;
    ++result.totals.play_failures;
    record_latency(latency_ms);
    ++result.outcomes_by_kind["play exception"];
    if (result.failures.size() < 20) {
      result.failures.push_back({v.id, plan.catalogue[v.film].film_ref, s.episode_no, std::move(what)});
    }
    play_failures.fetch_add(1, std::memory_order_relaxed);
    plays_done.fetch_add(1, std::memory_order_relaxed);
  }
};

asio::awaitable<void> sleep_until(clock_type::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_at(when);
  co_await timer.async_wait(asio::use_awaitable);
}

/// One viewer's steps, in order.
asio::awaitable<void> run_viewer(std::shared_ptr<run_state> state, wandura::client& api, viewer_plan const& v) {
  auto const& film = state->plan.catalogue[v.film];
  bool started = false;
  for (std::size_t i = 0; i < v.steps.size(); ++i) {
    auto const& step = v.steps[i];
    if (state->options.runs_step && !state->options.runs_step(v, i)) {
      continue;
    }
    co_await sleep_until(state->started +
                         std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(step.at_s)));
    if (!started) {
      started = true;
      state->viewers_started.fetch_add(1, std::memory_order_relaxed);
    }
    auto const install = "install-" + std::to_string(v.id) + "-" + std::to_string(step.device);
    wandura::viewer who{wandura::make_viewer_ref(state->options.viewer_secret, "user-" + std::to_string(v.id), install),
                        "device-" + std::to_string(v.id) + "-" + std::to_string(step.device),
                        "kek-" + std::to_string(v.id) + "-" + std::to_string(step.device)};
    auto const asked = 1 + std::clamp(v.unlocked_through - step.episode_no, 0, 2);
    state->asked.fetch_add(static_cast<std::uint64_t>(asked), std::memory_order_relaxed);
    auto const t0 = clock_type::now();
    try {
      auto got = co_await api.start_episode(std::move(who), film.film_ref, step.episode_no, v.unlocked_through,
                                            state->options.call);
      state->record_start(v, step, got, ms_between(t0, clock_type::now()));
    } catch (wandura::error const& e) {
      state->record_failure(v, step, e.what(), failure_reason(e.code()), ms_between(t0, clock_type::now()));
    } catch (std::exception const& e) {
      state->record_failure(v, step, std::string("unexpected: ") + e.what(), "unexpected",
                            ms_between(t0, clock_type::now()));
    }
  }
  state->viewers_done.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  return values[rank - 1];
}

asio::awaitable<simulation_result> run_audience(asio::any_io_executor executor, wandura::client& api,
                                                audience const& plan, simulation_options options) {
  auto state = std::make_shared<run_state>(plan, std::move(options));
  for (auto const& v : plan.viewers) {
    asio::co_spawn(executor, run_viewer(state, api, v), asio::detached);
  }

  // Sample and report progress until every viewer is done.
  auto const total = static_cast<std::uint64_t>(plan.viewers.size());
  auto const& opt = state->options;
  auto next_sample = state->started + opt.sample_interval;
  auto last_sample_at = state->started;
  std::uint64_t last_asked = 0;
  std::optional<std::uint64_t> const counted_at_start =
      opt.server_tickets_counted ? opt.server_tickets_counted() : std::nullopt;
  std::uint64_t last_counted = counted_at_start.value_or(0);
  item_counts last_items = opt.items_so_far ? opt.items_so_far() : item_counts{};
  double last_rate = 0;
  for (;;) {
    co_await sleep_until(std::min(next_sample, clock_type::now() + opt.progress_interval));
    bool const done = state->viewers_done.load() == total;
    auto const now = clock_type::now();
    if (now >= next_sample || done) {
      double const dt = std::chrono::duration<double>(now - last_sample_at).count();
      std::optional<std::uint64_t> const server =
          opt.server_tickets_counted ? opt.server_tickets_counted() : std::nullopt;
      std::uint64_t const counted = server ? *server : state->fresh.load();
      std::uint64_t const asked = state->asked.load();
      sample s;
      s.t_s = state->now_s();
      s.tickets_per_s = dt > 0 ? static_cast<double>(counted - last_counted) / dt : 0;
      s.demand_per_s = dt > 0 ? static_cast<double>(asked - last_asked) / dt : 0;
      if (opt.items_so_far && dt > 0) {
        auto const items = opt.items_so_far();
        auto per_s = [dt](std::uint64_t now_n, std::uint64_t then_n) {
          return static_cast<double>(now_n - then_n) / dt;
        };
        s.play_sent_per_s = per_s(items.play_sent, last_items.play_sent);
        s.prefetch_sent_per_s = per_s(items.prefetch_sent, last_items.prefetch_sent);
        s.play_429_per_s = per_s(items.play_429, last_items.play_429);
        s.prefetch_429_per_s = per_s(items.prefetch_429, last_items.prefetch_429);
        last_items = items;
      }
      {
        std::lock_guard lock(state->mutex);
        s.play_p50_ms = percentile(state->interval_latencies_ms, 50);
        s.play_p95_ms = percentile(state->interval_latencies_ms, 95);
        state->interval_latencies_ms.clear();
        if (dt > 0.05) {
          state->result.samples.push_back(s);
        }
      }
      last_rate = s.tickets_per_s;
      last_counted = counted;
      last_asked = asked;
      last_sample_at = now;
      next_sample = now + opt.sample_interval;
    }
    if (opt.on_progress) {
      progress p;
      p.t_s = state->now_s();
      p.viewers_started = state->viewers_started.load();
      p.viewers = total;
      p.plays_done = state->plays_done.load();
      p.play_failures = state->play_failures.load();
      p.tickets_per_s = last_rate;
      p.retries = opt.retries_so_far ? opt.retries_so_far() : api.stats().metrics.retries;
      p.shed = state->shed.load();
      opt.on_progress(p);
    }
    if (done) {
      break;
    }
  }

  std::lock_guard lock(state->mutex);
  simulation_result out = std::move(state->result);
  out.totals.viewers = state->viewers_started.load();
  out.started = state->started;
  out.totals.duration_s = state->now_s();
  auto latencies = out.play_latencies_ms;
  out.totals.p50_ms = percentile(latencies, 50);
  out.totals.p95_ms = percentile(latencies, 95);
  out.totals.p99_ms = percentile(latencies, 99);
  out.totals.max_ms = latencies.empty() ? 0 : latencies.back();
  out.totals.play_success_rate = out.totals.play_requests == 0
                                     ? 0
                                     : static_cast<double>(out.totals.play_requests - out.totals.play_failures) /
                                           static_cast<double>(out.totals.play_requests);
  co_return out;
}

} // namespace demo
