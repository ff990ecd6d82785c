#include "wandura/fleet/fleet.hpp"

#include <algorithm>
#include <iterator>
#include <type_traits>
#include <utility>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <unistd.h>

#include "fleet_state.hpp"
#include "held_executor.hpp"
#include "rate_math.hpp"
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

/// `options` checked (what the parts made later would refuse, refused here), with the default process id.
fleet_options checked_with_defaults(fleet_options options) {
  if (!(options.viewer_local_share > 0) || options.viewer_local_share > 1) {
    throw error(errc::invalid_argument, "fleet: viewer_local_share must be in (0, 1]");
  }
  // The share of the smallest viewer rate a client may ask for (1 a minute) must count, as shared_viewer_limit
  // requires of the rate it is given: then no `configure` refuses it later.
  if (!detail::share_counts(1.0, options.viewer_local_share)) {
    throw error(errc::invalid_argument, "fleet: viewer_local_share is too small to count");
  }
  if (options.process_id.empty()) {
    options.process_id = default_process_id();
  }
  return options;
}

ticket_cache_options cache_options(fleet_options const& options) {
  ticket_cache_options out;
  out.fallback = options.fallback;
  out.known_keys_capacity = options.known_keys_capacity;
  return out;
}

/// A strand of `executor`. Over an io_context's own executor type when `executor` holds one: a strand of
/// `any_io_executor` is larger than `any_io_executor`'s in-place storage, so every copy of it as an
/// `any_io_executor` (each co_spawn onto it, each Redis completion's handler and work guard) was a heap allocation,
/// about eight per Redis command in `bench_fleet_playback`; a strand of the io_context's executor fits in place.
asio::any_io_executor make_fleet_strand(asio::any_io_executor const& executor) {
  if (auto const* io = held_executor<asio::io_context::executor_type>(executor); io != nullptr) {
    return asio::make_strand(*io);
  }
  return asio::make_strand(executor);
}

} // namespace

fleet_state::fleet_state(asio::any_io_executor const& executor, fleet_options opts)
    : strand(make_fleet_strand(executor)), options(checked_with_defaults(std::move(opts))),
      redis(strand, options.redis), tickets(redis, options.org, cache_options(options)) {}

fleet_state::~fleet_state() = default;

shared_viewer_limit& fleet_state::viewer_limit_for(std::uint32_t per_minute) {
  std::lock_guard lock(mutex_);
  auto found = limits_.find(per_minute);
  if (found == limits_.end()) {
    viewer_limit_options lo;
    lo.tickets_per_minute = static_cast<double>(per_minute);
    lo.fallback = options.fallback;
    lo.local_share = options.viewer_local_share;
    // Made before it is added: a limit that throws leaves no empty entry behind for `publish` to read.
    auto made = std::make_unique<shared_viewer_limit>(redis, options.org, std::move(lo));
    found = limits_.emplace(per_minute, std::move(made)).first;
  }
  return *found->second;
}

