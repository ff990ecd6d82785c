// Operations per second of wandura::retry_budget (atomic words, CAS; requests in per-thread stripes) against the
// seed's RetryBudget guarded by a std::mutex, with 1 and 2 threads hammering one shared budget, as every call of a
// client does. Both get the same operation mix (9 note_request : 1 try_retry) and the same time inputs (advancing
// 1 ms per 64 operations, so the 60 s window rolls during the run). Runs alternate (lock-free, mutex, lock-free,
// ...) and the median of each is compared, so machine noise hits both alike.
//
// Prints: retry_budget_vs_mutex threads=N: ratio=R (lock-free X Mops/s, mutex Y Mops/s)   (ratio > 1: faster)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "wandura/resilience/retry_budget.hpp"

namespace {

using time_point = std::chrono::steady_clock::time_point;

/// The seed 000 reference RetryBudget, exactly, behind one mutex.
class mutex_budget {
public:
  explicit mutex_budget(time_point start) : since_(start) {}
  void note_request(time_point now) {
    std::lock_guard lock(mutex_);
    roll(now);
    ++sent_;
  }
  bool try_retry(time_point now) {
    std::lock_guard lock(mutex_);
    roll(now);
    if (retries_ * 100 >= std::max<std::int64_t>(1000, sent_ * 10)) {
      return false;
    }
    ++retries_;
    return true;
  }

private:
  void roll(time_point now) {
    if (now - since_ > std::chrono::seconds(60)) {
      sent_ = 0;
      retries_ = 0;
      since_ = now;
    }
  }
  std::mutex mutex_;
  std::int64_t sent_ = 0;
  std::int64_t retries_ = 0;
  time_point since_;
};

template <typename Budget> double run_once(int threads, std::int64_t ops_per_thread, std::int64_t& allowed_out) {
  time_point const start(std::chrono::hours(1));
  Budget budget(start);
  std::atomic<bool> go{false};
  std::atomic<std::int64_t> allowed{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      std::int64_t mine = 0;
      for (std::int64_t i = 0; i < ops_per_thread; ++i) {
        auto const now = start + std::chrono::milliseconds(i / 64);
        if (i % 10 == 9) {
          mine += budget.try_retry(now) ? 1 : 0;
        } else {
          budget.note_request(now);
        }
      }
      allowed.fetch_add(mine);
    });
  }
  auto const t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) {
    w.join();
  }
  auto const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  allowed_out = allowed.load();
  return static_cast<double>(ops_per_thread * threads) / seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  bool const quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::int64_t const ops = quick ? 500'000 : 4'000'000;
  int const rounds = quick ? 3 : 7;
  for (int threads : {1, 2}) {
    std::vector<double> lock_free;
    std::vector<double> locked;
    std::int64_t allowed_lock_free = 0;
    std::int64_t allowed_locked = 0;
    for (int r = 0; r < rounds; ++r) {
      lock_free.push_back(run_once<wandura::retry_budget>(threads, ops, allowed_lock_free));
      locked.push_back(run_once<mutex_budget>(threads, ops, allowed_locked));
    }
    double const a = median(lock_free);
    double const b = median(locked);
    std::printf("retry_budget_vs_mutex threads=%d: ratio=%.2f (lock-free %.1f Mops/s, mutex %.1f Mops/s; retries "
                "allowed %lld vs %lld)\n",
                threads, a / b, a / 1e6, b / 1e6, static_cast<long long>(allowed_lock_free),
                static_cast<long long>(allowed_locked));
  }
  return 0;
}
