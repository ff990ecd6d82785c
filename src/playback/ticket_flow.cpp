#include "ticket_flow.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include <asio/error.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "playback/request_writer.hpp"
#include "playback/response_parser.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/resilience/classify.hpp"
#include "wandura/resilience/idempotency.hpp"

namespace wandura::detail {
namespace {

constexpr std::string_view playback_counter = "playback";
/// A ticket request never uses an attempt timeout under 5 s (docs/protocol.md §3).
constexpr std::chrono::milliseconds ticket_attempt_floor{5000};
/// Nor is it sent with less than 1 s of its call's deadline left (request_traits::min_time_left): twice the half
/// second the server may hold a play before it answers, so that a ticket it issues reaches a caller still waiting.
constexpr std::chrono::milliseconds ticket_min_time_left{1000};

// The items of a ticket batch response as read, before they are matched to the request. Used from the parse to the
// end of the matching, without suspending (as the parser), so one per thread; its items vector is kept.
ticket_batch_result& thread_parsed_batch() {
  thread_local ticket_batch_result parsed;
  return parsed;
}

bool is_fresh_grant(ticket_item_result const& item) noexcept {
  return item.outcome == item_outcome::granted && !item.reused;
}

/// A ticket the server answered the item with, fresh or reused: the store keeps either. A reused one is one the
/// store lacked (else the call would not have asked): not storing it would send every later call for it to the API
/// until it expires.
bool is_granted_ticket(ticket_item_result const& item) noexcept {
  return item.outcome == item_outcome::granted && item.ticket.has_value();
}

ticket_key key_for(ticket_batch const& batch, episode_request const& e) {
  return ticket_key{batch.viewer_ref.value_or(std::string{}), batch.union_info, e.film_ref, e.episode_no, e.intent};
}

/// An item the client answers `shed` without sending it: the playback counter is known to be under its reserve,
/// where the server refuses prefetches. Nothing was sent, so there is no HTTP status.
void shed_item(ticket_item_result& item) {
  item.outcome = item_outcome::shed;
  item.status = 0;
  item.error_code = "rate_limited";
  item.reason = "prefetch_shed";
}

/// An item the client did not send, of a request of prefetches only for a batch whose play was already answered:
/// left unsent while the playback counter is congested, or held back by the admission gate past the deadline. It
/// carries no HTTP status and no server fields.
void defer_item(ticket_item_result& item) {
  item.outcome = item_outcome::deferred;
  item.status = 0;
  item.error_code.clear();
  item.reason.clear();
  item.retry_after.reset();
  item.error = {};
}

/// Fails an item for a reason of the client's own (ticket_result.hpp): nothing an earlier answer said of it (a
/// reason, a retry_after, a ticket) is left on it.
void fail_item(ticket_item_result& item, int status, std::error_code error, std::string_view code, std::string detail) {
  item.outcome = item_outcome::failed;
  item.status = status;
  item.reused = false;
  item.ticket.reset();
  item.error_code = code;
  item.reason.clear();
  item.retry_after.reset();
  item.error = error;
  item.detail = std::move(detail);
}

/// Gives `item` (of intent `what`) the outcome of the failure `e` of the request that carried it, where the call
/// reports it on its items rather than throwing it: what the failure's status means for an item when an answer
/// arrived (a 503 is `unavailable`, a 429 `shed`, a 400 `failed`), `deferred` when nothing was sent (the gate held
/// it back), else `failed` with the failure's code (a 2xx that could not be read included). Nothing an earlier answer
/// said of the item is left on it; its `detail` is the failure's message.
void take_request_failure(ticket_item_result& item, error const& e, intent what) {
  item.reused = false;
  item.ticket.reset();
  item.retry_after.reset();
  bool const answered = e.http_status() != 0;
  if (answered && (e.http_status() < 200 || e.http_status() >= 300)) {
    auto const c = classify_item(e.http_status(), e.server_error_code(), e.reason(), what);
    item.outcome = c.outcome;
    item.error = c.error;
    item.status = e.http_status();
    item.error_code = e.server_error_code();
    item.reason = e.reason();
  } else if (e.attempts() == 0) {
    defer_item(item);
  } else { // no answer, or a 2xx that could not be read (not a grant: there is no ticket)
    item.outcome = item_outcome::failed;
    item.error = e.code();
    item.status = e.http_status();
    item.error_code.clear();
    item.reason.clear();
  }
  item.detail = item.outcome == item_outcome::deferred ? std::string() : std::string(e.what());
}

bool is_unreadable(ticket_item_result const& item) noexcept {
  return item.error_code == unreadable_item_code && item.error == errc::invalid_response;
}

bool same_episode(ticket_item_result const& item, episode_request const& want) noexcept {
  return item.film_ref == want.film_ref && item.episode_no == want.episode_no && item.intent == want.intent;
}

/// An unreadable item in the place of `want` (the server keeps the order) whose film and episode, where they could
/// be read, are `want`'s: it is `want`'s answer, failed, rather than no answer at all.
bool may_be_episode(ticket_item_result const& item, episode_request const& want) noexcept {
  return is_unreadable(item) && (item.film_ref.empty() || item.film_ref == want.film_ref) &&
         (item.episode_no == 0 || item.episode_no == want.episode_no) && item.intent == want.intent;
}

/// Reads the responses of one batch operation for the retry engine: matches items, stores fresh tickets, narrows
/// the request to the items still needed. Owned by the operation (it outlives any caller).
class batch_reader final : public response_reader {
public:
  /// Reads the responses for the episodes of `batch` at the indexes `sent`, in that order.
  batch_reader(std::shared_ptr<client::impl> self, std::shared_ptr<ticket_batch const> batch, item_indexes const& sent,
               retry_classifier classifier, std::string_view operation)
      : self_(std::move(self)), batch_ptr_(std::move(batch)), batch_(*batch_ptr_), sent_(sent), classifier_(classifier),
        operation_(operation), progress_(http_method::post, self_->tickets_url) {
    out_.items.resize(sent_.size());
    for (std::size_t i = 0; i < sent_.size(); ++i) {
      out_.items[i].outcome = item_outcome::deferred;
      pending_.push_back(i);
    }
  }
  batch_reader(batch_reader const&) = delete;
  batch_reader& operator=(batch_reader const&) = delete;
  /// An operation that ends without `finish` (cancelled, or its work threw) settles its allowance too.
  ~batch_reader() override { settle_allowance(); }

