// The calls in flight of one client: singleflight with per-waiter semantics (docs/protocol.md §3 "a concurrent
// identical request joins the one in flight"), and the one list that `~client()` and `client::shutdown()` cancel.
//
// Every call of a client runs its work as an *operation*: a coroutine spawned detached on the caller's executor (on
// the client's when the caller runs on another context), with its own cancellation signal, owning everything it uses.
// Every caller, the one that started it included, is a *waiter*: it waits under its own deadline and its own
// cancellation slot, and leaves alone. An operation started with a key may be joined by later callers with an equal key
// while it runs; one started without a key is never shared. When the last waiter of an operation leaves, the operation
// is cancelled (terminal) and forgotten by its key, so that it sends nothing more and nobody joins it. A request's
// last waiter cancelled on the operation's own context does not leave at once: it completes with the operation's end,
// so that an answer read before the cancellation came is its result (the retry engine's rule), not lost with nobody
// to take it (`on_cancel`).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>

#include "context_shutdown.hpp"
#include "playback/call_progress.hpp"
#include "wandura/error.hpp"
#include "wandura/resilience/clock.hpp"

namespace wandura::detail {

/// A suspended completion `void(std::error_code)`, completed at most once by posting to its own executor; it keeps
/// that executor's context running (outstanding work) until then. A coroutine's handler is kept in place (no
/// allocation); a larger one on the heap.
class pending_completion {
public:
  template <class Handler> explicit pending_completion(Handler handler) {
    using model_t = model<Handler>;
    if constexpr (fits_inline<model_t>()) {
      impl_ = ::new (static_cast<void*>(&buffer_)) model_t(std::move(handler));
    } else {
      impl_ = new model_t(std::move(handler));
    }
  }
  pending_completion(pending_completion&& other) noexcept { take(other); }
  pending_completion& operator=(pending_completion&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  pending_completion(pending_completion const&) = delete;
  pending_completion& operator=(pending_completion const&) = delete;
  ~pending_completion() { reset(); }

  /// Posts the completion. @pre not completed yet.
  void complete(std::error_code ec) && {
    impl_->complete(ec, false);
    reset();
  }

  /// Runs the completion at once when the caller already runs on its executor, posts it otherwise. Only for a
  /// caller that is not the initiating function and holds no lock. @pre not completed yet.
  void complete_here(std::error_code ec) && {
    impl_->complete(ec, true);
    reset();
  }

  /// The execution context the completion runs on. @pre not completed yet.
  [[nodiscard]] asio::execution_context& context() const noexcept { return impl_->context(); }

private:
  static constexpr std::size_t buffer_size = 128;

  struct concept_t {
    concept_t() = default;
    concept_t(concept_t const&) = delete;
    concept_t& operator=(concept_t const&) = delete;
    virtual ~concept_t() = default;
    virtual void complete(std::error_code ec, bool may_run_here) = 0;
    [[nodiscard]] virtual asio::execution_context& context() const noexcept = 0;
    /// Moves this into `buffer` (this one is then destroyed by the caller); only for models kept in place.
    virtual concept_t* move_to(void* buffer) noexcept = 0;
  };
  template <class Handler> struct model final : concept_t {
    explicit model(Handler h)
        : handler(std::move(h)),
          work(asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked)) {}
    model(model&& other) noexcept : concept_t(), handler(std::move(other.handler)), work(std::move(other.work)) {}
    void complete(std::error_code ec, bool may_run_here) override {
      auto f = [h = std::move(handler), ec]() mutable { std::move(h)(ec); };
      if (may_run_here) {
        asio::dispatch(work, std::move(f));
      } else {
        asio::post(work, std::move(f));
      }
    }
    concept_t* move_to(void* buffer) noexcept override { return ::new (buffer) model(std::move(*this)); }
    [[nodiscard]] asio::execution_context& context() const noexcept override {
      return asio::query(work, asio::execution::context);
    }
    Handler handler;
    std::decay_t<decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                                       asio::execution::outstanding_work.tracked))>
        work;
  };
  template <class Model> static constexpr bool fits_inline() noexcept {
    return sizeof(Model) <= buffer_size && alignof(Model) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<Model>;
  }
  [[nodiscard]] bool is_inline() const noexcept {
    return static_cast<void const*>(impl_) == static_cast<void const*>(&buffer_);
  }
  void take(pending_completion& other) noexcept {
    if (other.is_inline()) {
      impl_ = other.impl_->move_to(&buffer_);
      other.reset();
    } else {
      impl_ = std::exchange(other.impl_, nullptr);
    }
  }
  void reset() noexcept {
    if (impl_ == nullptr) {
      return;
    }
    if (is_inline()) {
      impl_->~concept_t();
    } else {
      delete impl_;
    }
    impl_ = nullptr;
  }

  alignas(std::max_align_t) std::byte buffer_[buffer_size];
  concept_t* impl_ = nullptr;
};

