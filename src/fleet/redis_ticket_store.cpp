#include "redis_ticket_store.hpp"

#include <chrono>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>

#include "ticket_envelope.hpp"

namespace wandura::detail {
namespace {

using std::chrono::system_clock;

bool storable(ticket_key const& key) noexcept {
  return !key.viewer_ref.empty() && !key.union_info.empty();
}

ticket_identity identity_of(ticket_key const& key) {
  return {key.viewer_ref, key.union_info, key.film_ref, key.episode_no, std::string(to_string(key.intent))};
}

/// Decodes a stored ticket into `out`, counting it when another process stored it. False (and `out` untouched)
/// for another writer's value under a key of ours: never served.
bool serve(fleet_state& state, cached_ticket const& found, std::optional<ticket>& out) {
  auto stored = decode_ticket_payload(found.payload);
  if (!stored) {
    return false;
  }
  if (stored->process_id != state.options.process_id) {
    state.add_cross_process_reuse();
  }
  out = std::move(stored->value);
  return true;
}

// On the strand: the batch's keys in one lookup (the near cache, then one MGET for the rest).
asio::awaitable<std::vector<std::optional<ticket>>> find_on_strand(std::shared_ptr<fleet_state> state,
                                                                   std::vector<ticket_key> keys) {
  std::vector<ticket_identity> who;
  std::vector<std::size_t> asked; // where each of `who` is in `keys`
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (storable(keys[i])) { // nothing is ever stored without a viewer and a device
      who.push_back(identity_of(keys[i]));
      asked.push_back(i);
    }
  }
  std::vector<std::optional<ticket>> out(keys.size());
  if (who.empty()) {
    co_return out;
  }
  auto lookup = state->tickets.get_many(std::move(who), system_clock::now()); // named: GCC 12
  auto found = co_await std::move(lookup);
  state->publish();
  for (std::size_t j = 0; j < asked.size(); ++j) {
    if (!found[j]) {
      continue;
    }
    (void)serve(*state, *found[j], out[asked[j]]);
  }
  co_return out;
}

asio::awaitable<void> insert_on_strand(std::shared_ptr<fleet_state> state,
                                       std::vector<std::pair<ticket_key, ticket>> tickets) {
  std::vector<std::pair<ticket_identity, cached_ticket>> entries;
  entries.reserve(tickets.size());
  for (auto const& [key, value] : tickets) {
    entries.emplace_back(identity_of(key),
                         cached_ticket{encode_ticket_payload(state->options.process_id, value), value.expires_at});
  }
  auto put = state->tickets.put_many(std::move(entries)); // named: GCC 12 and co_await temporaries
  co_await std::move(put);
  state->publish();
}

asio::awaitable<void> erase_on_strand(std::shared_ptr<fleet_state> state, ticket_key key) {
  auto erase = state->tickets.erase(identity_of(key));
  co_await std::move(erase);
  state->publish();
}

} // namespace

redis_ticket_store::redis_ticket_store(std::shared_ptr<fleet_state> state) noexcept : state_(std::move(state)) {}

asio::awaitable<std::vector<std::optional<ticket>>> redis_ticket_store::find(std::vector<ticket_key> keys) {
  // The near cache first, on the caller's thread: a batch it answers whole costs no hop to the strand, and only
  // the keys it did not answer are looked up there.
  auto const now = system_clock::now();
  std::vector<std::optional<ticket>> out(keys.size());
  std::vector<ticket_key> rest;
  std::vector<std::size_t> rest_at;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!storable(keys[i])) {
      continue;
    }
    auto near = state_->tickets.find_near(identity_of(keys[i]), now);
    if (!near || !serve(*state_, *near, out[i])) {
      rest.push_back(std::move(keys[i]));
      rest_at.push_back(i);
    }
  }
  if (rest.empty()) {
    co_return out;
  }
  auto on_strand = find_on_strand(state_, std::move(rest));
  auto found = co_await asio::co_spawn(state_->strand, std::move(on_strand), asio::use_awaitable);
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

asio::awaitable<void> redis_ticket_store::insert_many(std::vector<std::pair<ticket_key, ticket>> tickets) {
  // Declined: nothing is reused without a viewer and a device (docs/protocol.md §4).
  std::erase_if(tickets, [](auto const& entry) { return !storable(entry.first); });
  if (tickets.empty()) {
    co_return;
  }
  auto on_strand = insert_on_strand(state_, std::move(tickets));
  co_await asio::co_spawn(state_->strand, std::move(on_strand), asio::use_awaitable);
}

asio::awaitable<void> redis_ticket_store::erase(ticket_key key) {
  if (!storable(key)) {
    co_return;
  }
  auto on_strand = erase_on_strand(state_, std::move(key));
  co_await asio::co_spawn(state_->strand, std::move(on_strand), asio::use_awaitable);
}

} // namespace wandura::detail
