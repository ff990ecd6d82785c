#include "in_process_emulator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace demo {

std::unique_ptr<wandura::emulator::server> start_emulator(demo_options const& o, run_plan const& plan) {
  wandura::emulator::config cfg;
  cfg.orgs.front().limits.playback = plan.limit;
  cfg.seed = o.seed;
  cfg.threads = 1;
  if (o.catalogue_file) {
    for (auto const& f : plan.plan.catalogue) {
      cfg.films.push_back({f.film_ref, {}, static_cast<std::uint32_t>(f.episodes), true});
    }
  }
  return wandura::emulator::server::start(cfg);
}

asio::awaitable<std::uint64_t> warm_up(wandura::client& api, wandura::emulator::server& emu, catalogue_film film,
                                       double limit_per_min, double left,
                                       std::chrono::steady_clock::time_point emulator_started) {
  double const rate = limit_per_min / 60.0;
  auto spent_enough = [&] {
    double const elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - emulator_started).count();
    double const counted = static_cast<double>(emu.stats().tickets_counted);
    return counted - rate * elapsed >= limit_per_min * (1.0 - left);
  };
  std::uint64_t received = 0;
  std::uint64_t batch_no = 0;
  wandura::call_options once;
  once.policy = wandura::retry_policy::none();
  while (!spent_enough()) {
    wandura::ticket_batch batch;
    batch.union_info = "warmup-device-" + std::to_string(batch_no);
    batch.drm_kek = "warmup-kek-" + std::to_string(batch_no);
    ++batch_no;
    for (std::int32_t ep = 1; ep <= std::min(3, film.episodes); ++ep) {
      batch.episodes.push_back({film.film_ref, ep, wandura::intent::play});
    }
    auto got = co_await api.issue_tickets(std::move(batch), once);
    std::uint64_t fresh = 0;
    for (auto const& item : got.items) {
      if (item.outcome == wandura::item_outcome::granted && !item.reused) {
        ++fresh;
      }
    }
    if (fresh == 0) {
      auto const& first = got.items.front();
      throw std::runtime_error("warm-up: no ticket granted for " + film.film_ref + ": " +
                               std::string(wandura::to_string(first.outcome)) + " (status " +
                               std::to_string(first.status) + " " + first.error_code + ")");
    }
    received += fresh;
  }
  co_return received;
}

void script_unavailable(wandura::emulator::server& emu, double probability) {
  if (probability <= 0) {
    return;
  }
  wandura::emulator::fault_rule rule;
  rule.path = "/v1/playback/tickets";
  rule.kind = wandura::emulator::fault_kind::status;
  rule.status = 503;
  rule.retry_after = 1;
  rule.probability = probability;
  emu.install_faults(std::vector<wandura::emulator::fault_rule>{rule});
}

} // namespace demo