/// The registry of one client's operations. See the file comment.
///
/// @par Thread safety
/// Every member function may be called from any thread at once. Waiters are completed on their own executors; an
/// operation's cancellation is emitted on its own executor (the Asio rule for cancellation slots).
///
/// An operation's executor serialises its handlers: emitting its cancellation and its own resumptions never run at
/// once (Asio's cancellation slots are not thread-safe: a handler being emitted on one thread while the operation,
/// resumed on another, replaces it is a data race). It is the caller's executor when that already serialises (a
/// strand, or an `io_context` made with concurrency hint 1, which its user promises to run on one thread), and a
/// strand of it otherwise, made for the operation (two allocations). The operation's start runs there too. A caller
/// on another context than the client's (`home`) has its operation run on the client's executor, serialised the
/// same way: what the operation parks (a transport's sends, a place at the admission gate, a Redis command) then
/// belongs to the client's context, and the caller's context, when it is destroyed, frees only the caller's wait. A
/// waiter whose deadline is earlier than the operation's, or who waits from another context, has a deadline timer
/// on its own executor, serialised the same way, so that it fires even when the operation's context has stopped
/// running (its callers may all have left). A cancellation asked for before the operation's start or a timer's is
/// handed to it (`start_latch`).
class call_registry {
  struct operation_base;

public:
  /// An operation producing `T`, as its waiters see it.
  template <class T> class operation;

  /// @param home the client's executor: whether its `io_context` runs on one thread is read once, here (callers on
  ///        other contexts are asked each time).
  explicit call_registry(asio::any_io_executor const& home = {});
  call_registry(call_registry const&) = delete;
  call_registry& operator=(call_registry const&) = delete;
  ~call_registry() = default;

  /// Joins the operation in flight for `key`, or starts one: `make()` (called at once, only when starting) returns
  /// an `asio::awaitable<R>` whose parameters own what it uses; it is spawned on `executor` with the operation's
  /// cancellation signal, and `finish(R&&)` turns its result into the `T` every waiter receives (or throws the error
  /// they all get). `deadline` is the operation's own (its first caller's).
  /// @returns the operation and whether this caller joined one in flight. The caller is expected to `async_wait`
  /// for it next, without suspending in between: until it does, the operation is not cancelled when its other
  /// waiters leave (one that never waits leaves the operation to run to its end, unless the others stay).
  /// @throws wandura::error `operation_aborted` once the registry is closed (`cancel_all`); whatever `make` throws
  ///         (the operation is then not listed: a later call with its key starts one).
  template <class T, class Make, class Finish>
  std::pair<std::shared_ptr<operation<T>>, bool> join_or_start(std::optional<std::string> key,
                                                               asio::any_io_executor const& executor,
                                                               clock::time_point deadline, Make make, Finish finish) {
    return join_or_start_with<T>(
        std::move(key), executor, deadline, [] { return std::monostate{}; },
        [&make](std::monostate&) { return make(); },
        [finish = std::move(finish)](std::monostate&, auto&& produced) mutable {
          return finish(std::forward<decltype(produced)>(produced));
        });
  }

  /// For a call about to end without an operation (a ticket call the store alone answered): a closed registry
  /// refuses it as `join_or_start` refuses one that needs an operation.
  /// @throws wandura::error `operation_aborted` once the registry is closed (`cancel_all`).
  void throw_if_closed() const;

  /// `join_or_start` for an operation that keeps a context of its own (in the same allocation): `make_context()`
  /// returns it (a prvalue: it need not be movable), `make(Context&)` and `finish(Context&, R&&)` use it.
  template <class T, class MakeContext, class Make, class Finish>
  std::pair<std::shared_ptr<operation<T>>, bool>
  join_or_start_with(std::optional<std::string> key, asio::any_io_executor const& executor, clock::time_point deadline,
                     MakeContext make_context, Make make, Finish finish);

