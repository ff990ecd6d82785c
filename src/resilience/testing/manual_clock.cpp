#include "wandura/testing/manual_clock.hpp"

#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/use_awaitable.hpp>

#include "saturating_time.hpp"

namespace wandura::testing {

/// One pending sleep. `complete` posts the coroutine's handler; it is called exactly once, by whoever removed the
/// sleeper from the table (an advance or the cancellation handler).
struct manual_clock::sleeper {
  std::uint64_t id = 0;
  std::function<void(std::error_code)> complete;
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
    s->complete(asio::error::operation_aborted);
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
    auto s = std::make_shared<sleeper>();
    s->complete = [shared, executor, slot](std::error_code ec) mutable {
      // Completion is posted, never run inline in advance(); the slot is cleared on the coroutine's own executor.
      asio::post(executor, [shared, slot, ec]() mutable {
        slot.clear();
        std::move (*shared)(ec);
      });
    };
    std::uint64_t id = 0;
    {
      std::unique_lock lock(mutex_);
      id = s->id = ++next_id_;
      sleepers_.emplace(when, s);
      if (when <= now_) {
        wake_due(lock);
        return;
      }
    }
    if (slot.is_connected()) {
      slot.assign([this, id](asio::cancellation_type) {
        std::shared_ptr<sleeper> found;
        {
          std::lock_guard lock(mutex_);
          for (auto it = sleepers_.begin(); it != sleepers_.end(); ++it) {
            if (it->second->id == id) {
              found = it->second;
              sleepers_.erase(it);
              break;
            }
          }
        }
        if (found) {
          found->complete(asio::error::operation_aborted);
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
    s->complete({});
  }
  lock.lock();
}

void manual_clock::advance(duration d) {
  std::unique_lock lock(mutex_);
  if (d > duration::zero()) {
    // Saturating: a huge step (duration::max()) ends at the end of time rather than wrapping around before it.
    now_ = detail::saturating_add(now_, d);
    wall_now_ = detail::saturating_add(wall_now_, d);
  }
  wake_due(lock);
}

bool manual_clock::advance_to_next_wakeup() {
  std::unique_lock lock(mutex_);
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
  return sleepers_.size();
}

std::optional<manual_clock::time_point> manual_clock::next_wakeup() const {
  std::lock_guard lock(mutex_);
  if (sleepers_.empty()) {
    return std::nullopt;
  }
  return sleepers_.begin()->first;
}

manual_clock::duration manual_clock::elapsed() const {
  std::lock_guard lock(mutex_);
  return now_ - start_;
}

} // namespace wandura::testing
