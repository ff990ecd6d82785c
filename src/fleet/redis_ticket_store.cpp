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
    auto stored = decode_ticket_payload(found[j]->payload);
    if (!stored) {
      continue; // another writer's value under a key of ours: never served
    }
    if (stored->process_id != state->options.process_id) {
      state->add_cross_process_reuse();
    }
    out[asked[j]] = std::move(stored->value);
  }
  co_return out;
}

asio::awaitable<void> insert_on_strand(std::shared_ptr<fleet_state> state, ticket_key key, ticket value) {
  auto const expires_at = value.expires_at;
  cached_ticket entry{encode_ticket_payload(state->options.process_id, value), expires_at};
  auto put = state->tickets.put(identity_of(key), std::move(entry)); // named: GCC 12 and co_await temporaries
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
  auto on_strand = find_on_strand(state_, std::move(keys));
  co_return co_await asio::co_spawn(state_->strand, std::move(on_strand), asio::use_awaitable);
}

asio::awaitable<void> redis_ticket_store::insert(ticket_key key, ticket t) {
  if (!storable(key)) {
    co_return; // declined: nothing is reused without a viewer and a device (docs/protocol.md §4)
  }
  auto on_strand = insert_on_strand(state_, std::move(key), std::move(t));
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