  /// What a waiter's cancellation does when the waiter is its operation's last and waits on the operation's context
  /// (a waiter on another context, or one of several, always leaves at once: that context may not be running the
  /// operation's, and the others take the operation's result).
  enum class on_cancel : std::uint8_t {
    /// The waiter completes with `operation_aborted` at once and the operation is cancelled (a ticket store's work:
    /// the call ends at once, whatever the store does after).
    leave,
    /// The operation is cancelled and the waiter completes with its end: what the operation read before the
    /// cancellation came is the waiter's (a request: a 2xx read stands, as the retry engine ends it, so that its
    /// tickets are not issued for nobody). A cancelled request ends within a few handlers of its context: it sends
    /// nothing more, an attempt on the wire is aborted, a wait ends.
    end_with_operation,
  };

  /// Waits for `op` as one waiter: completes with an empty code when the operation is done (its value or error is
  /// then in `op`), `operation_aborted` when this waiter's cancellation slot is emitted (unless `cancelled` says it
  /// ends with the operation) or the registry is closed, `errc::deadline_exceeded` when `deadline` passes on `time`
  /// first (a timer runs only when `deadline` is earlier than the operation's).
  ///
  /// `cancelled_already`: the caller's cancellation was emitted before this wait began (from inside the operation's
  /// start, which runs at once on the caller's executor: an attempt observer's hook, a sender that answers at once);
  /// the waiter is then cancelled as it is added, as its slot would have been. (Such a caller must await this with
  /// `asio::this_coro::throw_if_cancelled(false)`: Asio would throw from the `co_await` itself, and the operation
  /// would run on with nobody waiting for it.)
  template <class T, class Token>
  auto async_wait(std::shared_ptr<operation<T>> op, std::shared_ptr<wandura::clock> time, clock::time_point deadline,
                  on_cancel cancelled, bool cancelled_already, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto handler, std::shared_ptr<operation_base> target, std::shared_ptr<wandura::clock> t,
               clock::time_point d, on_cancel c,
               bool already) { this->enqueue(std::move(target), std::move(t), d, c, already, std::move(handler)); },
        token, std::shared_ptr<operation_base>(std::move(op)), std::move(time), deadline, cancelled, cancelled_already);
  }

  /// Closes the registry: new calls fail with `operation_aborted`; every waiter completes with `operation_aborted`
  /// and every operation is cancelled. Does not block.
  void cancel_all();

  /// Completes (`void(std::error_code)`, always empty) once no operation runs any more; at once when none does.
  template <class Token> auto async_wait_idle(Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto handler) {
          std::unique_lock lock(state_->mutex);
          if (state_->running.empty()) {
            lock.unlock();
            pending_completion(std::move(handler)).complete({});
            return;
          }
          state_->idle_waiters.emplace_back(std::move(handler));
        },
        token);
  }

  /// Where an operation started by a caller on `caller` runs, before it is serialised: `caller` when it belongs to
  /// the client's context (or the registry has no `home`), the client's executor otherwise.
  [[nodiscard]] asio::any_io_executor const& runs_on(asio::any_io_executor const& caller) const noexcept;
  /// The executor of an operation started by a caller on `caller`: `runs_on(caller)`, serialised. `enter_here`
  /// tells whether the caller runs in it already (it is `caller` itself), so that the operation may start at once.
  [[nodiscard]] asio::any_io_executor operation_executor(asio::any_io_executor const& caller, bool& enter_here) const;
  /// The executor of an operation started by a caller on `caller` (see the class comment); `own_strand` tells
  /// whether it is a strand made for it. Any thread.
  [[nodiscard]] asio::any_io_executor serialized(asio::any_io_executor const& caller, bool& own_strand) const;

  /// Operations running (keyed or not).
  [[nodiscard]] std::size_t in_flight() const;
  /// Waiters over all operations.
  [[nodiscard]] std::size_t waiting() const;

