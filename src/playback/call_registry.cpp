#include "call_registry.hpp"

#include <algorithm>
#include <iterator>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detail/concurrency_hint.hpp>
#include <asio/detail/scheduler.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>

#include "held_executor.hpp"

namespace wandura::detail {
namespace {

/// The deadline timer of one waiter: the clock's sleep, which owns the clock it sleeps on.
asio::awaitable<std::error_code> sleep_on(std::shared_ptr<wandura::clock> time, clock::time_point until) {
  try {
    co_return co_await time->sleep_until(until);
  } catch (std::system_error const& e) {
    co_return e.code(); // cancelled before the wait began
  }
}

/// Whether `context` runs its handlers on one thread: made with concurrency hint 1 (or one that turns off its
/// scheduler's or its reactor's locking), as Asio's scheduler reads it. Takes the context's service lock.
bool runs_on_one_thread(asio::io_context& context) {
  int const hint = asio::use_service<asio::detail::scheduler>(context).concurrency_hint();
  return hint == 1 || !ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
         !ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint);
}

} // namespace

void call_registry::start_timer(std::shared_ptr<operation_base> const& op, std::uint64_t id,
                                std::shared_ptr<waiter_timer> timer, asio::any_io_executor const& executor,
                                std::shared_ptr<wandura::clock> time, clock::time_point deadline) {
  // Spawned on the waiter's timer executor, where `release` emits its cancellation: co_spawn installs the sleep's
  // cancellation state in the slot on the thread that spawns it.
  // The operation is held weakly: a timer on another context must not keep it (and the client's internals its work
  // owns) past the client's context, whose destruction frees it (`state::abandon`).
  asio::dispatch(executor, [weak = std::weak_ptr<state>(state_), weak_op = std::weak_ptr<operation_base>(op), id,
                            timer = std::move(timer), executor, time = std::move(time), deadline]() mutable {
    if (timer->latch.start()) {
      return; // the waiter was released first: nothing to time
    }
    auto sleep = sleep_on(std::move(time), deadline);
    auto slot = timer->signal.slot();
    asio::co_spawn(
        executor, std::move(sleep),
        asio::bind_cancellation_slot(slot, [weak = std::move(weak), weak_op = std::move(weak_op), id,
                                            keep = std::move(timer)](std::exception_ptr, std::error_code ec) {
          if (auto still = weak_op.lock(); still && !ec) {
            leave(weak, std::move(still), id, errc::deadline_exceeded);
          }
        }));
  });
}

call_registry::call_registry(asio::any_io_executor const& home)
    : state_(std::make_shared<state>()), home_executor_(home) {
  if (home) {
    asio::execution_context& context = context_of(home);
    home_context_ = &context;
    // Operations of callers on other contexts run on this one, where no waiter of theirs registers: registered
    // here, its destruction frees them too (their frames own the client's internals, and the operations so the
    // list that holds them).
    context_shutdown::add(context, std::weak_ptr<state>(state_));
    state_->parked_on = &context;
    asio::io_context* io = nullptr;
    if (auto const* plain = held_executor<asio::io_context::executor_type>(home)) {
      io = &plain->context();
    } else if (auto const* strand = held_executor<asio::strand<asio::io_context::executor_type>>(home)) {
      io = &strand->get_inner_executor().context();
    }
    if (io != nullptr && runs_on_one_thread(*io)) {
      one_thread_home_ = io;
    }
  }
}

asio::any_io_executor const& call_registry::runs_on(asio::any_io_executor const& caller) const noexcept {
  return home_context_ == nullptr || &context_of(caller) == home_context_ ? caller : home_executor_;
}

asio::any_io_executor call_registry::operation_executor(asio::any_io_executor const& caller, bool& enter_here) const {
  auto const& where = runs_on(caller);
  bool own_strand = false;
  auto executor = serialized(where, own_strand);
  enter_here = !own_strand && &where == &caller;
  return executor;
}

asio::any_io_executor call_registry::serialized(asio::any_io_executor const& caller, bool& own_strand) const {
  own_strand = false;
  if (held_executor<asio::strand<asio::io_context::executor_type>>(caller) != nullptr ||
      held_executor<asio::strand<asio::any_io_executor>>(caller) != nullptr) {
    return caller;
  }
  if (auto const* io = held_executor<asio::io_context::executor_type>(caller)) {
    asio::io_context& context = io->context();
    if (&context == one_thread_home_ || (&context != home_context_ && runs_on_one_thread(context))) {
      return caller;
    }
    own_strand = true;
    return asio::make_strand(*io);
  }
  own_strand = true;
  return asio::make_strand(caller);
}

