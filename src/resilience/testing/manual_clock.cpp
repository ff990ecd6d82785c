#include "wandura/testing/manual_clock.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/execution_context.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/use_awaitable.hpp>

#include "saturating_time.hpp"

namespace wandura::testing {

namespace {

/// A sleep's completion: the sleeping coroutine's handler, posted to its executor. Done exactly once, by whoever
/// comes first: the clock (an advance, the clock's end) or a cancellation, which post it, or the end of the context
/// the coroutine runs on, which drops it. A post is made under the completion's lock, so that the context's end,
/// which takes the same lock to drop it, cannot finish (and free the context) while a post into it is under way:
/// the posted handler is then destroyed by the context's own shutdown.
class sleep_completion {
public:
  explicit sleep_completion(std::function<void(std::error_code)> post) : post_(std::move(post)) {}
  /// Posts the handler with `ec`, unless it was done already.
  void complete(std::error_code ec) {
    std::function<void(std::error_code)> done; // destroyed after the lock is released (declared before it)
    std::lock_guard lock(mutex_);
    if (!post_) {
      return;
    }
    done = std::exchange(post_, {});
    done(ec);
  }
  /// Drops the handler (its coroutine is destroyed, never resumed), unless it was done already.
  void drop() {
    std::function<void(std::error_code)> dropped; // destroyed after the lock is released
    std::lock_guard lock(mutex_);
    dropped = std::exchange(post_, {});
  }
  /// False once done: completed, or dropped with its context.
  [[nodiscard]] bool pending() {
    std::lock_guard lock(mutex_);
    return static_cast<bool>(post_);
  }

private:
  std::mutex mutex_;
  std::function<void(std::error_code)> post_;
};

/// The sleeps started by coroutines of one execution context, dropped when it shuts down. Their handlers are held
/// by the clock, not by the context, so a context destroyed with sleeps pending would otherwise leave them to be
/// posted into freed memory by a later advance (or the clock's end), and the coroutines, with all they hold (a
/// client holding the clock, say), would never be freed.
class sleeps_of_context final : public asio::execution_context::service {
public:
  static asio::execution_context::id id; // NOLINT: Asio's service identity
  explicit sleeps_of_context(asio::execution_context& context) : asio::execution_context::service(context) {}

  void add(std::shared_ptr<sleep_completion> const& c) {
    std::lock_guard lock(mutex_);
    if (sleeps_.size() >= 2 * live_after_prune_ + 16) { // drop the ones completed since: bounded by the live ones
      std::erase_if(sleeps_, [](auto const& w) { return w.expired(); });
      live_after_prune_ = sleeps_.size();
    }
    sleeps_.push_back(c);
  }

private:
  void shutdown() override {
    std::vector<std::weak_ptr<sleep_completion>> left;
    {
      std::lock_guard lock(mutex_);
      left.swap(sleeps_);
    }
    for (auto const& w : left) {
      if (auto c = w.lock()) {
        c->drop(); // the handler is destroyed outside every lock: its coroutine may end the clock
      }
    }
  }

  std::mutex mutex_;
  std::vector<std::weak_ptr<sleep_completion>> sleeps_;
  std::size_t live_after_prune_ = 0;
};

asio::execution_context::id sleeps_of_context::id;

} // namespace

/// One sleep, in the clock's table until an advance passes it or the clock ends. Cancelled or dropped with its
/// context, it is no longer pending (`sleep_completion::pending`) and is taken out by the next advance.
struct manual_clock::sleeper {
  std::shared_ptr<sleep_completion> completion;
};

manual_clock::manual_clock()
    : manual_clock(time_point(std::chrono::hours(1000)),
                   std::chrono::sys_days(std::chrono::year(2026) / 11 / 30) + std::chrono::hours(9)) {}

manual_clock::manual_clock(time_point steady_start, std::chrono::system_clock::time_point wall_start)
    : start_(steady_start), now_(steady_start), wall_now_(wall_start) {}

manual_clock::~manual_clock() {
  // Sleepers still pending are abandoned with operation_aborted rather than leaked with their work guards.
  std::multimap<time_point, std::shared_ptr<sleeper>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(sleepers_);
  }
  for (auto& [when, s] : left) {
    s->completion->complete(asio::error::operation_aborted);
  }
}