private:
  /// Orders a cancellation, asked for on any thread, against the start of what it cancels, which runs on the
  /// executor the cancellation is emitted on: one asked for before the start is handed to the start (the canceller
  /// emits nothing); one asked for after it is posted to that executor, so it runs behind the start. Without it, a
  /// cancellation posted while the start is still on its way (the operation listed but not launched, a deadline
  /// timer not yet spawned) could run on another thread first, find no handler in the slot and be lost, or run
  /// while the handler is being installed.
  class start_latch {
  public:
    /// The canceller's side: true when the work has started (post the emission to its executor), false when the
    /// start will see the cancellation (or a cancellation was asked for already).
    [[nodiscard]] bool cancel() noexcept {
      int seen = idle;
      return !state_.compare_exchange_strong(seen, cancelled, std::memory_order_acq_rel) && seen == started;
    }
    /// The starter's side, on the work's executor before it starts the work: true when cancelled before.
    [[nodiscard]] bool start() noexcept {
      int seen = idle;
      return !state_.compare_exchange_strong(seen, started, std::memory_order_acq_rel);
    }

  private:
    enum : int { idle, started, cancelled };
    std::atomic<int> state_{idle};
  };

  /// A waiter's deadline timer: its signal, emitted on the waiter's `timer_executor` only, and its start.
  struct waiter_timer {
    asio::cancellation_signal signal;
    start_latch latch;
  };

  struct waiter {
    // User-provided, so that the type is default-constructible inside the enclosing class (clang does not use the
    // default member initializers of a nested class before the enclosing class is complete).
    waiter() noexcept {} // NOLINT(modernize-use-equals-default)
    std::uint64_t id = 0;
    std::optional<pending_completion> completion;
    /// Cancels the waiter's deadline timer, when it has one (emitted on `timer_executor`).
    std::shared_ptr<waiter_timer> timer;
    asio::any_io_executor timer_executor;
    /// `on_cancel::end_with_operation`, and it waits on the operation's context (see `leave`).
    bool ends_with_operation = false;
    /// Its cancellation went to the operation (`ends_with_operation`): it completes with the operation's end.
    bool cancelled = false;
  };

  /// The waiters of one operation: the first in place (most operations have exactly one), the others in a vector.
  class waiter_list {
  public:
    waiter& add() { return first_ ? rest_.emplace_back() : first_.emplace(); }
    [[nodiscard]] bool empty() const noexcept { return !first_ && rest_.empty(); }
    [[nodiscard]] std::size_t size() const noexcept { return (first_ ? 1U : 0U) + rest_.size(); }
    /// Waiter `id`; null when it is no longer there (it completed already).
    [[nodiscard]] waiter* find(std::uint64_t id) noexcept {
      if (first_ && first_->id == id) {
        return &*first_;
      }
      auto it = std::find_if(rest_.begin(), rest_.end(), [id](waiter const& w) { return w.id == id; });
      return it != rest_.end() ? &*it : nullptr;
    }
    /// Removes and returns waiter `id`; nullopt when it is no longer there (it completed already).
    std::optional<waiter> remove(std::uint64_t id) {
      std::optional<waiter> out;
      if (first_ && first_->id == id) {
        out = std::move(first_);
        first_.reset();
        return out;
      }
      auto it = std::find_if(rest_.begin(), rest_.end(), [id](waiter const& w) { return w.id == id; });
      if (it != rest_.end()) {
        out = std::move(*it);
        rest_.erase(it);
      }
      return out;
    }
    /// Moves every waiter out, leaving none: each waiter is moved once (std::exchange and an assignment would
    /// move each twice, and a waiter's completion is moved through a virtual call).
    waiter_list take_all() {
      waiter_list out;
      if (first_) {
        out.first_.emplace(std::move(*first_));
        first_.reset();
      }
      out.rest_.swap(rest_);
      return out;
    }
    /// Moves out the waiters whose completion runs on `context`.
    waiter_list take_from(asio::execution_context const& context) {
      waiter_list out;
      if (first_ && &first_->completion->context() == &context) {
        out.first_.emplace(std::move(*first_));
        first_.reset();
      }
      for (auto it = rest_.begin(); it != rest_.end();) {
        if (&it->completion->context() == &context) {
          out.add() = std::move(*it);
          it = rest_.erase(it);
        } else {
          ++it;
        }
      }
      return out;
    }
    template <class F> void for_each(F&& f) {
      if (first_) {
        f(*first_);
      }
      for (auto& w : rest_) {
        f(w);
      }
    }

  private:
    std::optional<waiter> first_;
    std::vector<waiter> rest_;
  };

  /// A key as the map holds it: a view of an operation's own `key` with its hash, computed once per call (a key is
  /// a whole request body; the map would hash it again to erase it).
  struct key_view {
    std::string_view text;
    std::size_t hash = 0;
    friend bool operator==(key_view const& a, key_view const& b) noexcept { return a.text == b.text; }
  };
  struct key_hash {
    std::size_t operator()(key_view const& k) const noexcept { return k.hash; }
  };
  static key_view view_of(std::string const& key) noexcept { return {key, std::hash<std::string_view>{}(key)}; }

  struct operation_base {
    std::optional<std::string> key;
    std::size_t key_hash = 0; ///< of `key`, when there is one
    asio::any_io_executor executor;
    clock::time_point deadline;
    asio::cancellation_signal signal; // emitted on `executor` only
    start_latch started;              // orders `cancel_operation` against `launch`
    waiter_list waiters;
    /// Callers given this operation by `join_or_start` who have not become waiters yet: the one that started it
    /// from its start to its `async_wait` (the operation runs meanwhile), a joiner from its join to its own. While
    /// any is on its way, the last waiter's leaving does not cancel the operation: that caller still wants it.
    std::size_t arriving = 0;
    bool done = false;
    std::exception_ptr error;      // set, or the value is, before `done`
    std::size_t running_index = 0; // position in `state::running` while it runs
    virtual ~operation_base() = default;
  };

  /// Registered with `context_shutdown` for the home context (where the operations of callers on other contexts
  /// run) and for each context a waiter parks a handler of: at that context's shutdown,
  /// `abandon` frees its waiters unrun and drops the operations running on it (their coroutines are freed where
  /// they are suspended); waiters of other contexts on those operations complete with `operation_aborted`. An
  /// operation running elsewhere that is left without waiters is cancelled, as when its last waiter leaves.
  struct state final : parked_handlers {
    void abandon(asio::execution_context& context) noexcept override;
    /// Drops `op` from `by_key` when it is there (under `mutex`).
    void forget_key(operation_base const& op) noexcept;
    mutable std::mutex mutex;
    /// Keyed by a view of the operation's own `key` (it is not modified while the operation is here): the key, a
    /// whole request body, is not copied a second time.
    std::unordered_map<key_view, std::shared_ptr<operation_base>, key_hash> by_key;
    std::vector<std::shared_ptr<operation_base>> running;
    std::vector<pending_completion> idle_waiters;
    std::uint64_t next_waiter = 0;
    bool closed = false;
    asio::execution_context* parked_on = nullptr; ///< The context last registered with.
  };

  template <class Handler>
  void enqueue(std::shared_ptr<operation_base> op, std::shared_ptr<wandura::clock> time, clock::time_point deadline,
               on_cancel cancelled, bool cancelled_already, Handler handler);
  void start_timer(std::shared_ptr<operation_base> const& op, std::uint64_t id, std::shared_ptr<waiter_timer> timer,
                   asio::any_io_executor const& executor, std::shared_ptr<wandura::clock> time,
                   clock::time_point deadline);
  static void leave(std::weak_ptr<state> weak, std::shared_ptr<operation_base> op, std::uint64_t id,
                    std::error_code why);
  /// @param on_its_executor called at the operation's end, on its executor: a waiter on that executor may resume at
  ///        once (false: every waiter's completion is posted).
  static void publish(std::weak_ptr<state> const& weak, std::shared_ptr<operation_base> const& op,
                      bool on_its_executor = true);
  /// Completes `w` with `ec` and stops its timer; `may_run_here`: see `pending_completion::complete_here`.
  static void release(waiter& w, std::error_code ec, bool may_run_here = false);
  static void cancel_operation(std::shared_ptr<operation_base> const& op);

  /// The body of an operation: awaits `work`, hands its result to `finish`, publishes. It is the bottom frame of
  /// its own thread of execution (see `launch`), so an operation costs one coroutine frame besides `work`.
  template <class Op, class R, class Finish>
  static asio::awaitable<asio::detail::awaitable_thread_entry_point>
  run(std::weak_ptr<state> weak, std::shared_ptr<Op> op, asio::awaitable<R> work, Finish finish);
  /// Starts `body` on the operation's executor at once, as `co_spawn` would, with the operation's signal as its
  /// cancellation slot. Without `co_spawn`'s wrapper: no second frame, no completion handler to move the result
  /// through. `enter_here`: the executor is the caller's own, which runs the body here; otherwise it is entered
  /// first (at once when called on a thread running it).
  static void launch(std::shared_ptr<operation_base> const& op, bool enter_here,
                     asio::awaitable<asio::detail::awaitable_thread_entry_point> body);

  std::shared_ptr<state> state_;
  /// The client's context when it is an `io_context` run on one thread (concurrency hint 1), read once; null
  /// otherwise.
  asio::execution_context const* one_thread_home_ = nullptr;
  /// The client's executor and its execution context (of any kind; null without a `home`): where the operations of
  /// callers on other contexts run.
  asio::any_io_executor home_executor_;
  asio::execution_context const* home_context_ = nullptr;
};