void call_registry::launch(std::shared_ptr<operation_base> const& op, bool enter_here,
                           asio::awaitable<asio::detail::awaitable_thread_entry_point> body) {
  // On the operation's executor, where `cancel_operation` emits: the thread's cancellation state is installed in the
  // operation's slot there, and a cancellation asked for before (the operation was listed, and so open to
  // `cancel_all`, before this) is emitted into it first: the body then ends at its first `co_await`.
  auto start = [op, b = std::move(body)]() mutable {
    asio::cancellation_slot const slot = op->signal.slot();
    asio::detail::awaitable_thread<asio::any_io_executor> thread(std::move(b), op->executor, slot,
                                                                 asio::cancellation_state(slot));
    if (op->started.start()) {
      op->signal.emit(asio::cancellation_type::terminal);
    }
    thread.launch();
  };
  if (enter_here) {
    start(); // on the caller's executor, which runs this
    return;
  }
  // A strand made for the operation, where nothing runs yet: dispatching to it from a thread running its context
  // runs the body here, at once, inside the strand; from elsewhere (the client's context, for a caller on another)
  // it is queued there.
  asio::dispatch(op->executor, std::move(start));
}

void call_registry::release(waiter& w, std::error_code ec, bool may_run_here) {
  if (w.timer && w.timer->latch.cancel()) {
    asio::post(w.timer_executor,
               [timer = std::move(w.timer)] { timer->signal.emit(asio::cancellation_type::terminal); });
  }
  if (may_run_here) {
    std::move(*w.completion).complete_here(ec);
  } else {
    std::move(*w.completion).complete(ec);
  }
}

void call_registry::cancel_operation(std::shared_ptr<operation_base> const& op) {
  if (op->started.cancel()) {
    asio::post(op->executor, [op] { op->signal.emit(asio::cancellation_type::terminal); });
  }
}

// `weak` and `op` are taken by value: the caller's copies may live in the waiter's cancellation handler, which
// `release` lets go of (another thread may resume the waiter and clear its slot before `release` returns).
void call_registry::leave(std::weak_ptr<state> weak, std::shared_ptr<operation_base> op, std::uint64_t id,
                          std::error_code why) {
  auto s = weak.lock();
  if (!s) {
    return;
  }
  std::unique_lock lock(s->mutex);
  if (why == asio::error::operation_aborted) {
    waiter* staying = op->waiters.find(id);
    if (staying == nullptr || staying->cancelled) {
      return; // already completed, or its cancellation is the operation's already
    }
    // The operation's last waiter, on its context: the cancellation goes to the operation, and the waiter completes
    // with the operation's end, as the retry engine ends it (a 2xx read before the cancellation came stands: its
    // tickets are the caller's, not spent for nothing). Cancelled, the operation ends within a few handlers of its
    // context (it sends nothing more, an attempt on the wire is aborted, a wait ends).
    if (staying->ends_with_operation && op->waiters.size() == 1 && op->arriving == 0 && !op->done) {
      staying->cancelled = true;
      s->forget_key(*op); // nobody may join it, and it sends nothing more
      lock.unlock();
      cancel_operation(op);
      return;
    }
  }
  std::optional<waiter> w = op->waiters.remove(id);
  if (!w) {
    return; // already completed
  }
  // The last waiter, and no caller given the operation is still on its way to wait for it (`arriving`); one whose
  // cancellation went to the operation has cancelled it already.
  bool const last = op->waiters.empty() && op->arriving == 0 && !op->done && !w->cancelled;
  if (last) {
    s->forget_key(*op); // nobody waits for it any more: nobody may join it either, and it sends nothing more
  }
  lock.unlock();
  release(*w, why);
  if (last) {
    cancel_operation(op);
  }
}

void call_registry::publish(std::weak_ptr<state> const& weak, std::shared_ptr<operation_base> const& op,
                            bool on_its_executor) {
  std::vector<pending_completion> idle;
  waiter_list waiters = [&] {
    auto s = weak.lock();
    if (!s) {
      op->done = true;
      return op->waiters.take_all();
    }
    std::lock_guard lock(s->mutex);
    op->done = true;
    s->forget_key(*op);
    // O(1): the last operation takes this one's place. (An operation dropped by `abandon` is no longer there.)
    auto& running = s->running;
    if (op->running_index < running.size() && running[op->running_index] == op) {
      running[op->running_index] = std::move(running.back());
      running[op->running_index]->running_index = op->running_index;
      running.pop_back();
    }
    if (s->running.empty()) {
      idle.swap(s->idle_waiters);
    }
    return op->waiters.take_all();
  }();
  // Called at the end of the operation, on its executor, with no lock held: a waiter on that executor (the one
  // that started it, most often) resumes at once instead of through one more round of the scheduler.
  waiters.for_each([on_its_executor](waiter& w) { release(w, {}, on_its_executor); });
  for (auto& c : idle) {
    std::move(c).complete({});
  }
}