  /// The per-viewer limit (docs/protocol.md §2): takes one ticket per pending episode, plays first, all at once
  /// when they fit (one decision); otherwise one by one until refused, the rest answered `viewer_limited` with the
  /// limit's retry_after and left out of the request. @returns whether the request lost episodes (its body must be
  /// written again). @throws what the limit throws (`operation_aborted` when cancelled).
  asio::awaitable<bool> take_allowance(std::string viewer) {
    viewer_ = std::move(viewer);
    auto limit = self_->limit; // held by this frame while it awaits
    item_indexes order = pending_;
    // Plays first: when the allowance is short, the episode the viewer pressed play on gets it.
    std::stable_partition(order.begin(), order.end(), [&](std::size_t p) { return episode(p).intent == intent::play; });
    auto all = limit->acquire(viewer_, static_cast<std::uint32_t>(order.size()));
    viewer_limit::decision decision = co_await std::move(all);
    // Not all of them fit: one at a time, in order, until one does not (a single episode's answer is already
    // known); the rest wait as long as that one does.
    bool const whole = decision.allowed;
    bool refused = !whole && order.size() == 1;
    item_indexes allowed;
    for (std::size_t const p : order) {
      if (!whole && !refused) {
        auto one = limit->acquire(viewer_, 1);
        decision = co_await std::move(one);
        refused = !decision.allowed;
      }
      if (!refused) {
        allowed.push_back(p);
        acquired_.push_back(p);
        taken_from_[p] = decision.taken_from;
        continue;
      }
      auto& item = out_.items[p];
      item.outcome = item_outcome::viewer_limited;
      // A limit's negative wait (outside its contract) is no wait: an item's retry_after is never negative.
      item.retry_after = std::chrono::ceil<std::chrono::seconds>(
          std::max(decision.retry_after, decltype(decision.retry_after)::zero()));
    }
    allowed.sort();
    bool const narrowed = allowed.size() != pending_.size();
    pending_ = allowed;
    co_return narrowed;
  }
  /// Whether the viewer limit left nothing to send.
  [[nodiscard]] bool nothing_to_send() const noexcept { return pending_.empty(); }
  /// Writes the JSON of the episodes still pending into `body`.
  void write_pending(std::string& body) const {
    item_indexes episodes;
    for (std::size_t const p : pending_) {
      episodes.push_back(sent_[p]);
    }
    write_checked_ticket_batch(batch_, std::span<std::size_t const>(episodes.begin(), episodes.size()), body);
  }

  /// Gives back the allowance of the episodes whose tickets the server certainly did not issue, each ticket to the
  /// account it was taken from: those never sent, and those the server answered without a fresh ticket (reused,
  /// refused, shed, ...). A ticket granted fresh stays taken, and so does one the server may have issued unseen: an
  /// episode of an attempt still in flight (the call was cancelled or left at its deadline) or of one that got no
  /// answer for it (a timeout, a reset, a 2xx that could not be read). Otherwise a caller could spend the
  /// organisation's limit without bound by cancelling calls once their requests are out. The same rule however the
  /// operation ends: with a result, failed, cancelled or destroyed. Once; without awaiting: it runs where nothing
  /// can be awaited (a destructor), and the interface makes release a non-blocking start for this reason (the local
  /// limit gives back before it returns, the fleet's hops to its strand on its own, ahead of any acquire started
  /// later from this process).
  void settle_allowance() noexcept {
    if (acquired_.empty() || std::exchange(settled_, true)) {
      return;
    }
    std::uint32_t unused_primary = 0;
    std::uint32_t unused_fallback = 0;
    for (std::size_t const p : acquired_) {
      bool const maybe_issued = unanswered_[p] || (in_flight_ && pending_.contains(p));
      if (!maybe_issued && !is_fresh_grant(out_.items[p])) {
        ++(taken_from_[p] == viewer_limit::account::fallback ? unused_fallback : unused_primary);
      }
    }
    if (unused_primary > 0) {
      self_->limit->release(viewer_, unused_primary, viewer_limit::account::primary);
    }
    if (unused_fallback > 0) {
      self_->limit->release(viewer_, unused_fallback, viewer_limit::account::fallback);
    }
  }

