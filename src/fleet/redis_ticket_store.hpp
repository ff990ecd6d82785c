// The client's `ticket_store` over the fleet's `shared_ticket_cache`: reusable tickets shared by every process of a
// fleet through Redis (docs/adr/0008). Not public API: `fleet::configure` sets it as `client_options::tickets`.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "fleet_state.hpp"
#include "wandura/playback/ticket_store.hpp"

namespace wandura::detail {

/// A `ticket_store` whose tickets live in Redis under `wandura:{org}:ticket:<hash>`, each stored with the id of the
/// process that stored it.
///
/// `try_find` answers a batch the near cache holds whole, on the caller's thread; `find` asks the near cache too,
/// then looks up the keys left on the fleet's strand in one `MGET`. `try_insert_many` keeps a call's fresh tickets
/// locally and hands them to the fleet's writer, which writes what many calls handed over in one script, behind
/// them (`fleet_state::store_behind`); `insert_many` and `insert` do the same, then await the writer (`flush`).
/// Keys without a viewer_ref or union_info are never looked up or stored. When Redis is slow, down or failing, the
/// cache answers from this process's local copy within the command timeout (degrade, never block).
///
/// @par Thread safety
/// Any thread, any executor: each operation that needs Redis hops to the fleet's strand and completes back on the
/// caller's executor.
/// @par Cancellation
/// Through the awaiting coroutine's cancellation slot: completes by throwing `wandura::error` with
/// `operation_aborted`; lookups already sent complete on the strand and are dropped.
class redis_ticket_store final : public ticket_store {
public:
  explicit redis_ticket_store(std::shared_ptr<fleet_state> state) noexcept;

  [[nodiscard]] asio::awaitable<std::vector<std::optional<ticket>>> find(std::vector<ticket_key> keys) override;
  [[nodiscard]] asio::awaitable<void> insert(ticket_key key, ticket t) override;
  [[nodiscard]] asio::awaitable<void> insert_many(std::vector<std::pair<ticket_key, ticket>> tickets) override;
  [[nodiscard]] asio::awaitable<void> erase(ticket_key key) override;
  /// Keeps the tickets locally and hands them to the fleet's writer (any thread, no hop, always true).
  [[nodiscard]] bool try_insert_many(std::vector<std::pair<ticket_key, ticket>>& tickets) override;
  /// What the near cache answers, if it answers every key (any thread, no hop).
  [[nodiscard]] std::optional<std::vector<std::optional<ticket>>> try_find(std::span<ticket_key const> keys) override;

private:
  std::shared_ptr<fleet_state> state_;
};

} // namespace wandura::detail