template <class T> class call_registry::operation : public call_registry::operation_base {
public:
  /// The result once done without error: a copy for joinable operations (several waiters), moved out otherwise.
  /// @pre the waiter completed with an empty code; rethrows the operation's error.
  [[nodiscard]] T take() {
    if (error) {
      std::rethrow_exception(error);
    }
    if (key) {
      return *value;
    }
    return std::move(*value);
  }

  /// True for the first waiter that asks, once the operation is done, false for every other: the one that takes
  /// charge of what should happen once per operation (for a ticket batch, reporting and storing its granted tickets),
  /// whichever of the callers are still there. Any thread.
  [[nodiscard]] bool claim() noexcept { return !claimed.exchange(true, std::memory_order_acq_rel); }

  /// How far the operation got, when its context tracks it (a `progress()` member, as the ticket batch's reader);
  /// null otherwise. Any thread.
  [[nodiscard]] virtual call_progress const* progress() const noexcept { return nullptr; }

private:
  friend class call_registry;
  std::optional<T> value;
  std::atomic<bool> claimed{false};
};

namespace call_registry_detail {
/// An operation and the context it keeps, in one allocation.
template <class T, class Context> class operation_with final : public call_registry::operation<T> {
public:
  template <class MakeContext> explicit operation_with(MakeContext& make_context) : context(make_context()) {}
  [[nodiscard]] call_progress const* progress() const noexcept override {
    if constexpr (requires(Context const& c) { c.progress(); }) {
      return &context.progress();
    } else {
      return nullptr;
    }
  }
  Context context;
};
} // namespace call_registry_detail

