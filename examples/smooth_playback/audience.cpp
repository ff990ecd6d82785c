#include "audience.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace demo {
namespace {

/// Uniform in [0, 1) from 53 random bits: the same sequence on every standard library (unlike
/// std::uniform_real_distribution, whose algorithm is unspecified).
double uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11U) * 0x1p-53;
}

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * uniform(rng);
}

/// Uniform integer in [lo, hi].
std::int32_t uniform_int(std::mt19937_64& rng, std::int32_t lo, std::int32_t hi) {
  if (hi <= lo) {
    return lo;
  }
  auto const span = static_cast<std::uint64_t>(hi - lo) + 1;
  return lo + static_cast<std::int32_t>(rng() % span);
}

std::int32_t prefetch_count(std::int32_t episode_no, std::int32_t unlocked_through) {
  return std::clamp(unlocked_through - episode_no, 0, 2);
}

} // namespace

char const* to_string(step_kind k) noexcept {
  switch (k) {
  case step_kind::start: return "start";
  case step_kind::restart: return "restart";
  case step_kind::switch_device: return "switch_device";
  }
  return "unknown";
}

double arrival_profile::time_of(double u) const noexcept {
  // Triangle on [0, T] with its mode at c = peak_at * T: F(t) = t^2 / (T c) before the mode, 1 - (T - t)^2 /
  // (T (T - c)) after it.
  double const total_s = duration_s;
  double const p = std::clamp(peak_at, 0.0, 1.0);
  double const mode_s = p * total_s;
  u = std::clamp(u, 0.0, 1.0);
  if (u < p) {
    return std::sqrt(u * total_s * mode_s);
  }
  return total_s - std::sqrt((1 - u) * total_s * (total_s - mode_s));
}

zipf_sampler::zipf_sampler(std::size_t n, double s) {
  if (n == 0) {
    throw std::invalid_argument("zipf_sampler: no items");
  }
  cdf_.reserve(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), s);
    cdf_.push_back(sum);
  }
  for (auto& v : cdf_) {
    v /= sum;
  }
}

std::size_t zipf_sampler::operator()(double u) const noexcept {
  auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return it == cdf_.end() ? cdf_.size() - 1 : static_cast<std::size_t>(it - cdf_.begin());
}

double zipf_sampler::probability(std::size_t i) const noexcept {
  if (i >= cdf_.size()) {
    return 0;
  }
  return i == 0 ? cdf_[0] : cdf_[i] - cdf_[i - 1];
}

namespace {

double peak_of(std::vector<double> const& per_s, std::size_t window_s) {
  window_s = std::max<std::size_t>(1, window_s);
  double best = 0;
  double sum = 0;
  for (std::size_t i = 0; i < per_s.size(); ++i) {
    sum += per_s[i];
    if (i >= window_s) {
      sum -= per_s[i - window_s];
    }
    best = std::max(best, sum / static_cast<double>(std::min(window_s, i + 1)));
  }
  return best;
}

} // namespace

double demand_curve::peak_tickets_per_s(std::size_t window_s) const noexcept {
  return peak_of(tickets_per_s, window_s);
}

double demand_curve::peak_plays_per_s(std::size_t window_s) const noexcept {
  return peak_of(plays_per_s, window_s);
}

demand_curve audience::demand(double duration_s) const {
  demand_curve d;
  auto const seconds = static_cast<std::size_t>(std::ceil(std::max(duration_s, 1.0))) + 30;
  d.tickets_per_s.assign(seconds, 0.0);
  d.plays_per_s.assign(seconds, 0.0);
  // Replays each viewer's steps against a model of the client's ticket cache (seed 000: reuse only for the same
  // device, episode and intent), as if every ticket asked for were granted.
  struct held_ticket {
    std::uint8_t device;
    std::int32_t episode_no;
    bool play;
    bool operator==(held_ticket const&) const = default;
  };
  std::vector<held_ticket> held;
  for (auto const& v : viewers) {
    held.clear();
    auto want = [&held](held_ticket t) {
      if (std::find(held.begin(), held.end(), t) != held.end()) {
        return 0.0;
      }
      held.push_back(t);
      return 1.0;
    };
    for (auto const& s : v.steps) {
      auto const i = std::min(seconds - 1, static_cast<std::size_t>(std::max(0.0, s.at_s)));
      double const play = want({s.device, s.episode_no, true});
      double tickets = play;
      for (std::int32_t k = 1; k <= prefetch_count(s.episode_no, v.unlocked_through); ++k) {
        tickets += want({s.device, s.episode_no + k, false});
      }
      d.tickets_per_s[i] += tickets;
      d.plays_per_s[i] += play;
      d.total_tickets += tickets;
      d.total_plays += play;
    }
  }
  return d;
}

audience plan_audience(std::vector<catalogue_film> catalogue, std::uint32_t viewers, arrival_profile const& profile,
                       audience_mix const& mix, std::uint64_t seed) {
  if (catalogue.empty()) {
    throw std::invalid_argument("the catalogue is empty");
  }
  for (auto const& f : catalogue) {
    if (f.episodes < 1) {
      throw std::invalid_argument("film " + f.film_ref + " has no episode");
    }
  }
  audience a;
  a.catalogue = std::move(catalogue);
  zipf_sampler const pick_film(a.catalogue.size(), mix.zipf_s);
  std::mt19937_64 rng(seed);

  a.viewers.reserve(viewers);
  for (std::uint32_t id = 0; id < viewers; ++id) {
    viewer_plan v;
    v.id = id;
    v.film = pick_film(uniform(rng));
    std::int32_t const episodes = a.catalogue[v.film].episodes;
    std::int32_t const first = uniform(rng) < mix.from_first ? 1 : uniform_int(rng, 1, episodes);
    // The paywall: most viewers have the whole series, some only up to N or N+1 (never past the last episode).
    v.unlocked_through = episodes;
    if (uniform(rng) < mix.partial_unlock) {
      v.unlocked_through = std::min(episodes, first + uniform_int(rng, 0, 1));
    }
    double t = profile.time_of(uniform(rng));
    v.steps.push_back({t, step_kind::start, first, 0});

    double const behaviour = uniform(rng);
    double const watch = uniform(rng, mix.watch_min_s, mix.watch_max_s);
    if (behaviour < mix.binge) {
      std::int32_t episode = first;
      do {
        if (episode + 1 > v.unlocked_through) {
          break;
        }
        ++episode;
        t += watch;
        v.steps.push_back({t, step_kind::start, episode, 0});
      } while (episode < first + 2 && uniform(rng) < mix.binge_on);
    } else if (behaviour < mix.binge + mix.restart) {
      v.steps.push_back({t + watch / 2, step_kind::restart, first, 0});
    } else if (behaviour < mix.binge + mix.restart + mix.switch_device) {
      v.steps.push_back({t + watch, step_kind::switch_device, first, 1});
    }
    a.steps += v.steps.size();
    a.viewers.push_back(std::move(v));
  }
  std::stable_sort(a.viewers.begin(), a.viewers.end(),
                   [](viewer_plan const& x, viewer_plan const& y) { return x.steps[0].at_s < y.steps[0].at_s; });
  return a;
}

} // namespace demo