void fleet_state::add_cross_process_reuse(std::uint64_t n) noexcept {
  cross_process_reuse_.fetch_add(n, std::memory_order_relaxed);
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
  auto const absent_now = tickets.known_absent();
  out.tickets.misses += absent_now - out.tickets.known_absent;
  out.tickets.known_absent = absent_now;
  // The erase subscription's counter and state change between publishes too.
  out.tickets.erasures_heard = tickets.erasures_heard();
  out.tickets.near_cache_live = tickets.near_cache_live();
  ticket_cache_access::known_keys_now(tickets, out.tickets);
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

void fleet_state::store_behind(std::shared_ptr<fleet_state> const& self,
                               std::vector<std::pair<ticket_identity, stored_ticket>> tickets,
                               std::chrono::system_clock::time_point now) {
  prepared_stores stores;
  // Kept locally and staged under one lock, so that an erase (`drop_staged`, under the same lock) finds the
  // store either not kept yet or staged: never kept, served, and only then staged behind the erase's back.
  std::lock_guard lock(self->writes_mutex_);
  ticket_cache_access::prepare(self->tickets, std::move(tickets), now, stores);
  if (stores.keys.empty()) {
    return;
  }
  self->handed_over_ += stores.keys.size();
  for (std::size_t i = 0; i < stores.keys.size(); ++i) {
    self->staged_.push_back(staged_store{std::move(stores.keys[i]), stores.ids[i], std::move(stores.args[2 * i]),
                                         std::move(stores.args[2 * i + 1]), stores.tokens[i]});
  }
  if (!self->drain_posted_ && !self->writing_) {
    self->drain_posted_ = true;
    asio::post(self->strand, [self] { drain(self); });
  }
}

void fleet_state::drain(std::shared_ptr<fleet_state> const& self) {
  prepared_stores taking;
  std::size_t taken = 0;
  {
    std::lock_guard lock(self->writes_mutex_);
    self->drain_posted_ = false;
    auto& staged = self->staged_;
    bool const stopped = self->shut_down_.load();
    // Taken in the order handed over, so that `written_` counts a prefix of it (what `flush` waits for); erased
    // stores are taken as done, without a write.
    while (!self->writing_ && !staged.empty()) {
      taking = {};
      auto const n = stopped ? staged.size() : std::min(staged.size(), max_tickets_per_write);
      taking.keys.reserve(n);
      taking.ids.reserve(n);
      taking.args.reserve(2 * n);
      taking.tokens.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        auto& next = staged.front();
        if (!next.erased) {
          taking.keys.push_back(std::move(next.key));
          taking.ids.push_back(next.id);
          taking.args.push_back(std::move(next.envelope));
          taking.args.push_back(std::move(next.px));
          taking.tokens.push_back(next.token);
        }
        staged.pop_front();
      }
      if (stopped) { // Redis is closed for good: kept locally, never written
        ticket_cache_access::end_unwritten(self->tickets, taking);
      }
      if (stopped || taking.keys.empty()) {
        self->written_ += n;
        self->wake_flushes();
        continue;
      }
      taken = n;
      self->writing_ = true;
    }
  }
  if (taken != 0) {
    asio::co_spawn(self->strand, write(self, std::move(taking), taken), asio::detached);
  }
}

asio::awaitable<void> fleet_state::write(std::shared_ptr<fleet_state> self, prepared_stores stores, std::size_t taken) {
  try {
    auto written = ticket_cache_access::write(self->tickets, std::move(stores)); // named: GCC 12 and co_await
    co_await std::move(written);
  } catch (...) { // NOLINT(bugprone-empty-catch): the client closed (or worse): the copies are local, writes go on
  }
  self->publish();
  std::lock_guard lock(self->writes_mutex_);
  self->writing_ = false;
  self->written_ += taken;
  self->wake_flushes();
  if (!self->staged_.empty() && !self->drain_posted_) {
    self->drain_posted_ = true;
    asio::post(self->strand, [self] { drain(self); });
  }
}

void fleet_state::drop_staged(std::string_view key) {
  std::lock_guard lock(writes_mutex_);
  for (auto& store : staged_) {
    if (store.key == key) {
      store.erased = true; // counted as done when the writer reaches it, in order
    }
  }
  ticket_cache_access::forget(tickets, key);
}

void fleet_state::wake_flushes() {
  std::erase_if(flushes_, [this](std::shared_ptr<flush_waiter> const& w) {
    if (w->target > written_) {
      return false;
    }
    w->complete({});
    return true;
  });
}

void fleet_state::add_flush(std::shared_ptr<flush_waiter> const& waiter) {
  std::lock_guard lock(writes_mutex_);
  waiter->target = handed_over_;
  if (written_ >= waiter->target) {
    waiter->complete({});
    return;
  }
  flushes_.push_back(waiter);
}

bool fleet_state::remove_flush(flush_waiter const* waiter) {
  std::lock_guard lock(writes_mutex_);
  auto const it = std::find_if(flushes_.begin(), flushes_.end(), [&](auto const& w) { return w.get() == waiter; });
  if (it == flushes_.end()) {
    return false;
  }
  flushes_.erase(it);
  return true;
}

void fleet_state::abort_flushes() {
  std::lock_guard lock(writes_mutex_);
  for (auto const& w : flushes_) {
    w->complete(asio::error::operation_aborted);
  }
  flushes_.clear();
}

