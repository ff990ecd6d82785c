// The steps of one `client::issue_tickets` call: plan -> send -> merge (docs/protocol.md §1 ticket
// batch, §3 what the SDK does).
//
// - `prepare` validates the batch;
// - `reuse_stored` (awaited only when the call reuses tickets) answers what it can from the ticket store, every
//   episode in one lookup;
// - `plan` leaves pending what must be sent, dropping prefetches while the playback counter is under its reserve
//   or held off (`shed`), and a request of prefetches only while it is congested when the batch's play is already
//   answered (`deferred`);
// - `send` writes the JSON of the rest, once, and starts (or joins) the operation that sends it through the retry
//   engine; the operation shares the caller's batch, and its `batch_reader` takes the viewer's allowance first
//   (with a viewer limit), reads every response's items and narrows the request to the items still needed, which
//   the engine then retries like any retry;
// - `merge` puts what came back into the caller's result, and `store_granted` (awaited only when the call reuses
//   tickets) stores the tickets the server granted it.
// The allowance belongs to the request, not to the calls waiting for it: it is taken once, by the operation, so a
// call that joins an identical request in flight takes none (and shares the request's refusals), and the operation
// gives back what was not freshly granted when it ends, however it ends. A `ticket_settlement` in the caller's frame
// counts the call and its failure (the call's duration is observed around it, by `observed_call`). A call that
// does not reuse tickets awaits nothing but the operation: no coroutine frame beyond its own.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "client_impl.hpp"

namespace wandura::detail {

/// Indexes into the episodes of one batch, in place (a batch has at most `ticket_batch::max_episodes`).
class item_indexes {
public:
  /// @pre size() < ticket_batch::max_episodes (the batch was validated).
  void push_back(std::size_t index) noexcept { items_[size_++] = index; }
  [[nodiscard]] bool contains(std::size_t index) const noexcept { return std::find(begin(), end(), index) != end(); }
  template <class Predicate> void erase_if(Predicate p) {
    size_ = static_cast<std::size_t>(std::remove_if(begin(), end(), p) - begin());
  }
  /// Ascending order (insertion sort: at most three items; std::sort trips GCC 12's -Warray-bounds here).
  void sort() noexcept {
    for (std::size_t i = 1; i < size_; ++i) {
      for (std::size_t j = i; j > 0 && items_[j - 1] > items_[j]; --j) {
        std::swap(items_[j - 1], items_[j]);
      }
    }
  }
  [[nodiscard]] std::size_t* begin() noexcept { return items_.data(); }
  [[nodiscard]] std::size_t* end() noexcept { return items_.data() + size_; }
  [[nodiscard]] std::size_t const* begin() const noexcept { return items_.data(); }
  [[nodiscard]] std::size_t const* end() const noexcept { return items_.data() + size_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t operator[](std::size_t i) const noexcept { return items_[i]; }

private:
  std::array<std::size_t, ticket_batch::max_episodes> items_{};
  std::size_t size_ = 0;
};

/// One call's state, held by the caller's frame through a `shared_ptr` (the frame stays small enough for Asio to
/// recycle); the operation that sends the batch shares it too, through an aliasing `shared_ptr` to `batch`.
struct ticket_call {
  /// The caller's batch, sent (some of its episodes) without a copy.
  ticket_batch const batch;
  explicit ticket_call(ticket_batch&& b) : batch(std::move(b)) {}
  ticket_call(ticket_call const&) = delete;
  ticket_call& operator=(ticket_call const&) = delete;
  call_settings settings;
  ticket_batch_result result;
  item_indexes pending; ///< Episodes to send (before the viewer limit: the operation takes the allowance).
  bool limited = false; ///< The client has a viewer limit and something is pending: the operation takes allowance.
  bool has_viewer = false;
  bool reuses = false; ///< Tickets are looked up and stored: `reuse_tickets` and a viewer_ref.
  /// The caller's name for the call, in messages: `issue_tickets`, or `start_episode`.
  std::string_view operation = "issue_tickets";

  /// Who the viewer limit counts (client_options::viewer_tickets_per_minute): the viewer_ref, or without one the
  /// device as `device:<union_info>`, so that a device whose id is some viewer's viewer_ref (a player sends its own)
  /// spends its own allowance, not that viewer's.
  [[nodiscard]] std::string who() const {
    return has_viewer ? *batch.viewer_ref : std::string(device_prefix) + batch.union_info;
  }
  static constexpr std::string_view device_prefix = "device:";
};

/// What the operation sending a batch produced: one item per episode pending when it started (those the viewer limit
/// refused included), in the batch's order.
struct sent_batch {
  std::vector<ticket_item_result> items;
  int attempts = 0;
  int http_status = 0;
  std::string request_id;
  bool replayed = false;
};

/// Settles one call on every exit (success, exception, cancellation): counts it, and counts a failure unless it
/// succeeded.
class ticket_settlement {
public:
  explicit ticket_settlement(client::impl& self) noexcept;
  ticket_settlement(ticket_settlement const&) = delete;
  ticket_settlement& operator=(ticket_settlement const&) = delete;
  ~ticket_settlement();
  /// Settles the call as a success now (before its result is moved out).
  void succeeded() noexcept { settle(true); }

private:
  void settle(bool ok) noexcept;