template <class T, class MakeContext, class Make, class Finish>
std::pair<std::shared_ptr<call_registry::operation<T>>, bool>
call_registry::join_or_start_with(std::optional<std::string> key, asio::any_io_executor const& executor,
                                  clock::time_point deadline, MakeContext make_context, Make make, Finish finish) {
  using context_type = std::decay_t<decltype(make_context())>;
  std::shared_ptr<call_registry_detail::operation_with<T, context_type>> op;
  key_view const wanted = key ? view_of(*key) : key_view{};
  bool enter_here = false;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->closed) {
      throw error(asio::error::operation_aborted, "client: shut down");
    }
    if (key) {
      auto it = state_->by_key.find(wanted);
      if (it != state_->by_key.end()) {
        ++it->second->arriving;
        return {std::static_pointer_cast<operation<T>>(it->second), true};
      }
    }
    op = std::make_shared<call_registry_detail::operation_with<T, context_type>>(make_context);
    op->executor = operation_executor(executor, enter_here);
    op->deadline = deadline;
    op->arriving = 1; // its first caller, until its async_wait
    if (key) {
      op->key = std::move(key); // a moved string keeps its characters, and so the hash
      op->key_hash = wanted.hash;
      state_->by_key.emplace(key_view{*op->key, wanted.hash}, op);
    }
    op->running_index = state_->running.size();
    state_->running.push_back(op);
  }
  try {
    auto work = make(op->context); // named before spawning: GCC 12 and temporaries in coroutine calls
    launch(op, enter_here, run(std::weak_ptr<state>(state_), op, std::move(work), std::move(finish)));
  } catch (...) {
    // Nothing started (`make`, the body's frame or `launch` ran out of memory, or `make` threw): the operation is
    // unlisted, so that later calls with its key start afresh and `async_wait_idle` is not held. A caller that
    // joined it meanwhile gets the same exception from `take`, its completion posted (this is not the operation's
    // executor).
    op->error = std::current_exception();
    publish(std::weak_ptr<state>(state_), op, false);
    throw;
  }
  return {op, false};
}

