// Request coalescing: a concurrent identical call joins the one in flight instead of sending another (SPEC §3;
// seed 000 "Dùng lại vé cho đúng"). Not public API (wandura::detail): the client keys it by viewer_ref +
// union_info + film + episode + intent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace wandura::detail {

/// What `inflight_table::run_or_join` produced for one caller.
template <class T> struct joined_result {
  T value;                ///< The operation's result (each caller gets its own copy).
  bool coalesced = false; ///< True when this caller joined an operation another caller started.
};

/// A map from key to an operation in flight whose result every caller asking for the same key shares.
///
/// The first caller for a key starts the operation; it runs as its own coroutine (`asio::co_spawn` on that
/// caller's executor), detached from any caller, and every caller (the first included) waits for its result. When
/// it completes, every waiter receives a copy of the value, or the same exception rethrown, and the key is free
/// again: the table coalesces only calls that overlap in time; it caches nothing.
///
/// @tparam T the result type; copyable, since each waiter gets a copy.
/// @par Cancellation
/// Cancelling a waiting caller (terminal cancellation through its coroutine's cancellation slot) ends that caller's
/// wait at once with `asio::error::operation_aborted` (thrown as `asio::system_error` from `run_or_join`); the
/// operation keeps running for the others and still completes (so its result can still be cached by its own
/// code). Only the operation's own failure reaches every waiter.
/// @par Thread safety
/// `run_or_join` may be called from any thread and many coroutines at once. Waiters are resumed through their own
/// executors. The table may be destroyed while operations are in flight: they still complete their waiters.
template <class Key, class T, class Hash = std::hash<Key>, class Equal = std::equal_to<Key>> class inflight_table {
  static_assert(std::is_copy_constructible_v<T>, "every waiter receives a copy of the result");

public:
  inflight_table() : state_(std::make_shared<state>()) {}
  inflight_table(inflight_table const&) = delete;
  inflight_table& operator=(inflight_table const&) = delete;
  ~inflight_table() = default;

  /// Runs `start()` for `key`, or joins the call already in flight for an equal key, and returns its result.
  ///
  /// @param key identifies the call; equal keys share one operation.
  /// @param start a callable returning `asio::awaitable<T>`, invoked at most once per operation. It may outlive
  ///   the calling coroutine (the operation is detached from callers), so it must own what it uses: capture by
  ///   value or by `shared_ptr`, never references to the caller's locals.
  /// @throws whatever the operation threw (every waiter gets the same exception); `asio::system_error` with
  ///   `operation_aborted` when this caller was cancelled while waiting.
  /// @par GCC 12
  /// GCC 12.2 destroys a class-type temporary created inside a `co_await` expression twice (fixed in GCC 13). Name
  /// the key and the callable before awaiting: `auto op = [...]{...}; co_await table.run_or_join(key, op);`.
  template <class Start> [[nodiscard]] asio::awaitable<joined_result<T>> run_or_join(Key key, Start start) {
    auto executor = co_await asio::this_coro::executor;
    std::shared_ptr<entry> e;
    bool leader = false;
    {
      std::lock_guard lock(state_->mutex);
      auto it = state_->entries.find(key);
      if (it == state_->entries.end()) {
        e = std::make_shared<entry>();
        state_->entries.emplace(key, e);
        leader = true;
      } else {
        e = it->second;
      }
    }
    if (leader) {
      asio::co_spawn(executor, run_operation(std::move(start)),
                     [weak = std::weak_ptr<state>(state_), key = std::move(key), e](std::exception_ptr const& failed,
                                                                                    outcome result) mutable {
                       if (failed) { // run_operation catches everything; should anything escape it, waiters get that
                         result.error = failed;
                       }
                       publish(weak, key, e, std::move(result));
                     });
    }
    co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::error_code)>(
        [](auto handler, std::shared_ptr<state> const& s, std::shared_ptr<entry> const& target) {
          enqueue(s, target, std::move(handler));
        },
        asio::use_awaitable, state_, e);
    // The result is written before any waiter is completed and never changes afterwards.
    if (e->result.error) {
      std::rethrow_exception(e->result.error);
    }
    co_return joined_result<T>{*e->result.value, !leader};
  }

  /// Operations in flight (distinct keys).
  [[nodiscard]] std::size_t in_flight() const {
    std::lock_guard lock(state_->mutex);
    return state_->entries.size();
  }

  /// Callers currently waiting, over all keys.
  [[nodiscard]] std::size_t waiting() const {
    std::lock_guard lock(state_->mutex);
    std::size_t total = 0;
    for (auto const& [k, e] : state_->entries) {
      total += e->waiters.size();
    }
    return total;
  }