namespace {

/// A `flush` waiting for its target: completes its handler on the handler's executor, once.
template <class Handler> class flush_waiter_for final : public fleet_state::flush_waiter {
public:
  flush_waiter_for(Handler handler, asio::any_io_executor const& fallback)
      : handler_(std::move(handler)), work_(asio::get_associated_executor(handler_, fallback)) {}

  void complete(std::error_code ec) override {
    auto const executor = work_.get_executor();
    asio::post(executor, [handler = std::move(handler_), work = std::move(work_), ec]() mutable {
      asio::get_associated_cancellation_slot(handler).clear(); // on the handler's executor, as its emits come
      std::move(handler)(ec);
    });
  }

private:
  Handler handler_;
  asio::executor_work_guard<asio::associated_executor_t<Handler, asio::any_io_executor>> work_;
};

/// A flush's cancellation: completes it with `operation_aborted` unless it completed already.
struct flush_canceller {
  std::weak_ptr<fleet_state> state;
  std::weak_ptr<fleet_state::flush_waiter> waiter;
  void operator()(asio::cancellation_type /*type*/) const {
    auto const s = state.lock();
    auto const w = waiter.lock();
    if (s && w && s->remove_flush(w.get())) {
      w->complete(asio::error::operation_aborted);
    }
  }
};

} // namespace

template <class CompletionToken>
auto fleet_state::async_flush(std::weak_ptr<fleet_state> self, CompletionToken&& token) {
  // The state is passed weakly: the operation's frame must not keep it (and the Redis connection, on its own
  // executor) alive after the fleet and its io_context are gone.
  return asio::async_initiate<CompletionToken, void(std::error_code)>(
      [](auto handler, std::weak_ptr<fleet_state> const& weak) {
        using handler_type = std::decay_t<decltype(handler)>;
        auto const state = weak.lock();
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto const fallback = state ? state->strand : asio::any_io_executor(asio::system_executor());
        auto waiter = std::make_shared<flush_waiter_for<handler_type>>(std::move(handler), fallback);
        if (!state) {
          waiter->complete(asio::error::operation_aborted);
          return;
        }
        if (slot.is_connected()) {
          slot.template emplace<flush_canceller>(weak, std::weak_ptr<flush_waiter>(waiter));
        }
        state->add_flush(waiter);
      },
      token, std::move(self));
}

asio::awaitable<std::error_code> fleet_state::flush(std::weak_ptr<fleet_state> self) {
  std::error_code ec;
  co_await async_flush(std::move(self), asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
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
  // The commands the ticket cache sends on its own (the read whole of its replica of keys) are in the counters as
  // soon as they are answered, as every call's are.
  detail::ticket_cache_access::after_own_commands(impl_->tickets, [weak = std::weak_ptr<detail::fleet_state>(impl_)] {
    if (auto const state = weak.lock()) {
      state->publish();
    }
  });
}

void fleet::configure(client_options& options) const {
  if (options.viewer_tickets_per_minute == 0U) {
    throw error(errc::invalid_argument, "fleet: viewer_tickets_per_minute must be > 0");
  }
  // Everything made first, then `options` changed: a throw leaves the caller's options as they were.
  auto tickets = std::make_shared<detail::redis_ticket_store>(impl_);
  std::shared_ptr<viewer_limit> limit;
  if (options.viewer_tickets_per_minute) {
    limit = std::make_shared<detail::redis_viewer_limit>(impl_,
                                                         impl_->viewer_limit_for(*options.viewer_tickets_per_minute));
  }
  options.tickets = std::move(tickets);
  if (limit) {
    options.viewer_limit = std::move(limit);
  }
  options.retry.admission.shared_pace = pace_;
}

fleet_stats fleet::stats() const {
  return impl_->snapshot();
}

fleet::~fleet() {
  impl_->abort_flushes();
}

asio::awaitable<void> fleet::flush() {
  auto flushed = detail::fleet_state::flush(impl_); // named: GCC 12 and co_await temporaries
  if (auto const ec = co_await std::move(flushed)) {
    throw error(ec, "fleet: flush cancelled, or the fleet destroyed, before the writes it waited for ended");
  }
}

void fleet::shutdown() noexcept {
  detail::fleet_state::shut_down(impl_);
}

} // namespace wandura