  /// A request with a play item is what a viewer waits for; one of prefetches only may be dropped by the gate.
  [[nodiscard]] request_class admission_class() const override {
    bool const any_play =
        std::any_of(pending_.begin(), pending_.end(), [&](std::size_t i) { return episode(i).intent == intent::play; });
    return any_play ? request_class::play : request_class::prefetch;
  }
  /// The tickets the counter will count. While it is short of room the server sheds prefetches first and grants
  /// plays, so a request with plays costs its plays; one of prefetches only costs its items.
  [[nodiscard]] std::uint32_t admission_cost() const override {
    auto const plays = std::count_if(pending_.begin(), pending_.end(),
                                     [&](std::size_t i) { return episode(i).intent == intent::play; });
    return static_cast<std::uint32_t>(plays > 0 ? plays : static_cast<std::ptrdiff_t>(pending_.size()));
  }

  /// Counts the response's items for the admission gate: fresh grants, prefetches shed (the counter is under its
  /// reserve, plays are still granted: not the counter running out) and items refused for rate. A 2xx is read
  /// here once and its items kept for `after_success`, which follows without suspending.
  void read_counter_feedback(call_result const& response, counter_feedback& feedback) override {
    parsed_ready_ = false;
    ticket_batch_result& parsed = thread_parsed_batch();
    parsed.items.clear();
    int const status = response.response.status;
    if (status == 401 || thread_parser().parse_ticket_batch(response.response.body, parsed) || parsed.items.empty()) {
      // No items to count: a whole refusal says it for the request's items at once.
      bool const shed = response.reason == "prefetch_shed";
      auto const units = static_cast<std::uint32_t>(pending_.size());
      feedback.shed = status == 429 && shed ? units : 0;
      feedback.refused = status == 429 && !shed ? units : 0;
      return;
    }
    parsed_ready_ = status >= 200 && status < 300;
    std::optional<std::chrono::seconds> smallest; // a whole-request Retry-After is the smallest of its items'
    for (auto const& item : parsed.items) {
      feedback.granted += item.outcome == item_outcome::granted && !item.reused ? 1U : 0U;
      // As the item's own outcome says (ticket_result.hpp): a prefetch refused for rate is shed (the server refuses
      // prefetches first, below its reserve), a play refused for rate means the counter ran out.
      bool const refused = item.status == 429;
      bool const shed = refused && item.outcome == item_outcome::shed;
      feedback.shed += shed ? 1U : 0U;
      feedback.refused += refused && !shed ? 1U : 0U;
      if (refused && item.retry_after && (!smallest || *item.retry_after < *smallest)) {
        smallest = item.retry_after;
      }
    }
    if (!feedback.retry_after && smallest && smallest->count() > 0) {
      feedback.retry_after = std::chrono::duration_cast<std::chrono::milliseconds>(*smallest);
    }
  }

  /// Also tracks which episodes' tickets the server may have issued without saying so to this operation: those of
  /// an attempt in flight, and those of an attempt that ended with no response or a 2xx whose items were not read
  /// (`unanswered_`; `read_items` clears an episode once the server's answer for it is read). Their allowance stays
  /// taken however the operation ends (settle_allowance).
  void on_progress(int attempts, int http_status) noexcept override {
    progress_.note(attempts, http_status);
    // An attempt carries the episodes pending when it is sent; `pending_` changes only after it ended
    // (after_success), so while it is in flight and when it ends, `pending_` is what it carried.
    if (attempts > attempts_sent_) { // an attempt was sent
      attempts_sent_ = attempts;
      in_flight_ = true;
      return;
    }
    in_flight_ = false; // it ended
    if (http_status == 0 || (http_status >= 200 && http_status < 300)) {
      for (std::size_t const p : pending_) {
        unanswered_[p] = true; // no answer, or a 2xx whose items read_items has yet to read
      }
    }
  }
  /// How far the operation got: for a caller that leaves before it ends.
  [[nodiscard]] call_progress const& progress() const noexcept { return progress_; }

