#include "redis_ticket_store.hpp"

#include <chrono>
#include <exception>
#include <limits>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "ticket_envelope.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

using std::chrono::system_clock;

bool storable(ticket_key const& key) noexcept {
  return !key.viewer_ref.empty() && !key.union_info.empty();
}

ticket_identity identity_of(ticket_key const& key) {
  return {key.viewer_ref, key.union_info, key.film_ref, key.episode_no, std::string(to_string(key.intent))};
}

/// The lookups of one batch, in flight at once on the strand; the last one to complete wakes the waiter. Shared by
/// the waiter and each lookup's completion, so that a waiter cancelled first leaves nothing dangling.
struct batch_lookup {
  batch_lookup(asio::strand<asio::any_io_executor> const& strand, std::size_t n)
      : found(n), done(strand, asio::steady_timer::time_point::max()) {}

  void complete(std::size_t i, std::exception_ptr e, std::optional<cached_ticket> t) {
    if (e && !failure) {
      failure = e;
    }
    found[i] = std::move(t);
    if (--left == 0) {
      done.cancel();
    }
  }

  std::vector<std::optional<cached_ticket>> found;
  std::size_t left = 0;
  std::exception_ptr failure;
  asio::steady_timer done; // never expires: cancelled when the last lookup completes
};

// On the strand: every lookup of the batch initiated in this handler (hiredis writes them in one go), then waits
// for all of them.
asio::awaitable<std::vector<std::optional<ticket>>> find_on_strand(std::shared_ptr<fleet_state> state,
                                                                   std::vector<ticket_key> keys) {
  auto const now = system_clock::now();
  auto lookup = std::make_shared<batch_lookup>(state->strand, keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!storable(keys[i])) {
      continue; // nothing is ever stored without a viewer and a device
    }
    ++lookup->left;
    asio::co_spawn(state->strand, state->tickets.get(identity_of(keys[i]), now),
                   [state, lookup, i](std::exception_ptr e, std::optional<cached_ticket> t) {
                     lookup->complete(i, e, std::move(t));
                   });
  }
  if (lookup->left > 0) {
    // The lookups were posted to the strand, so none has completed yet; the timer is cancelled by the last one.
    auto [ignored] = co_await lookup->done.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    (void)ignored;
    if (lookup->left > 0) { // woken by this coroutine's cancellation, not by the last lookup
      throw error(asio::error::operation_aborted, "ticket store: lookup cancelled");
    }
  }
  state->publish();
  if (lookup->failure) {
    std::rethrow_exception(lookup->failure);
  }
  std::vector<std::optional<ticket>> out(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!lookup->found[i]) {
      continue;
    }
    auto stored = decode_ticket_payload(lookup->found[i]->payload);
    if (!stored) {
      continue; // another writer's value under a key of ours: never served
    }
    if (stored->process_id != state->options.process_id) {
      state->add_cross_process_reuse();
    }
    out[i] = std::move(stored->value);
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
