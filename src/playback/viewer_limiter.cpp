#include "wandura/playback/viewer_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "wandura/error.hpp"

namespace wandura {
namespace {

struct string_hash {
  using is_transparent = void;
  [[nodiscard]] std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

} // namespace

struct viewer_limiter::shard {
  struct bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point updated{};
    std::list<std::string const*>::iterator recency;
  };
  mutable std::mutex mutex;
  std::unordered_map<std::string, bucket, string_hash, std::equal_to<>> viewers;
  std::list<std::string const*> lru; // front: most recently seen; points at the keys of `viewers`
};

viewer_limiter::viewer_limiter(viewer_limiter_options options) : options_(std::move(options)) {
  if (!(options_.tickets_per_minute > 0) || !std::isfinite(options_.tickets_per_minute)) {
    throw error(errc::invalid_argument, "viewer_limiter: tickets_per_minute must be a positive number");
  }
  per_second_ = options_.tickets_per_minute / 60.0;
  options_.max_viewers = std::max<std::size_t>(options_.max_viewers, 1);
  shard_count_ = std::clamp<std::size_t>(options_.shards, 1, options_.max_viewers);
  per_shard_capacity_ = (options_.max_viewers + shard_count_ - 1) / shard_count_;
  shards_ = std::make_unique<shard[]>(shard_count_);
}

viewer_limiter::~viewer_limiter() = default;

viewer_limiter::shard& viewer_limiter::shard_for(std::string_view viewer_ref) const noexcept {
  return shards_[std::hash<std::string_view>{}(viewer_ref) % shard_count_];
}

std::chrono::steady_clock::time_point viewer_limiter::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

viewer_limiter::decision viewer_limiter::try_acquire(std::string_view viewer_ref, std::uint32_t tickets) {
  if (tickets == 0) {
    return {true, {}};
  }
  double const capacity = options_.tickets_per_minute;
  auto const wanted = static_cast<double>(tickets);
  auto const t = now();
  auto to_wait = [&](double missing) {
    // Clamped to ~31 years, so that absurdly small limits cannot overflow the conversion.
    auto const ms = std::min(std::ceil(missing / per_second_ * 1000.0), 1e12);
    return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  };
  if (wanted > capacity) {
    return {false, to_wait(capacity)};
  }
  auto& s = shard_for(viewer_ref);
  std::lock_guard lock(s.mutex);
  auto it = s.viewers.find(viewer_ref);
  if (it == s.viewers.end()) {
    while (s.viewers.size() >= per_shard_capacity_) {
      auto victim = s.viewers.find(*s.lru.back());
      s.lru.pop_back();
      s.viewers.erase(victim);
    }
    it = s.viewers.emplace(std::string(viewer_ref), shard::bucket{capacity, t, {}}).first;
    s.lru.push_front(&it->first);
    it->second.recency = s.lru.begin();
  } else {
    s.lru.splice(s.lru.begin(), s.lru, it->second.recency);
  }
  auto& b = it->second;
  if (t > b.updated) {
    std::chrono::duration<double> const elapsed = t - b.updated;
    b.tokens = std::min(capacity, b.tokens + elapsed.count() * per_second_);
    b.updated = t;
  }
  if (b.tokens + 1e-9 >= wanted) {
    b.tokens = std::max(0.0, b.tokens - wanted);
    return {true, {}};
  }
  return {false, to_wait(wanted - b.tokens)};
}

void viewer_limiter::release(std::string_view viewer_ref, std::uint32_t tickets) {
  auto& s = shard_for(viewer_ref);
  std::lock_guard lock(s.mutex);
  auto it = s.viewers.find(viewer_ref);
  if (it != s.viewers.end()) {
    it->second.tokens = std::min(options_.tickets_per_minute, it->second.tokens + static_cast<double>(tickets));
  }
}

std::size_t viewer_limiter::tracked_viewers() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    total += shards_[i].viewers.size();
  }
  return total;
}

} // namespace wandura