private:
  /// What the operation produced: its value, or the exception it threw; neither until it completes. (Not a
  /// std::variant: GCC 12 at -O3 warns that a variant's exception_ptr may be moved uninitialized inside Asio's
  /// co_spawn, a false alarm that -Werror turns into a failed build.)
  struct outcome {
    std::optional<T> value;
    std::exception_ptr error;
  };

  /// A suspended caller: completes it (by posting to its executor) exactly once.
  class waiter {
  public:
    template <class Handler>
    waiter(std::uint64_t id, Handler handler) : id_(id), impl_(std::make_unique<model<Handler>>(std::move(handler))) {}
    [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
    void complete(std::error_code ec) && { std::exchange(impl_, nullptr)->complete(ec); }

  private:
    struct concept_t {
      virtual ~concept_t() = default;
      virtual void complete(std::error_code ec) = 0;
    };
    template <class Handler> struct model final : concept_t {
      explicit model(Handler h)
          : handler(std::move(h)),
            work(asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked)) {}
      void complete(std::error_code ec) override {
        asio::post(work, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
      }
      Handler handler;
      // Keeps the waiter's execution context running while it waits.
      std::decay_t<decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                                         asio::execution::outstanding_work.tracked))>
          work;
    };
    std::uint64_t id_;
    std::unique_ptr<concept_t> impl_;
  };

  struct entry {
    outcome result; // set once, under the mutex, before waiters are completed
    bool done = false;
    std::vector<waiter> waiters;
  };

  struct state {
    mutable std::mutex mutex;
    std::unordered_map<Key, std::shared_ptr<entry>, Hash, Equal> entries;
    std::uint64_t next_waiter_id = 0;
  };

  /// The operation as its own coroutine; it owns `start` for as long as it runs.
  template <class Start> static asio::awaitable<outcome> run_operation(Start start) {
    outcome result;
    try {
      T value = co_await start();
      result.value.emplace(std::move(value));
    } catch (...) {
      result.error = std::current_exception();
    }
    co_return result;
  }

  template <class Handler>
  static void enqueue(std::shared_ptr<state> const& s, std::shared_ptr<entry> const& e, Handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    std::unique_lock lock(s->mutex);
    if (e->done) {
      lock.unlock();
      waiter(0, std::move(handler)).complete({});
      return;
    }
    auto const id = ++s->next_waiter_id;
    if (slot.is_connected()) {
      slot.assign([weak = std::weak_ptr<state>(s), e, id](asio::cancellation_type) { cancel(weak, e, id); });
    }
    e->waiters.emplace_back(id, std::move(handler));
  }

  static void cancel(std::weak_ptr<state> const& weak, std::shared_ptr<entry> const& e, std::uint64_t id) {
    auto s = weak.lock();
    if (!s) {
      return;
    }
    std::unique_lock lock(s->mutex);
    for (auto it = e->waiters.begin(); it != e->waiters.end(); ++it) {
      if (it->id() == id) {
        waiter w = std::move(*it);
        e->waiters.erase(it);
        lock.unlock();
        std::move(w).complete(asio::error::operation_aborted);
        return;
      }
    }
  }

  static void publish(std::weak_ptr<state> const& weak, Key const& key, std::shared_ptr<entry> const& e,
                      outcome result) {
    std::vector<waiter> waiters;
    if (auto s = weak.lock()) {
      std::lock_guard lock(s->mutex);
      e->result = std::move(result);
      e->done = true;
      waiters.swap(e->waiters);
      auto it = s->entries.find(key);
      if (it != s->entries.end() && it->second == e) {
        s->entries.erase(it);
      }
    } else {
      // The table is gone; no waiter can be added any more, and none is left waiting (see enqueue).
      e->result = std::move(result);
      e->done = true;
      waiters.swap(e->waiters);
    }
    for (auto& w : waiters) {
      std::move(w).complete({});
    }
  }

  std::shared_ptr<state> state_;
};

} // namespace wandura::detail
