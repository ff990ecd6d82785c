#include "audience.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <catch2/catch.hpp>

namespace {

std::vector<demo::catalogue_film> films() {
  return {{"the-heiress-returns", 12}, {"midnight-vows", 40}, {"crimson-letters", 3}, {"one-shot", 1}};
}

demo::audience plan(std::uint32_t viewers, std::uint64_t seed = 1) {
  return demo::plan_audience(films(), viewers, demo::arrival_profile{30, 0.5}, demo::audience_mix{}, seed);
}

} // namespace

TEST_CASE("audience: the same seed gives the same plan, another seed another plan") {
  auto a = plan(500, 7);
  auto b = plan(500, 7);
  auto c = plan(500, 8);
  REQUIRE(a.viewers.size() == 500);
  bool same = true;
  bool differs = false;
  for (std::size_t i = 0; i < a.viewers.size(); ++i) {
    same = same && a.viewers[i].film == b.viewers[i].film && a.viewers[i].steps.size() == b.viewers[i].steps.size() &&
           a.viewers[i].steps[0].at_s == b.viewers[i].steps[0].at_s;
    differs = differs || a.viewers[i].steps[0].at_s != c.viewers[i].steps[0].at_s;
  }
  CHECK(same);
  CHECK(differs);
}

TEST_CASE("audience: every viewer only plays released, unlocked episodes") {
  auto a = plan(3000);
  for (auto const& v : a.viewers) {
    auto const episodes = a.catalogue[v.film].episodes;
    REQUIRE(!v.steps.empty());
    CHECK(v.steps[0].kind == demo::step_kind::start);
    CHECK(v.unlocked_through <= episodes);
    for (auto const& s : v.steps) {
      CHECK(s.episode_no >= 1);
      CHECK(s.episode_no <= v.unlocked_through);
    }
    for (std::size_t i = 1; i < v.steps.size(); ++i) {
      CHECK(v.steps[i].at_s > v.steps[i - 1].at_s);
    }
  }
}

TEST_CASE("audience: binge goes N, N+1, N+2 and stops at the paywall") {
  auto a = plan(3000);
  int binges = 0;
  int stopped_by_paywall = 0;
  for (auto const& v : a.viewers) {
    if (v.steps.size() < 2 || v.steps[1].kind != demo::step_kind::start) {
      continue;
    }
    ++binges;
    for (std::size_t i = 1; i < v.steps.size(); ++i) {
      CHECK(v.steps[i].episode_no == v.steps[i - 1].episode_no + 1);
      CHECK(v.steps[i].device == 0);
    }
    CHECK(v.steps.size() <= 3);
    stopped_by_paywall += v.steps.back().episode_no == v.unlocked_through ? 1 : 0;
  }
  CHECK(binges > 3000 * 0.2);
  CHECK(stopped_by_paywall > 0);
}

TEST_CASE("audience: restarts stay on the device, device switches move to another one") {
  auto a = plan(3000);
  int restarts = 0;
  int switches = 0;
  int partial = 0;
  for (auto const& v : a.viewers) {
    partial += v.unlocked_through < std::min(a.catalogue[v.film].episodes, v.steps[0].episode_no + 2) ? 1 : 0;
    for (auto const& s : v.steps) {
      if (s.kind == demo::step_kind::restart) {
        ++restarts;
        CHECK(s.device == v.steps[0].device);
        CHECK(s.episode_no == v.steps[0].episode_no);
      } else if (s.kind == demo::step_kind::switch_device) {
        ++switches;
        CHECK(s.device != v.steps[0].device);
        CHECK(s.episode_no == v.steps[0].episode_no);
      }
    }
  }
  // 15 %, 5 % and about 25 % of 3000 viewers, with generous margins.
  CHECK(restarts > 300);
  CHECK(restarts < 600);
  CHECK(switches > 80);
  CHECK(switches < 250);
  CHECK(partial > 300);
}

TEST_CASE("audience: film popularity follows the Zipf weights") {
  demo::zipf_sampler const z(4, 1.1);
  double total = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    total += z.probability(i);
  }
  CHECK(total == Approx(1.0));
  CHECK(z.probability(0) / z.probability(1) == Approx(std::pow(2.0, 1.1)));
  CHECK(z(0.0) == 0);
  CHECK(z(0.999999) == 3);

  auto a = plan(4000);
  std::map<std::size_t, int> counts;
  for (auto const& v : a.viewers) {
    ++counts[v.film];
  }
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(counts[i] == Approx(4000 * z.probability(i)).epsilon(0.15));
  }
}

TEST_CASE("audience: arrivals rise to a peak in the middle and fall again") {
  demo::arrival_profile const p{30, 0.5};
  CHECK(p.time_of(0.0) == Approx(0.0));
  CHECK(p.time_of(0.5) == Approx(15.0));
  CHECK(p.time_of(1.0) == Approx(30.0));
  CHECK(p.time_of(0.125) == Approx(7.5)); // F(7.5) = 7.5^2 / (30 * 15)

  auto a = plan(6000);
  auto d = a.demand(30);
  double early = 0;
  double middle = 0;
  for (std::size_t s = 0; s < 5; ++s) {
    early += d.plays_per_s[s];
  }
  for (std::size_t s = 13; s < 18; ++s) {
    middle += d.plays_per_s[s];
  }
  CHECK(middle > 3 * early);
  CHECK(d.peak_tickets_per_s(3) > d.peak_plays_per_s(3));
}

TEST_CASE("audience: demand counts a restart on the same device as no new ticket") {
  demo::audience a;
  a.catalogue = films();
  demo::viewer_plan v;
  v.film = 0;
  v.unlocked_through = 12;
  v.steps = {{1.0, demo::step_kind::start, 4, 0},
             {2.0, demo::step_kind::restart, 4, 0},
             {3.0, demo::step_kind::start, 5, 0},
             {4.0, demo::step_kind::switch_device, 5, 1}};
  a.viewers.push_back(v);
  auto d = a.demand(10);
  CHECK(d.tickets_per_s[1] == 3); // 4 play, 5 and 6 prefetch
  CHECK(d.tickets_per_s[2] == 0); // everything already held on device 0
  CHECK(d.tickets_per_s[3] == 2); // 5 play (a prefetch ticket is not a play ticket), 7 prefetch; 6 is held
  CHECK(d.tickets_per_s[4] == 3); // another device: nothing shared
  CHECK(d.total_plays == 3);
}
