#include "playback/viewer_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "playback/sharded_lru.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

struct string_hash {
  using is_transparent = void;
  [[nodiscard]] std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

/// One viewer's continuous token bucket.
struct bucket {
  double tokens = 0;
  clock::time_point updated{};
};

} // namespace

struct viewer_limiter::storage : detail::sharded_lru<std::string, bucket, string_hash, std::equal_to<>> {
  using sharded_lru::sharded_lru;
};

viewer_limiter::viewer_limiter(viewer_limiter_options options) : options_(std::move(options)) {
  if (!(options_.tickets_per_minute > 0) || !std::isfinite(options_.tickets_per_minute)) {
    throw error(errc::invalid_argument, "viewer_limiter: tickets_per_minute must be a positive number");
  }
  if (!options_.time_source) {
    options_.time_source = std::make_shared<real_clock>();
  }
  per_second_ = options_.tickets_per_minute / 60.0;
  viewers_ = std::make_unique<storage>(options_.max_viewers, options_.shards);
}

viewer_limiter::~viewer_limiter() = default;

asio::awaitable<viewer_limit::decision> viewer_limiter::acquire(std::string viewer_ref, std::uint32_t tickets) {
  co_return take(viewer_ref, tickets);
}

viewer_limit::decision viewer_limiter::take(std::string_view viewer_ref, std::uint32_t tickets) {
  if (tickets == 0) {
    return {true, {}};
  }
  double const capacity = options_.tickets_per_minute;
  auto const wanted = static_cast<double>(tickets);
  auto const t = options_.time_source->now();
  auto to_wait = [&](double missing) {
    // Clamped to ~31 years, so that absurdly small limits cannot overflow the conversion.
    auto const ms = std::min(std::ceil(missing / per_second_ * 1000.0), 1e12);
    return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  };
  if (wanted > capacity) {
    return {false, to_wait(capacity)};
  }
  return viewers_->find_or_insert(
      viewer_ref,
      [&] {
        return bucket{capacity, t};
      },
      [&](bucket& b) -> decision {
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
      });
}

void viewer_limiter::release(std::string_view viewer_ref, std::uint32_t tickets, account /*taken_from*/) noexcept {
  viewers_->find(viewer_ref, false, [&](bucket* b, bool&) {
    if (b != nullptr) {
      b->tokens = std::min(options_.tickets_per_minute, b->tokens + static_cast<double>(tickets));
    }
  });
}

std::size_t viewer_limiter::tracked_viewers() const {
  return viewers_->size();
}

} // namespace wandura::detail