  client::impl& self_;
  bool settled_ = false;
};

/// Validates the call's arguments before anything is looked up or taken, whether or not a request is sent later
/// (the store or the per-viewer limit may answer every episode): `call.batch` (throws `wandura::error`
/// `invalid_argument`) and the caller's idempotency key in `options` (`invalid_idempotency_key`). Sets
/// `call.has_viewer` and `call.reuses`. The body is written by `send`, once, for what is still pending then.
void prepare(client::impl& self, ticket_call& call, call_options const& options);

/// Answers from the ticket store every episode it holds a reusable ticket for (one lookup for the batch). Awaited
/// only when `call.reuses`, after `call.settings` is set: a lookup still running at its deadline is cancelled.
/// A store that throws answers nothing (counted in `store_errors`, logged). @throws `operation_aborted` when the
/// call is cancelled or the client ends during the lookup, `errc::deadline_exceeded` when the deadline passes then.
[[nodiscard]] asio::awaitable<void> reuse_stored(client::impl& self, ticket_call& call);

/// Leaves in `call.pending` the episodes no stored ticket answered, minus the prefetches the playback counter has
/// no room for, judged at `now` (the client's clock, read after anything the call awaited): `shed` while it is under
/// its reserve or held off after a 429, and `deferred` while it is congested when nothing but prefetches is left
/// (the plays were answered from the store). Sets `call.limited`.
void plan(client::impl& self, ticket_call& call, clock::time_point now);

/// A batch on its way: the operation sending it and whether this call joined one in flight.
struct sending {
  std::shared_ptr<call_registry::operation<sent_batch>> op;
  bool coalesced = false;
  /// This caller reports the request's fresh tickets as fresh and stores them: the first of its callers to take
  /// the result (set by `merge`). The others see them `reused`: nothing is counted twice, whoever left early.
  bool owner = false;
};

/// Writes the JSON of the episodes in `call.pending` and joins an identical request in flight (`coalesce`, and no
/// caller-chosen idempotency key), or starts the operation that sends it: with a viewer limit (`call.limited`) the
/// operation first takes the viewer's allowance (docs/protocol.md §2: one ticket per episode, plays first, all at
/// once when they fit, else one by one until refused; the refused ones come back `viewer_limited` with the limit's
/// retry_after, and are not sent), then sends the rest through the retry engine. The operation shares the caller's
/// batch (`call->batch`). @throws wandura::error `operation_aborted` when the client is shut down.
[[nodiscard]] sending send(std::shared_ptr<client::impl> const& self, std::shared_ptr<ticket_call> const& shared_call,
                           asio::any_io_executor const& executor);

/// Puts what the operation produced into `call.result`. `waited` is how this caller's wait ended. When the request
/// carried prefetches only and the batch already has answers (its play from the store), a failure of the request is
/// its items' outcome instead (`deferred` when nothing was sent, else what the failure's status means for an item,
/// else `failed` with its code), and nothing is thrown but cancellation.
/// @throws wandura::error the operation's failure, `operation_aborted` when this caller was cancelled,
///         `deadline_exceeded` when its own deadline passed first.
void merge(ticket_call& call, sending& sent, std::error_code waited);

/// Whether `store_granted` has anything to store: the call reuses tickets and owns the request's result
/// (`sending::owner`), in which the server granted at least one ticket.
[[nodiscard]] bool has_granted_to_store(ticket_call const& call, sending const& sent) noexcept;

/// Stores every ticket the server granted in `call.result`, fresh or reused by the server (which the store lacked: a
/// process restarted, a shared store that lost its keys), in the ticket store, for reuse by later calls (of any
/// process sharing the store). A store still at work when the call's deadline passes is cancelled and the tickets go
/// unstored: the call keeps them, as it does when the store throws (counted in `store_errors`, logged). @throws
/// `operation_aborted` when the call is cancelled or the client ends while the store works.
[[nodiscard]] asio::awaitable<void> store_granted(client::impl& self, ticket_call& call);

/// `store_granted` without waiting: the tickets the store takes at once (`try_insert_many`), else none. For a call
/// cancelled after its result came, which may await nothing more.
void store_granted_at_once(client::impl& self, ticket_call& call);

/// Names every item that no response filled with the episode asked for, and counts the outcomes.
void finish_items(client::impl& self, ticket_call& call);

} // namespace wandura::detail