template <class Op, class R, class Finish>
asio::awaitable<asio::detail::awaitable_thread_entry_point>
call_registry::run(std::weak_ptr<state> weak, std::shared_ptr<Op> op, asio::awaitable<R> work, Finish finish) {
  // Keeps the executor's context running until the operation ends, as co_spawn does.
  auto const tracked = asio::prefer(op->executor, asio::execution::outstanding_work.tracked);
  try {
    R produced = co_await std::move(work); // named: GCC 12 and class temporaries in co_await expressions
    op->value.emplace(finish(op->context, std::move(produced)));
  } catch (error const&) {
    op->error = std::current_exception();
  } catch (std::system_error const& e) {
    // Asio's own, thrown by a `co_await` in a cancelled frame: the one above when the operation was cancelled before
    // it started (`launch`). Its waiters see a `wandura::error`, as from every other end of an operation.
    op->error = e.code() == asio::error::operation_aborted
                    ? std::make_exception_ptr(error(e.code(), "client: the call was cancelled"))
                    : std::current_exception();
  } catch (...) {
    op->error = std::current_exception();
  }
  publish(weak, op);
}

template <class Handler>
void call_registry::enqueue(std::shared_ptr<operation_base> op, std::shared_ptr<wandura::clock> time,
                            clock::time_point deadline, on_cancel cancelled, bool cancelled_already, Handler handler) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  // A waiter has a deadline timer of its own, on its own executor (serialised as the operation's is), when its
  // deadline comes before the operation's, or when it waits from another context than the operation runs on: the
  // operation's deadline is kept there, which may have stopped running since the callers of its own left. Made
  // before the lock (a strand may be made).
  asio::any_io_executor timer_executor;
  asio::any_io_executor const waits_on = asio::get_associated_executor(handler, op->executor);
  bool const on_its_context = &context_of(waits_on) == &context_of(op->executor);
  if (deadline < op->deadline || !on_its_context) {
    bool own_strand = false;
    timer_executor = serialized(waits_on, own_strand);
  }
  std::unique_lock lock(state_->mutex);
  if (op->arriving > 0) {
    --op->arriving; // this caller has arrived (a second wait of one caller finds none left: nothing to undo)
  }
  if (op->done || state_->closed) {
    bool const aborted = !op->done;
    lock.unlock();
    pending_completion(std::move(handler)).complete(aborted ? asio::error::operation_aborted : std::error_code{});
    return;
  }
  waiter& w = op->waiters.add();
  w.id = ++state_->next_waiter;
  w.ends_with_operation = cancelled == on_cancel::end_with_operation && on_its_context;
  w.completion.emplace(std::move(handler));
  asio::execution_context& context = w.completion->context();
  if (std::exchange(state_->parked_on, &context) != &context) {
    // Registered before the lock is released, so before anything can complete the waiter. Rare (once per context
    // in a row); `add` takes only the service's own lock.
    try {
      context_shutdown::add(context, std::weak_ptr<state>(state_));
    } catch (...) { // out of memory: only a teardown without running the context would leak
      state_->parked_on = nullptr;
    }
  }
  if (slot.is_connected()) {
    // The operation by a weak pointer: a caller's signal may outlive the operation, and even its io_context (the
    // operation's strand must not).
    slot.assign([weak = std::weak_ptr<state>(state_), weak_op = std::weak_ptr<operation_base>(op),
                 id = w.id](asio::cancellation_type) {
      if (auto still = weak_op.lock()) {
        leave(weak, std::move(still), id, asio::error::operation_aborted);
      }
    });
  }
  auto const id = w.id;
  if (timer_executor) {
    w.timer = std::make_shared<waiter_timer>();
    w.timer_executor = timer_executor;
    auto timer = w.timer;
    lock.unlock();
    start_timer(op, id, std::move(timer), timer_executor, std::move(time), deadline);
  } else {
    lock.unlock();
  }
  if (cancelled_already) {
    leave(std::weak_ptr<state>(state_), op, id, asio::error::operation_aborted); // as its slot would have
  }
}

} // namespace wandura::detail
