#include "wandura/fleet/fleet.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <unistd.h>

#include "fleet_state.hpp"
#include "redis_ticket_store.hpp"
#include "redis_viewer_limit.hpp"
#include "ticket_cache_access.hpp"
#include "wandura/error.hpp"

namespace wandura {
namespace detail {
namespace {

/// "host:pid": what tells this process's tickets from another's when no `process_id` is given.
std::string default_process_id() {
  std::string host(256, '\0');
  if (::gethostname(host.data(), host.size()) != 0) {
    host = "host";
  }
  host.resize(host.find('\0') == std::string::npos ? host.size() : host.find('\0'));
  return host + ":" + std::to_string(::getpid());
}

fleet_options with_process_id(fleet_options options) {
  if (options.process_id.empty()) {
    options.process_id = default_process_id();
  }
  return options;
}

ticket_cache_options cache_options(fleet_options const& options) {
  ticket_cache_options out;
  out.fallback = options.fallback;
  return out;
}

/// A strand of `executor`. Over an io_context's own executor type when `executor` holds one: a strand of
/// `any_io_executor` is larger than `any_io_executor`'s in-place storage, so every copy of it as an
/// `any_io_executor` (each co_spawn onto it, each Redis completion's handler and work guard) was a heap allocation,
/// about eight per Redis command in `bench_fleet_playback`; a strand of the io_context's executor fits in place.
asio::any_io_executor make_fleet_strand(asio::any_io_executor const& executor) {
  if (auto const* io = executor.target<asio::io_context::executor_type>(); io != nullptr) {
    return asio::make_strand(*io);
  }
  return asio::make_strand(executor);
}

} // namespace

fleet_state::fleet_state(asio::any_io_executor const& executor, fleet_options opts)
    : strand(make_fleet_strand(executor)), options(with_process_id(std::move(opts))), redis(strand, options.redis),
      tickets(redis, options.org, cache_options(options)),
      wrote_(strand, std::chrono::steady_clock::time_point::max()) {}

fleet_state::~fleet_state() = default;

shared_viewer_limit& fleet_state::viewer_limit_for(std::uint32_t per_minute) {
  std::lock_guard lock(mutex_);
  auto& limit = limits_[per_minute];
  if (!limit) {
    viewer_limit_options lo;
    lo.tickets_per_minute = static_cast<double>(per_minute);
    lo.fallback = options.fallback;
    limit = std::make_unique<shared_viewer_limit>(redis, options.org, std::move(lo));
  }
  return *limit;
}

void fleet_state::add_cross_process_reuse() noexcept {
  cross_process_reuse_.fetch_add(1, std::memory_order_relaxed);
}

void fleet_state::publish() {
  fleet_stats now;
  now.tickets = tickets.stats();
  now.redis = redis.stats();
  std::lock_guard lock(mutex_);
  for (auto const& [rate, limit] : limits_) {
    auto const s = limit->stats();
    now.viewers.granted += s.granted;
    now.viewers.refused += s.refused;
    now.viewers.fallbacks += s.fallbacks;
    now.viewers.degraded = now.viewers.degraded || s.degraded;
  }
  published_ = now;
}

void fleet_state::add_pace_stats(std::function<counter_pace_stats()> stats) {
  std::lock_guard lock(mutex_);
  pace_stats_.push_back(std::move(stats));
}

fleet_stats fleet_state::snapshot() const {
  std::lock_guard lock(mutex_);
  fleet_stats out = published_;
  out.cross_process_reuse = cross_process_reuse_.load(std::memory_order_relaxed);
  // Near hits are counted on the callers' threads, between publishes: the count as of now, and the near cache's
  // state as of now.
  auto const near_now = tickets.near_hits();
  out.tickets.hits += near_now - out.tickets.near_hits;
  out.tickets.near_hits = near_now;
  // The erase subscription's counter and state change between publishes too.
  out.tickets.erasures_heard = tickets.erasures_heard();
  out.tickets.near_cache_live = tickets.near_cache_live();
  for (auto const& read : pace_stats_) {
    auto const s = read();
    out.pace.admitted += s.admitted;
    out.pace.delayed += s.delayed;
    out.pace.fallbacks += s.fallbacks;
    out.pace.degraded = out.pace.degraded || s.degraded;
  }
  out.fallbacks = out.tickets.fallbacks + out.viewers.fallbacks + out.pace.fallbacks;
  out.degraded = out.tickets.degraded || out.viewers.degraded || out.pace.degraded;
  return out;
}

void fleet_state::write_behind(std::shared_ptr<fleet_state> const& self, prepared_stores stores) {
  if (stores.keys.empty()) {
    return;
  }
  std::lock_guard lock(self->writes_mutex_);
  self->handed_over_ += stores.keys.size();
  auto& staged = self->staged_;
  std::move(stores.keys.begin(), stores.keys.end(), std::back_inserter(staged.keys));
  std::move(stores.args.begin(), stores.args.end(), std::back_inserter(staged.args));
  if (!self->drain_posted_ && !self->writing_) {
    self->drain_posted_ = true;
    asio::post(self->strand, [self] { drain(self); });
  }
}

void fleet_state::drain(std::shared_ptr<fleet_state> const& self) {
  prepared_stores taking;
  {
    std::lock_guard lock(self->writes_mutex_);
    self->drain_posted_ = false;
    auto& staged = self->staged_;
    if (self->writing_ || staged.keys.empty()) {
      return;
    }
    if (self->shut_down_.load()) { // kept locally; Redis is closed for good
      self->written_ += staged.keys.size();
      staged = {};
      self->wrote_.cancel();
      return;
    }
    auto const n = std::min(staged.keys.size(), max_tickets_per_write);
    if (n == staged.keys.size()) {
      taking = std::exchange(staged, {});
    } else {
      auto const keys_end = staged.keys.begin() + static_cast<std::ptrdiff_t>(n);
      auto const args_end = staged.args.begin() + static_cast<std::ptrdiff_t>(2 * n);
      taking.keys.assign(std::make_move_iterator(staged.keys.begin()), std::make_move_iterator(keys_end));
      taking.args.assign(std::make_move_iterator(staged.args.begin()), std::make_move_iterator(args_end));
      staged.keys.erase(staged.keys.begin(), keys_end);
      staged.args.erase(staged.args.begin(), args_end);
    }
    self->writing_ = true;
  }
  asio::co_spawn(self->strand, write(self, std::move(taking)), asio::detached);
}

asio::awaitable<void> fleet_state::write(std::shared_ptr<fleet_state> self, prepared_stores stores) {
  auto const n = stores.keys.size();
  try {
    auto written = ticket_cache_access::write(self->tickets, std::move(stores)); // named: GCC 12 and co_await
    co_await std::move(written);
  } catch (error const&) { // NOLINT(bugprone-empty-catch): only when the Redis client closed; the copies are local
  }
  self->publish();
  {
    std::lock_guard lock(self->writes_mutex_);
    self->writing_ = false;
    self->written_ += n;
    if (!self->staged_.keys.empty() && !self->drain_posted_) {
      self->drain_posted_ = true;
      asio::post(self->strand, [self] { drain(self); });
    }
  }
  self->wrote_.cancel();
}

void fleet_state::drop_staged(std::string_view key) {
  std::lock_guard lock(writes_mutex_);
  auto& keys = staged_.keys;
  for (std::size_t i = 0; i < keys.size();) {
    if (keys[i] != key) {
      ++i;
      continue;
    }
    keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(i));
    auto const args_at = staged_.args.begin() + static_cast<std::ptrdiff_t>(2 * i);
    staged_.args.erase(args_at, args_at + 2);
    ++written_; // done with, as far as `flush` is concerned
  }
}

asio::awaitable<void> fleet_state::flush(std::shared_ptr<fleet_state> self) {
  std::uint64_t target = 0;
  {
    std::lock_guard lock(self->writes_mutex_);
    target = self->handed_over_;
  }
  for (;;) {
    {
      std::lock_guard lock(self->writes_mutex_);
      if (self->written_ >= target) {
        co_return;
      }
    }
    std::error_code ec;
    co_await self->wrote_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto const state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw error(asio::error::operation_aborted, "fleet: flush cancelled");
    }
  }
}