manual_clock::time_point manual_clock::now() const noexcept {
  std::lock_guard lock(mutex_);
  return now_;
}

std::chrono::system_clock::time_point manual_clock::system_now() const noexcept {
  std::lock_guard lock(mutex_);
  return wall_now_;
}

asio::awaitable<std::error_code> manual_clock::sleep_until(time_point when) {
  auto initiation = [this, when](auto handler) {
    using handler_type = decltype(handler);
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto executor = asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked);
    auto shared = std::make_shared<handler_type>(std::move(handler));
    auto& context = asio::query(executor, asio::execution::context);
    auto s = std::make_shared<sleeper>();
    s->completion = std::make_shared<sleep_completion>([shared, executor, slot](std::error_code ec) mutable {
      // Completion is posted, never run inline in advance(); the slot is cleared on the coroutine's own executor.
      asio::post(executor, [shared, slot, ec]() mutable {
        slot.clear();
        std::move (*shared)(ec);
      });
    });
    asio::use_service<sleeps_of_context>(context).add(s->completion);
    std::weak_ptr<sleep_completion> const completion = s->completion;
    {
      std::unique_lock lock(mutex_);
      sleepers_.emplace(when, std::move(s));
      if (when <= now_) {
        wake_due(lock);
        return;
      }
    }
    if (slot.is_connected()) {
      // The completion alone, not the clock: a cancellation may come after the clock's end (which posted the
      // sleep's completion, and the slot is cleared only when that runs). Weak: the completion holds the coroutine,
      // whose slot holds this.
      slot.assign([completion](asio::cancellation_type) {
        if (auto c = completion.lock()) {
          c->complete(asio::error::operation_aborted);
        }
      });
    }
  };
  auto token = asio::experimental::as_tuple(asio::use_awaitable);
  auto [ec] = co_await asio::async_initiate<decltype(token), void(std::error_code)>(std::move(initiation), token);
  co_return ec;
}

void manual_clock::wake_due(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<sleeper>> due;
  while (!sleepers_.empty() && sleepers_.begin()->first <= now_) {
    due.push_back(std::move(sleepers_.begin()->second));
    sleepers_.erase(sleepers_.begin());
  }
  lock.unlock();
  for (auto& s : due) {
    s->completion->complete({});
  }
  due.clear(); // the sleepers, before locking again
  lock.lock();
}

void manual_clock::advance(duration d) {
  std::unique_lock lock(mutex_);
  forget_dropped();
  if (d > duration::zero()) {
    // Saturating: a huge step (duration::max()) ends at the end of time rather than wrapping around before it.
    now_ = detail::saturating_add(now_, d);
    wall_now_ = detail::saturating_add(wall_now_, d);
  }
  wake_due(lock);
}

void manual_clock::forget_dropped() {
  std::erase_if(sleepers_, [](auto const& entry) { return !entry.second->completion->pending(); });
}

bool manual_clock::advance_to_next_wakeup() {
  std::unique_lock lock(mutex_);
  forget_dropped();
  if (sleepers_.empty()) {
    return false;
  }
  auto const when = sleepers_.begin()->first;
  if (when > now_) {
    wall_now_ = detail::saturating_add(wall_now_, when - now_); // a sleep until time_point::max() may be due
    now_ = when;
  }
  wake_due(lock);
  return true;
}

std::size_t manual_clock::pending_sleeps() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(std::count_if(sleepers_.begin(), sleepers_.end(),
                                                [](auto const& entry) { return entry.second->completion->pending(); }));
}

std::optional<manual_clock::time_point> manual_clock::next_wakeup() const {
  std::lock_guard lock(mutex_);
  for (auto const& [when, s] : sleepers_) {
    if (s->completion->pending()) {
      return when;
    }
  }
  return std::nullopt;
}

manual_clock::duration manual_clock::elapsed() const {
  std::lock_guard lock(mutex_);
  auto const from = start_.time_since_epoch();
  auto const to = now_.time_since_epoch(); // never before start_: time does not go back
  if (from < duration::zero() && to > duration::max() + from) {
    return duration::max(); // a start before the epoch and an advance to the end of time
  }
  return to - from;
}

} // namespace wandura::testing