  [[nodiscard]] follow_up after_success(call_result const& response) override {
    follow_up next;
    ticket_batch_result& parsed = thread_parsed_batch();
    if (!std::exchange(parsed_ready_, false)) { // not read by read_counter_feedback (no reader call before)
      parsed.items.clear();
      if (thread_parser().parse_ticket_batch(response.response.body, parsed)) {
        next.unreadable = thread_parser().message(); // the engine retries or fails it
        return next;
      }
      // An empty `items` reads: every episode is then missing from the answer.
    }
    item_indexes const retry = read_items(parsed, response);
    if (retry.empty()) {
      return next;
    }
    // Retry the needed items alone, in a new request (the engine gives it its own key), within the same deadline,
    // budget and count of retries, after the longest of their retry_after.
    item_indexes narrowed; // into the caller's batch
    for (std::size_t const i : retry) {
      narrowed.push_back(sent_[i]);
      auto const& item = out_.items[i];
      auto const ra =
          std::chrono::duration_cast<std::chrono::milliseconds>(item.retry_after.value_or(std::chrono::seconds{0}));
      if (!next.again || ra > *next.retry_after) {
        next.retry_after = ra;
        next.http_status = item.status;
        next.server_code = item.error_code;
      }
      next.again = true;
    }
    write_checked_ticket_batch(batch_, std::span<std::size_t const>(narrowed.begin(), narrowed.size()), next.body);
    pending_ = retry;
    narrowed_ = true;
    return next;
  }

  /// The operation's result once the engine is done (or once the viewer limit left nothing to send), or the whole
  /// call's failure as `wandura::error`. Settles the allowance either way.
  sent_batch finish(call_result&& sent) {
    if (!nothing_to_send() && !read_final(sent)) {
      settle_allowance();
      throw to_error(sent, operation_);
    }
    out_.attempts = sent.attempts;
    settle_allowance();
    return std::move(out_);
  }

private:
  /// Reads the engine's final result into `out_`; false when it fails the whole call.
  bool read_final(call_result const& sent) {
    if (sent.ok()) {
      return true;
    }
    bool const cancelled = sent.stopped == stop_reason::cancelled;
    if (cancelled && !(narrowed_ && granted_before_retry())) {
      return false; // no ticket issued before the cancellation: the call's end is the cancellation
    }
    // Per-item outcomes are read from any final response that carries them, a final 429 or 503 included; one
    // without them (401, 400, a proxy's HTML) or no response at all fails the whole call. Not after a cancellation:
    // the last response's refusals were to be retried, and the cancellation ended them (below).
    if (!cancelled && sent.has_response() && sent.response.status != 401) {
      ticket_batch_result& parsed = thread_parsed_batch();
      parsed.items.clear();
      if (!thread_parser().parse_ticket_batch(sent.response.body, parsed) && !parsed.items.empty()) {
        (void)read_items(parsed, sent);
        return true;
      }
    }
    if (sent.stopped == stop_reason::shed) {
      shed_locally();
      return true;
    }
    if (narrowed_) {
      // A retry of some items ended without an answer for them (cancelled included: a 2xx read before the
      // cancellation stands, its tickets issued): what earlier answers said of the others stands (one item's
      // failure never takes another's result), and those still pending take what ended the retry.
      auto const failure = to_error(sent, operation_);
      if (sent.has_response()) {
        out_.http_status = sent.response.status;
      }
      for (std::size_t const i : pending_) {
        take_request_failure(out_.items[i], failure, episode(i).intent);
      }
      return true;
    }
    return false;
  }

  /// An item a response granted before the retry of the others (`narrowed_`) began: its ticket is issued.
  [[nodiscard]] bool granted_before_retry() const noexcept {
    for (std::size_t i = 0; i < out_.items.size(); ++i) {
      if (!pending_.contains(i) && out_.items[i].outcome == item_outcome::granted) {
        return true;
      }
    }
    return false;
  }

  /// Matches the server's items to the pending ones by film, episode and intent (the server keeps the order: trust,
  /// but check); returns those needed and retryable.
  item_indexes read_items(ticket_batch_result& parsed, call_result const& response) {
    int const status = response.response.status;
    out_.http_status = status;
    out_.replayed = out_.replayed || response.replayed;
    if (!narrowed_ || out_.request_id.empty()) {
      out_.request_id = std::move(parsed.request_id);
    }
    item_indexes used;
    item_indexes retry;
    for (std::size_t p = 0; p < pending_.size(); ++p) {
      std::size_t const i = pending_[p];
      auto const& want = episode(i);
      std::size_t match = parsed.items.size();
      if (p < parsed.items.size() && !used.contains(p) && same_episode(parsed.items[p], want)) {
        match = p;
      } else {
        for (std::size_t k = 0; k < parsed.items.size() && match == parsed.items.size(); ++k) {
          match = !used.contains(k) && same_episode(parsed.items[k], want) ? k : match;
        }
        if (match == parsed.items.size() && p < parsed.items.size() && !used.contains(p) &&
            may_be_episode(parsed.items[p], want)) {
          match = p;
        }
      }
      auto& item = out_.items[i];
      if (match == parsed.items.size()) {
        fail_item(item, status, make_error_code(errc::invalid_response), missing_item_code,
                  "the answer has no readable item for this episode");
        continue;
      }
      used.push_back(match);
      item = std::move(parsed.items[match]);
      if (is_unreadable(item)) {
        // Not asked again. The film and episode are the request's (an unreadable field may have left them unset),
        // and the ticket may have been issued unless the item read as refused (a status outside 2xx), whatever the
        // whole response's status.
        item.film_ref = want.film_ref;
        item.episode_no = want.episode_no;
        unanswered_[i] = item.status == 0 || (item.status >= 200 && item.status < 300);
        continue;
      }
      unanswered_[i] = false; // the server said what it did for this episode
      // An item is retried by the same rule as a whole response (classify.hpp), on its own status and code.
      bool const needed = want.intent == intent::play || self_->options.retry_prefetch;
      if (needed && is_retryable_status(item.status, item.error_code, classifier_)) {
        retry.push_back(i);
      }
    }
    return retry;
  }