void call_registry::throw_if_closed() const {
  std::lock_guard lock(state_->mutex);
  if (state_->closed) {
    throw error(asio::error::operation_aborted, "client: shut down");
  }
}

void call_registry::cancel_all() {
  std::vector<waiter_list> waiters;
  std::vector<std::shared_ptr<operation_base>> ops;
  {
    std::lock_guard lock(state_->mutex);
    state_->closed = true;
    state_->by_key.clear();
    ops = state_->running;
    for (auto const& op : ops) {
      waiters.push_back(std::exchange(op->waiters, waiter_list{}));
    }
  }
  for (auto& list : waiters) {
    list.for_each([](waiter& w) { release(w, asio::error::operation_aborted); });
  }
  for (auto const& op : ops) {
    cancel_operation(op);
  }
}

void call_registry::state::abandon(asio::execution_context& context) noexcept {
  // Collected under the lock (waiter lists moved out, the running vector filtered in place, room reserved first);
  // freed and completed after it: destroying a handler destroys its coroutine's frames, which may own the client.
  std::vector<std::shared_ptr<operation_base>> dropped;
  std::vector<waiter_list> lists;
  std::vector<pending_completion> idle;
  std::vector<std::shared_ptr<operation_base>> orphaned; // running elsewhere, their last waiters freed here
  {
    std::lock_guard lock(mutex);
    if (parked_on == &context) {
      parked_on = nullptr;
    }
    auto on_context = [&](std::shared_ptr<operation_base> const& op) { return &context_of(op->executor) == &context; };
    try {
      lists.reserve(running.size());
      dropped.reserve(running.size());
      orphaned.reserve(running.size());
      for (auto const& op : running) {
        lists.push_back(on_context(op) ? op->waiters.take_all() : op->waiters.take_from(context));
        if (!on_context(op) && !lists.back().empty() && op->waiters.empty() && op->arriving == 0 && !op->done) {
          orphaned.push_back(op); // as when its last waiter leaves: nobody joins it, it sends nothing more
          forget_key(*op);
        }
      }
      auto keep = std::partition(running.begin(), running.end(), [&](auto const& op) { return !on_context(op); });
      std::move(keep, running.end(), std::back_inserter(dropped));
      running.erase(keep, running.end());
      for (std::size_t i = 0; i < running.size(); ++i) {
        running[i]->running_index = i;
      }
      for (auto const& op : dropped) {
        forget_key(*op);
      }
      idle.reserve(idle_waiters.size());
      auto mine = std::partition(idle_waiters.begin(), idle_waiters.end(),
                                 [&](pending_completion const& c) { return &c.context() != &context; });
      std::move(mine, idle_waiters.end(), std::back_inserter(idle));
      idle_waiters.erase(mine, idle_waiters.end());
    } catch (...) { // out of memory: what was collected is freed; the rest stays (it may leak at teardown)
    }
  }
  // A waiter of another context on an operation that will never end is told so; the others are freed unrun.
  for (auto& list : lists) {
    list.for_each([&](waiter& w) {
      if (&w.completion->context() != &context) {
        release(w, asio::error::operation_aborted);
      }
    });
  }
  for (auto const& op : orphaned) {
    try {
      cancel_operation(op);
    } catch (...) { // out of memory while posting: it runs to its own end, unwaited
    }
  }
}

void call_registry::state::forget_key(operation_base const& op) noexcept {
  if (op.key) {
    auto k = by_key.find(key_view{*op.key, op.key_hash});
    if (k != by_key.end() && k->second.get() == &op) {
      by_key.erase(k);
    }
  }
}

std::size_t call_registry::in_flight() const {
  std::lock_guard lock(state_->mutex);
  return state_->running.size();
}

std::size_t call_registry::waiting() const {
  std::lock_guard lock(state_->mutex);
  std::size_t total = 0;
  for (auto const& op : state_->running) {
    total += op->waiters.size();
  }
  return total;
}

} // namespace wandura::detail
