#include "redis_ticket_store.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <memory_resource>
#include <utility>

#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "run_on.hpp"
#include "ticket_cache_access.hpp"
#include "ticket_envelope.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"

namespace wandura::detail {
namespace {

using std::chrono::system_clock;

bool storable(ticket_key const& key) noexcept {
  return !key.viewer_ref.empty() && !key.union_info.empty();
}

/// The identity a key names, taking its strings: the callers own their keys and need only their count after.
ticket_identity identity_of(ticket_key&& key) {
  return {std::move(key.viewer_ref), std::move(key.union_info), std::move(key.film_ref), key.episode_no,
          std::string(to_string(key.intent))};
}

ticket_identity_view view_of(ticket_key const& key) noexcept {
  return {key.viewer_ref, key.union_info, key.film_ref, key.episode_no, to_string(key.intent)};
}

// On the strand: the keys the near cache did not answer on the caller's thread, in one MGET (not asked again).
asio::awaitable<std::vector<std::optional<ticket>>> find_on_strand(std::shared_ptr<fleet_state> state,
                                                                   std::vector<ticket_key> keys) {
  std::vector<ticket_identity> who;
  who.reserve(keys.size());
  for (auto& key : keys) {
    who.push_back(identity_of(std::move(key)));
  }
  auto lookup = ticket_cache_access::get_many_past_near(state->tickets, std::move(who), system_clock::now());
  auto found = co_await std::move(lookup); // named: GCC 12 and co_await temporaries
  state->publish();
  std::vector<std::optional<ticket>> out(keys.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) {
      continue;
    }
    if (found[i]->process_id != state->options.process_id) {
      state->add_cross_process_reuse();
    }
    out[i] = std::move(found[i]->value);
  }
  co_return out;
}

asio::awaitable<void> erase_on_strand(std::shared_ptr<fleet_state> state, ticket_key key) {
  auto who = identity_of(std::move(key));
  state->drop_staged(fleet_keys::ticket(state->options.org, who)); // its local copy with it, under the writes' lock
  auto erase = state->tickets.erase(std::move(who));
  co_await std::move(erase);
  state->publish();
}

} // namespace

redis_ticket_store::redis_ticket_store(std::shared_ptr<fleet_state> state) noexcept : state_(std::move(state)) {}

std::optional<std::vector<std::optional<ticket>>> redis_ticket_store::try_find(std::span<ticket_key const> keys) {
  // Answered here when every key is a near hit or known to be absent from Redis (the fleet's replica of its keys):
  // such a batch costs no hop to the strand. Any other batch is asked again by `find`, which sends only the keys
  // the near cache lacks to the strand (and those the replica knows absent no further). A batch's identities are
  // views of its keys, kept on the stack (a batch is at most three episodes).
  std::array<std::byte, 512> room; // NOLINT(cppcoreguidelines-pro-type-member-init): the resource's buffer
  std::pmr::monotonic_buffer_resource on_stack(room.data(), room.size());
  std::pmr::vector<ticket_identity_view> who(&on_stack);
  who.reserve(keys.size());
  for (auto const& key : keys) {
    who.push_back(view_of(key)); // one without a viewer or a device is answered nothing (never stored)
  }
  std::vector<std::optional<ticket>> out(keys.size());
  std::size_t from_other_processes = 0;
  if (!ticket_cache_access::find_near_all(state_->tickets, who, system_clock::now(), state_->options.process_id, out,
                                          from_other_processes)) {
    return std::nullopt;
  }
  if (from_other_processes != 0) {
    state_->add_cross_process_reuse(from_other_processes);
  }
  return out;
}

asio::awaitable<std::vector<std::optional<ticket>>> redis_ticket_store::find(std::vector<ticket_key> keys) {
  // The near cache first, on the caller's thread: a batch it answers whole costs no hop to the strand, and only
  // the keys it did not answer are looked up there. A near hit is a hash lookup and a copy of the decoded ticket.
  auto const now = system_clock::now();
  std::vector<std::optional<ticket>> out(keys.size());
  std::vector<ticket_key> rest;
  std::vector<std::size_t> rest_at;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!storable(keys[i])) {
      continue; // nothing is ever stored without a viewer and a device
    }
    auto near = ticket_cache_access::find_near(state_->tickets, view_of(keys[i]), now, state_->options.process_id);
    if (!near) {
      rest.push_back(std::move(keys[i]));
      rest_at.push_back(i);
      continue;
    }
    if (near->from_another_process) {
      state_->add_cross_process_reuse();
    }
    out[i] = std::move(near->value);
  }
  if (rest.empty()) {
    co_return out;
  }
  auto on_strand = find_on_strand(state_, std::move(rest));
  auto found = co_await run_on(state_->strand, std::move(on_strand));
  for (std::size_t j = 0; j < rest_at.size(); ++j) {
    out[rest_at[j]] = std::move(found[j]);
  }
  co_return out;
}

asio::awaitable<void> redis_ticket_store::insert(ticket_key key, ticket t) {
  std::vector<std::pair<ticket_key, ticket>> one;
  one.emplace_back(std::move(key), std::move(t));
  auto store = insert_many(std::move(one)); // named: GCC 12 and co_await temporaries
  co_await std::move(store);
}

bool redis_ticket_store::try_insert_many(std::vector<std::pair<ticket_key, ticket>>& tickets) {
  // Declined: nothing is reused without a viewer and a device (docs/protocol.md §4).
  std::erase_if(tickets, [](auto const& entry) { return !storable(entry.first); });
  if (tickets.empty()) {
    return true;
  }
  std::vector<std::pair<ticket_identity, stored_ticket>> entries;
  entries.reserve(tickets.size());
  for (auto& [key, value] : tickets) {
    entries.emplace_back(identity_of(std::move(key)), stored_ticket{state_->options.process_id, std::move(value)});
  }
  fleet_state::store_behind(state_, std::move(entries), system_clock::now());
  return true;
}

asio::awaitable<void> redis_ticket_store::insert_many(std::vector<std::pair<ticket_key, ticket>> tickets) {
  (void)try_insert_many(tickets);
  auto flushed = fleet_state::flush(state_); // named: GCC 12 and co_await temporaries
  if (auto const ec = co_await std::move(flushed)) {
    auto const state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw error(ec, "ticket store: insert cancelled");
    }
    // The fleet object went while the write was pending: the tickets are kept locally, and written still.
  }
}

asio::awaitable<void> redis_ticket_store::erase(ticket_key key) {
  if (!storable(key)) {
    co_return;
  }
  auto on_strand = erase_on_strand(state_, std::move(key));
  co_await run_on(state_->strand, std::move(on_strand));
}

} // namespace wandura::detail