void fleet_state::shut_down(std::shared_ptr<fleet_state> const& self) noexcept {
  if (self->shut_down_.exchange(true)) {
    return;
  }
  if (auto const& log = self->options.fallback.log) {
    try {
      log("INFO fleet: shut down; the shared parts answer from local state");
    } catch (...) { // NOLINT(bugprone-empty-catch): a failing log sink does not keep Redis open
    }
  }
  // On the strand, where the client and the subscription are used. It runs inline when called there; otherwise
  // the posted step holds the state until it ran.
  asio::dispatch(self->strand, [self] {
    self->redis.close();
    ticket_cache_access::shut_down(self->tickets);
    self->publish();
  });
}

} // namespace detail

/// The fleet's shared state itself: a `fleet` and every store and limit it configured hold it.
struct fleet::impl final : detail::fleet_state {
  using fleet_state::fleet_state;
};

fleet::fleet(asio::any_io_executor executor, fleet_options options)
    : impl_(std::make_shared<impl>(std::move(executor), std::move(options))),
      pace_(std::make_shared<redis_counter_pace>(
          detail::fleet_state::shared_redis(impl_),
          redis_counter_pace_options{.org = impl_->options.org, .fallback = impl_->options.fallback})) {
  impl_->add_pace_stats([weak = std::weak_ptr<redis_counter_pace>(pace_)] {
    auto const pace = weak.lock();
    return pace ? pace->stats() : counter_pace_stats{};
  });
}

fleet::~fleet() = default;

void fleet::configure(client_options& options) const {
  if (options.viewer_tickets_per_minute == 0U) {
    throw error(errc::invalid_argument, "fleet: viewer_tickets_per_minute must be > 0");
  }
  options.tickets = std::make_shared<detail::redis_ticket_store>(impl_);
  if (options.viewer_tickets_per_minute) {
    auto& limit = impl_->viewer_limit_for(*options.viewer_tickets_per_minute);
    options.viewer_limit = std::make_shared<detail::redis_viewer_limit>(impl_, limit);
  }
  options.retry.admission.shared_pace = pace_;
}

fleet_stats fleet::stats() const {
  return impl_->snapshot();
}

asio::awaitable<void> fleet::flush() {
  auto flushed = detail::fleet_state::flush(impl_); // named: GCC 12 and co_await temporaries
  co_await asio::co_spawn(impl_->strand, std::move(flushed), asio::use_awaitable);
}

void fleet::shutdown() noexcept {
  detail::fleet_state::shut_down(impl_);
}

} // namespace wandura