  /// The admission gate dropped this request of prefetches only: the counter is under its reserve, where the
  /// server refuses prefetches. Its items are `shed`, as the server would have answered them; nothing was sent.
  void shed_locally() {
    for (std::size_t const i : pending_) {
      shed_item(out_.items[i]);
    }
  }

  std::shared_ptr<client::impl> self_;
  /// The sent episode at position `p` of the request (of `out_.items`).
  [[nodiscard]] episode_request const& episode(std::size_t p) const noexcept { return batch_.episodes[sent_[p]]; }

  std::shared_ptr<ticket_batch const> batch_ptr_; // the caller's, shared: the operation outlives any caller
  ticket_batch const& batch_;
  item_indexes sent_; // indexes into batch_.episodes of the request's episodes, in the order sent
  retry_classifier classifier_;
  std::string_view operation_; // a literal: "issue_tickets" or "start_episode"
  sent_batch out_;
  item_indexes pending_; // positions in the request (indexes into sent_) still asked for
  bool narrowed_ = false;
  bool parsed_ready_ = false; // the per-thread parsed batch holds the last 2xx, read by read_counter_feedback
  call_progress progress_;
  std::string viewer_;    // who the viewer limit counts, once `take_allowance` ran
  item_indexes acquired_; // positions that took one ticket of the viewer's allowance
  /// By position: the account each of `acquired_` took its ticket from.
  std::array<viewer_limit::account, ticket_batch::max_episodes> taken_from_{};
  int attempts_sent_ = 0;  // attempts sent so far (on_progress)
  bool in_flight_ = false; // the last one has not ended: it carries `pending_`
  /// By position: an attempt carrying the episode ended without the server's answer for it being read.
  std::array<bool, ticket_batch::max_episodes> unanswered_{};
  bool settled_ = false;
};

/// The work of an operation under a viewer limit: the allowance first, then the request for what it allowed.
asio::awaitable<call_result> send_within_allowance(std::shared_ptr<client::impl> self, batch_reader& reader,
                                                   std::string viewer, std::string body, request_traits traits,
                                                   call_settings settings) {
  try {
    auto taking = reader.take_allowance(std::move(viewer)); // named: GCC 12 and temporaries in co_await expressions
    if (co_await std::move(taking)) {
      body.clear();
      reader.write_pending(body);
    }
    if (reader.nothing_to_send()) {
      co_return call_result{};
    }
    http_request request = self->make_request(http_method::post, self->tickets_url, std::move(body));
    auto sending = self->engine.call(std::move(request), std::move(traits), std::move(settings), &reader);
    co_return co_await std::move(sending);
  } catch (...) {
    reader.settle_allowance(); // at once, not when the last waiter lets go of the operation
    throw;
  }
}

} // namespace

ticket_settlement::ticket_settlement(client::impl& self) noexcept : self_(self) {
  self_.metrics.add_call();
}

ticket_settlement::~ticket_settlement() {
  settle(false);
}

void ticket_settlement::settle(bool ok) noexcept {
  if (!std::exchange(settled_, true) && !ok) {
    self_.metrics.add_call_failure();
  }
}

namespace {

/// The result's item `i`. Each item names its episode once the call is done (finish_items); until then an empty
/// film_ref marks an item that no response has filled. The items exist only once one of them is answered before
/// sending: when every episode is sent, the operation's items become the result whole (merge).
ticket_item_result& item_at(ticket_call& call, std::size_t i) {
  if (call.result.items.empty()) {
    call.result.items.resize(call.batch.episodes.size());
    for (auto& item : call.result.items) {
      item.outcome = item_outcome::deferred;
    }
  }
  return call.result.items[i];
}

} // namespace

void prepare(client::impl& self, ticket_call& call, call_options const& options) {
  std::string message;
  if (auto ec = check_ticket_batch(call.batch, &message)) {
    throw error(ec, std::string(call.operation) + ": " + message);
  }
  // The retry engine checks it too, before sending; checked here as well, so that a call the store answers
  // refuses it alike.
  if (options.idempotency_key && validate_idempotency_key(*options.idempotency_key)) {
    throw error(errc::invalid_idempotency_key, std::string(call.operation) + ": the idempotency key must be 1-" +
                                                   std::to_string(max_idempotency_key_length) +
                                                   " characters 0x21-0x7E");
  }
  call.has_viewer = call.batch.viewer_ref.has_value() && !call.batch.viewer_ref->empty();
  call.reuses = call.has_viewer && self.options.reuse_tickets;
}

namespace {

/// What a registry operation produces for a store's `asio::awaitable<R>`: `R`, or `true` for a void one.
template <class R> using produced_t = std::conditional_t<std::is_void_v<R>, bool, R>;

/// The body of a registry operation: `call` on the store, owning both (the call owns its arguments).
template <class R, class Call>
asio::awaitable<produced_t<R>> call_owning(std::shared_ptr<ticket_store> store, Call call) {
  auto work = call(*store); // named: GCC 12 and temporaries in co_await expressions
  if constexpr (std::is_void_v<R>) {
    co_await std::move(work);
    co_return true;
  } else {
    co_return co_await std::move(work);
  }
}

/// A failure of the store that the call goes on without (ticket_store.hpp, "Errors"): anything it threw while the
/// call was not cancelled. Counted (`store_errors`) and written to the client's logger.
void note_store_failure(client::impl& self, char const* operation, std::exception_ptr const& failure) noexcept {
  self.metrics.add_store_error();
  if (!self.engine.options().log) {
    return;
  }
  try {
    std::string why = "an exception not derived from std::exception";
    try {
      std::rethrow_exception(failure);
    } catch (std::exception const& e) {
      why = printable(e.what());
    } catch (...) {
    }
    self.engine.write_log(log_level::warn, std::string("ticket store: ") + operation + " threw (" + why +
                                               "); the call goes on without the store");
  } catch (...) {
    // Out of memory writing the line: the failure is counted.
  }
}

/// Awaits `call(store)` (a store operation; `call` owns its arguments) as an operation of the client's call
/// registry, as a request is awaited, so that the client's end reaches a call waiting on its store: `~client()`
/// and `shutdown()` complete the call with `operation_aborted` at once and cancel the store's coroutine (through
/// its cancellation slot), and `shutdown()` completes only once that coroutine has ended. Only for what the store
/// declined to do at once (`try_find`, `try_insert_many`): that costs the call nothing more. The wait ends at the
/// call's `deadline` (the store's operation is then cancelled, as when the call is).
/// @returns what the operation produced; nullopt when the store failed (it threw while the call was neither
///          cancelled nor ended, even `operation_aborted`, its own then: counted and logged, `note_store_failure`).
/// @throws `operation_aborted` when the call is cancelled or the client ends; `errc::deadline_exceeded` when the
///         deadline passes first.
template <class R, class Call>
asio::awaitable<std::optional<produced_t<R>>> await_store(client::impl& self, char const* operation, Call call,
                                                          clock::time_point deadline) {
  using produced = produced_t<R>;
  if (deadline != clock::time_point::max() && self.time->now() >= deadline) {
    // Nothing is started that the wait would cancel at once (a store out of process may already have written).
    throw error(errc::deadline_exceeded, "ticket store: the call's deadline passed before the store was asked");
  }
  auto const executor = co_await asio::this_coro::executor;
  // The store's operation has no deadline of its own (it does not know the call's): the call's wait has one, and
  // the operation is cancelled when that wait ends.
  auto [op, joined] = self.calls.join_or_start<produced>(
      std::nullopt, executor, clock::time_point::max(), [&] { return call_owning<R>(self.store, std::move(call)); },
      [](produced&& p) { return std::move(p); });
  (void)joined; // never: an operation without a key is nobody else's
  std::error_code waited;
  co_await self.calls.async_wait(op, self.time, deadline, call_registry::on_cancel::leave, false,
                                 asio::redirect_error(asio::use_awaitable, waited));
  if (waited == errc::deadline_exceeded) {
    throw error(waited, "ticket store: the call's deadline passed while the store was at work");
  }
  if (waited) {
    throw error(waited, "ticket store: the call ended while the store was at work");
  }
  // The call's own cancellation and end came through the wait above: whatever the store threw is its own failure.
  std::exception_ptr failure;
  try {
    co_return op->take(); // rethrows what the store threw
  } catch (...) {
    failure = std::current_exception();
  }
  note_store_failure(self, operation, failure);
  co_return std::nullopt;
}

} // namespace

asio::awaitable<void> reuse_stored(client::impl& self, ticket_call& call) {
  auto const& batch = call.batch;
  std::vector<ticket_key> keys;
  keys.reserve(batch.episodes.size());
  for (auto const& e : batch.episodes) {
    keys.push_back(key_for(batch, e));
  }
  std::optional<std::vector<std::optional<ticket>>> found_at_once;
  try {
    found_at_once = self.store->try_find(keys);
  } catch (...) {
    note_store_failure(self, "try_find", std::current_exception());
    co_return; // nothing stored: every episode is asked of the server
  }
  std::vector<std::optional<ticket>> found;
  if (found_at_once) {
    found = std::move(*found_at_once);
  } else {
    auto lookup = await_store<std::vector<std::optional<ticket>>>(
        self, "find", [keys = std::move(keys)](ticket_store& store) mutable { return store.find(std::move(keys)); },
        call.settings.deadline);
    try {
      auto answered = co_await std::move(lookup); // named: GCC 12 and temporaries in co_await expressions
      if (!answered) {
        co_return; // the store failed: nothing stored
      }
      found = std::move(*answered);
    } catch (error const& e) {
      if (e.code() != errc::deadline_exceeded) {
        throw;
      }
      throw error(errc::deadline_exceeded, std::string(call.operation) + ": deadline of " +
                                               std::to_string(call.settings.total_timeout.count()) +
                                               " ms reached while the ticket store looked up the batch's tickets");
    }
  }
  for (std::size_t i = 0; i < found.size() && i < batch.episodes.size(); ++i) {
    if (!found[i]) {
      continue;
    }
    auto& item = item_at(call, i);
    item.outcome = item_outcome::granted;
    item.status = 200;
    item.reused = true;
    item.ticket = std::move(*found[i]);
    self.metrics.add_cache_hit();
  }
}

void plan(client::impl& self, ticket_call& call, clock::time_point now) {
  auto const& batch = call.batch;
  for (std::size_t i = 0; i < batch.episodes.size(); ++i) {
    if (call.result.items.empty() || call.result.items[i].outcome != item_outcome::granted) {
      call.pending.push_back(i);
    }
  }
  // While the admission gate knows the playback counter is under its reserve, where the server refuses
  // prefetches (told by a shed, or held empty after a 429), they are not sent at all: they come back `shed`, as the
  // server would have answered. And while it is congested (requests queue at its pace), a request of prefetches
  // only for a batch whose plays are already answered (from the store) is not sent either: the viewer has the play
  // and would otherwise wait for the prefetches' turn; they come back `deferred`. Plays wait for their turn at the
  // gate inside the engine.
  auto& gate = self.engine.gate();
  auto const is_prefetch = [&](std::size_t i) { return batch.episodes[i].intent == intent::prefetch; };
  bool const only_prefetches_left =
      !call.result.items.empty() && std::all_of(call.pending.begin(), call.pending.end(), is_prefetch);
  bool const shed = gate.under_reserve(playback_counter, now) || gate.held_until(playback_counter) > now;
  if (shed || (only_prefetches_left && gate.congested(playback_counter))) {
    for (std::size_t const i : call.pending) {
      if (is_prefetch(i)) {
        shed ? shed_item(item_at(call, i)) : defer_item(item_at(call, i));
      }
    }
    call.pending.erase_if(is_prefetch);
  }
  call.limited = self.limit && !call.pending.empty();
}

sending send(std::shared_ptr<client::impl> const& self, std::shared_ptr<ticket_call> const& shared_call,
             asio::any_io_executor const& executor) {
  ticket_call& call = *shared_call;
  // The body of the episodes still pending, written once from the caller's batch; the operation shares that batch
  // (no copy of its episodes) and knows which of them it sent.
  std::string body;
  write_checked_ticket_batch(call.batch, std::span<std::size_t const>(call.pending.begin(), call.pending.size()), body);
  call_settings settings = call.settings;
  // A request of prefetches only (the play came from the store, or was refused) is not retried unless asked:
  // a refused prefetch is reported and asked for again as play when the viewer gets there (docs/protocol.md §3).
  bool const any_play = std::any_of(call.pending.begin(), call.pending.end(),
                                    [&](std::size_t i) { return call.batch.episodes[i].intent == intent::play; });
  if (!any_play && !self->options.retry_prefetch) {
    settings.policy.max_retries = 0;
  }
  // A caller-chosen key means "this exact logical call": never merged with another.
  std::optional<std::string> key;
  if (self->options.coalesce && !settings.idempotency_key) {
    key = body;
  }
  // The reader lives in the operation (one allocation): the engine consults it after each response.
  auto make_reader = [&] {
    return batch_reader(self, std::shared_ptr<ticket_batch const>(shared_call, &call.batch), call.pending,
                        settings.policy.classifier, call.operation);
  };
  auto make = [&](batch_reader& reader) {
    request_traits traits{std::string(playback_counter), true, ticket_attempt_floor, call.operation,
                          ticket_min_time_left};
    if (call.limited) {
      return send_within_allowance(self, reader, call.who(), std::move(body), std::move(traits), std::move(settings));
    }
    http_request request = self->make_request(http_method::post, self->tickets_url, std::move(body));
    return self->engine.call(std::move(request), std::move(traits), std::move(settings), &reader);
  };
  auto finish = [](batch_reader& reader, call_result&& sent) { return reader.finish(std::move(sent)); };
  auto const deadline = settings.deadline;
  auto [op, joined] =
      self->calls.join_or_start_with<sent_batch>(std::move(key), executor, deadline, make_reader, make, finish);
  return sending{std::move(op), joined};
}

namespace {

/// True when the request carried prefetches only and the batch already has answers (its play from the store): then
/// the request's failure is those prefetches' failure, not the whole call's (one item's failure never affects
/// another's).
bool fails_items_only(ticket_call const& call) {
  return !call.result.items.empty() && std::none_of(call.pending.begin(), call.pending.end(), [&](std::size_t i) {
    return call.batch.episodes[i].intent == intent::play;
  });
}

/// Gives every sent item the outcome of the request's failure `e` (take_request_failure). A caller that joined the
/// request made none of its attempts (as on success).
void fail_pending(ticket_call& call, error const& e, bool coalesced) {
  for (std::size_t const i : call.pending) {
    take_request_failure(item_at(call, i), e, call.batch.episodes[i].intent);
  }
  call.result.attempts = coalesced ? 0 : e.attempts();
  call.result.http_status = e.http_status();
  call.result.request_id = e.request_id();
}

/// The caller's part of what the operation produced, or the call's failure as `wandura::error`.
void merge_or_throw(ticket_call& call, sending& sent, std::error_code waited) {
  auto const* progress = sent.op->progress();
  if (waited && !sent.coalesced && progress != nullptr) { // left its own request: what it had done so far
    throw progress->left_early(call.operation,
                               waited == asio::error::operation_aborted ? stop_reason::cancelled
                                                                        : stop_reason::deadline_exceeded,
                               call.settings.total_timeout);
  }
  if (waited == asio::error::operation_aborted) { // a joiner sent nothing
    throw error(asio::error::operation_aborted, std::string(call.operation) + ": cancelled");
  }
  if (waited) {
    throw error(errc::deadline_exceeded,
                std::string(call.operation) + ": deadline of " + std::to_string(call.settings.total_timeout.count()) +
                    " ms reached while waiting for an identical request in flight",
                error_info{});
  }
  sent_batch batch = sent.op->take();
  sent.owner = sent.op->claim();
  if (call.result.items.empty()) { // every episode was sent, in order (plan)
    call.result.items = std::move(batch.items);
  } else {
    for (std::size_t p = 0; p < call.pending.size(); ++p) {
      call.result.items[call.pending[p]] = std::move(batch.items[p]);
    }
  }
  if (!sent.owner) {
    for (std::size_t const i : call.pending) {
      auto& item = call.result.items[i];
      item.reused = item.reused || item.outcome == item_outcome::granted; // another caller reports it as fresh
    }
  }
  call.result.attempts = sent.coalesced ? 0 : batch.attempts;
  call.result.http_status = batch.http_status;
  call.result.request_id = std::move(batch.request_id);
  call.result.replayed = batch.replayed;
}

} // namespace

void merge(ticket_call& call, sending& sent, std::error_code waited) {
  try {
    merge_or_throw(call, sent, waited);
  } catch (error const& e) {
    if (e.code() == asio::error::operation_aborted || !fails_items_only(call)) {
      throw;
    }
    fail_pending(call, e, sent.coalesced);
  }
}

bool has_granted_to_store(ticket_call const& call, sending const& sent) noexcept {
  return call.reuses && sent.owner && std::any_of(call.pending.begin(), call.pending.end(), [&](std::size_t i) {
           return is_granted_ticket(call.result.items[i]);
         });
}

namespace {

/// The tickets the server granted the call, with their keys, for one store operation (one round trip out of
/// process).
std::vector<std::pair<ticket_key, ticket>> granted_tickets(ticket_call const& call) {
  std::vector<std::pair<ticket_key, ticket>> granted;
  for (std::size_t const i : call.pending) {
    auto const& item = call.result.items[i];
    if (is_granted_ticket(item)) {
      granted.emplace_back(key_for(call.batch, call.batch.episodes[i]), *item.ticket);
    }
  }
  return granted;
}

} // namespace

namespace {

/// `try_insert_many`; a store that throws has failed (counted, logged) and is taken as having stored the tickets:
/// they stay the caller's, unstored.
bool try_store_at_once(client::impl& self, std::vector<std::pair<ticket_key, ticket>>& fresh) {
  try {
    return self.store->try_insert_many(fresh);
  } catch (...) {
    note_store_failure(self, "try_insert_many", std::current_exception());
    return true;
  }
}

} // namespace

void store_granted_at_once(client::impl& self, ticket_call& call) {
  auto granted = granted_tickets(call);
  (void)try_store_at_once(self, granted);
}

asio::awaitable<void> store_granted(client::impl& self, ticket_call& call) {
  auto granted = granted_tickets(call);
  if (try_store_at_once(self, granted)) {
    co_return;
  }
  auto insert = await_store<void>(
      self, "insert_many",
      [granted = std::move(granted)](ticket_store& store) mutable { return store.insert_many(std::move(granted)); },
      call.settings.deadline);
  try {
    (void)co_await std::move(insert); // named: GCC 12 and temporaries in co_await expressions; nullopt: failed
  } catch (error const& e) {
    if (e.code() != errc::deadline_exceeded) {
      throw;
    }
    // The tickets are the caller's, granted within its deadline: a store still writing them when it passes is
    // given up (cancelled), and they are not reused.
  }
}

void finish_items(client::impl& self, ticket_call& call) {
  for (std::size_t i = 0; i < call.result.items.size(); ++i) {
    auto& item = call.result.items[i];
    if (item.film_ref.empty()) { // not filled by a response: the episode as asked
      auto const& e = call.batch.episodes[i];
      item.film_ref = e.film_ref;
      item.episode_no = e.episode_no;
      item.intent = e.intent;
    }
    self.metrics.add_outcome(item.outcome);
  }
}

} // namespace wandura::detail
