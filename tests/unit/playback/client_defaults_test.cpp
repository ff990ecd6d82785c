// The bounds client.hpp promises for the parts a client makes for itself when none is given: the in-memory ticket
// store (10,000 entries) and the per-viewer buckets (100,000 viewers). Each is seen through the public API only:
// tickets answered from the store, and viewers the limit still remembers. Thousands of calls on a fake transport
// and a hand-stepped clock, spawned in rounds so that they cost a few seconds at most.
#include "wandura/playback/client.hpp"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/fake_transport.hpp"

#include "client_harness.hpp"

using wandura::item_outcome;
using wandura::testing::fake_step;

namespace {

/// A batch of episode 1 of film "f" as `play`, for viewer `viewer`.
wandura::ticket_batch batch_for(std::size_t viewer) {
  wandura::ticket_batch batch;
  batch.union_info = "dev-1";
  batch.drm_kek = "kek";
  batch.viewer_ref = "viewer-" + std::to_string(viewer);
  batch.episodes.push_back({"f", 1, wandura::intent::play});
  return batch;
}

/// Issues `batch_for(v)` for each `v` of `viewers`, in that order, in rounds of 500 spawned together; the outcome of
/// each one's item, in the same order.
std::vector<item_outcome> issue_for(client_harness::harness& h, std::vector<std::size_t> const& viewers) {
  std::vector<item_outcome> out(viewers.size(), item_outcome::unavailable);
  std::size_t done = 0;
  for (std::size_t first = 0; first < viewers.size(); first += 500) {
    std::size_t const end = std::min(viewers.size(), first + 500);
    for (std::size_t i = first; i < end; ++i) {
      asio::co_spawn(h.io, h.api->issue_tickets(batch_for(viewers[i])),
                     [&out, &done, i](std::exception_ptr e, wandura::ticket_batch_result r) {
                       if (!e && r.items.size() == 1) {
                         out[i] = r.items[0].outcome;
                       }
                       ++done;
                     });
    }
    for (int round = 0; round < 100 && done < end; ++round) {
      h.io.restart();
      h.io.poll();
    }
    REQUIRE(done == end);
  }
  return out;
}

std::vector<std::size_t> range(std::size_t from, std::size_t to) {
  std::vector<std::size_t> out;
  for (std::size_t v = from; v < to; ++v) {
    out.push_back(v);
  }
  return out;
}

std::size_t count(std::vector<item_outcome> const& outcomes, item_outcome which) {
  return static_cast<std::size_t>(std::count(outcomes.begin(), outcomes.end(), which));
}

} // namespace

TEST_CASE("client defaults: the in-memory ticket store made when none is given keeps 10,000 tickets") {
  // client.hpp, client_options::tickets: "null means an in-memory LRU (`memory_ticket_store`, 10,000 entries)".
  // 12,000 tickets of 12,000 viewers, then each asked for again, newest first: the store answers exactly the
  // 10,000 it kept (the newest), and the 2,000 oldest are asked of the server again.
  client_harness::harness h;
  h.fake->set_default(
      fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 1, "play", "t")})));
  auto const fill = issue_for(h, range(0, 12'000));
  REQUIRE(count(fill, item_outcome::granted) == 12'000);
  REQUIRE(h.fake->attempt_count() == 12'000);
  std::vector<std::size_t> newest_first;
  for (std::size_t v = 12'000; v-- > 0;) {
    newest_first.push_back(v);
  }
  auto const again = issue_for(h, newest_first);
  CHECK(count(again, item_outcome::granted) == 12'000);
  CHECK(h.api->stats().metrics.cache_hits == 10'000);
  CHECK(h.fake->attempt_count() == 14'000);
}

TEST_CASE("client defaults: the per-viewer buckets made from viewer_tickets_per_minute track about 100,000 viewers") {
  // client.hpp, client_options::viewer_limit: "the client builds a process-local token bucket per viewer at that
  // rate (... 100,000 viewers tracked)". One ticket a minute per viewer and a clock that never moves: a viewer who
  // took their ticket stays refused while remembered. After 110,000 viewers took one each, the newest and one
  // followed by 90,000 others are still refused; the first, followed by 109,999 others, was forgotten and is
  // granted again. (The buckets are kept in 16 LRU shards of 6,250, so the bound is per shard; 90,000 and 110,000
  // are far enough from 100,000 for any spread of viewers over the shards.)
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1;
  options.reuse_tickets = false; // the store would answer the refused viewers' tickets
  client_harness::harness h(options);
  h.fake->set_default(
      fake_step::respond(200, client_harness::batch_body({client_harness::granted_item("f", 1, "play", "t")})));
  auto const fill = issue_for(h, range(0, 110'000));
  REQUIRE(count(fill, item_outcome::granted) == 110'000);
  auto const probes = issue_for(h, {20'000, 109'999, 0});
  CHECK(probes[0] == item_outcome::viewer_limited);
  CHECK(probes[1] == item_outcome::viewer_limited);
  CHECK(probes[2] == item_outcome::granted);
  CHECK(h.fake->attempt_count() == 110'001);
}
