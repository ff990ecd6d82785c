#include "wandura/fleet/shared_ticket_cache.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <string_view>
#include <vector>

#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include "fallback_guard.hpp"
#include "local_ticket_cache.hpp"
#include "lua_scripts.hpp"
#include "redis_script.hpp"
#include "redis_subscriber.hpp"
#include "saturating_time.hpp"
#include "ticket_cache_access.hpp"
#include "ticket_envelope.hpp"
#include "wandura/error.hpp"

namespace wandura {
namespace {

using std::chrono::steady_clock;
using std::chrono::system_clock;

void check_identity(ticket_identity const& who) {
  if (who.viewer_ref.empty() || who.union_info.empty()) {
    throw error(errc::invalid_argument, "ticket cache: viewer_ref and union_info must not be empty");
  }
}

void throw_if_cancelled(std::error_code ec, std::string_view what) {
  if (ec == asio::error::operation_aborted) {
    throw error(ec, "ticket cache: " + std::string(what) + " cancelled");
  }
}

bool is_integer(redis_reply const& reply) {
  return reply.type == redis_reply::kind::integer;
}

/// What a lookup answers: any bytes stored (the public API carries any), or only the fleet's ticket store's payloads
/// (for the store, other bytes under its key are refused, as corrupt ones are).
enum class payloads { any, ticket_store };

} // namespace

struct shared_ticket_cache::impl {
  impl(impl const&) = delete;
  impl& operator=(impl const&) = delete;
  ~impl() {
    if (subscriber) {
      subscriber->stop();
    }
  }
  impl(redis_client& r, std::string o, ticket_cache_options opts)
      : redis(r), org(std::move(o)), erase_channel(fleet_keys::ticket_erasures(org)), options(std::move(opts)),
        local(options.local_capacity), guard("ticket_cache", r.server_name(), options.fallback),
        put_script(detail::lua::ticket_put), erase_script(detail::lua::ticket_erase) {}

  // The stored bytes as a reusable ticket for `who` at `now`, or nothing (counted as rejected if bytes were there).
  std::optional<cached_ticket> accept(redis_reply const& reply, ticket_identity const& who,
                                      system_clock::time_point now) {
    if (reply.is_nil()) {
      return std::nullopt;
    }
    auto env = reply.type == redis_reply::kind::string ? detail::decode_envelope(reply.text) : std::nullopt;
    if (!env || env->who != who || now >= detail::saturating_sub(env->ticket.expires_at, options.reuse_margin)) {
      ++stats.rejected;
      return std::nullopt;
    }
    return std::move(env->ticket);
  }

  /// The generation local copies kept now belong to: the live subscription's, or 0 (a fallback copy only).
  [[nodiscard]] std::uint64_t near_generation() const {
    std::lock_guard lock(local_mutex);
    return subscribed ? generation : 0;
  }

  /// The local copy of `who`'s ticket if it is a near copy of the live subscription. With `local_mutex` held.
  [[nodiscard]] detail::local_ticket const* near_copy(detail::ticket_identity_view who,
                                                      system_clock::time_point now) const {
    return local.find_near(who, now, subscribed ? generation : 0);
  }

  /// The local copy of `who`'s ticket, near or not: the fallback.
  [[nodiscard]] std::optional<detail::local_ticket> fallback_copy(ticket_identity const& who,
                                                                  system_clock::time_point now) const {
    std::lock_guard lock(local_mutex);
    auto const* found = local.find(who, now);
    return found != nullptr ? std::optional(*found) : std::nullopt;
  }

  /// Opens the subscription to the erase channel, once: at the first ticket kept locally.
  void subscribe() {
    if (!options.near_cache || subscriber || redis.closed()) {
      return;
    }
    subscriber =
        std::make_shared<detail::redis_subscriber>(redis.get_executor(), detail::options_of(redis), erase_channel,
                                                   detail::redis_subscriber::handlers{
                                                       .on_message =
                                                           [this](std::string_view key) {
                                                             forget(key);
                                                             erasures_heard.fetch_add(1, std::memory_order_relaxed);
                                                           },
                                                       .on_state =
                                                           [this](bool live) {
                                                             // Either way, copies kept so far are not served near
                                                             // again: erases may have been missed before the
                                                             // subscription began.
                                                             std::lock_guard lock(local_mutex);
                                                             subscribed = live;
                                                             ++generation;
                                                           },
                                                   });
    subscriber->start();
  }

  /// Keeps `ticket` of `who` (Redis key `key`) locally until its reuse limit, as a near copy of generation
  /// `kept_as` (0: a fallback copy only). Any thread.
  void keep_local(std::string key, ticket_identity who, detail::local_ticket ticket, system_clock::time_point now,
                  std::uint64_t kept_as, std::uint64_t unwritten = 0) {
    auto const reuse_until = detail::saturating_sub(ticket.cached.expires_at, options.reuse_margin);
    std::lock_guard lock(local_mutex);
    local.store(std::move(key), std::move(who), std::move(ticket), reuse_until, now, kept_as, unwritten);
  }

  /// `keep_local`, and the erase subscription opened if it is not yet. On the executor.
  void keep(std::string key, ticket_identity who, detail::local_ticket ticket, system_clock::time_point now,
            std::uint64_t kept_as) {
    keep_local(std::move(key), std::move(who), std::move(ticket), now, kept_as);
    subscribe();
  }

  void forget(std::string_view key) {
    std::lock_guard lock(local_mutex);
    local.erase(key);
  }

  /// The tickets of `who` at `now` from Redis (one `MGET`), or from the local copy when Redis is not asked or
  /// fails; what Redis answered is kept locally. Only `wanted` payloads are answered (others are misses, refused
  /// and not kept when read from Redis). Counts hits and misses. The near cache is not asked.
  asio::awaitable<std::vector<std::optional<detail::local_ticket>>>
  look_up(std::vector<ticket_identity> const& who, system_clock::time_point now, payloads wanted) {
    std::vector<std::optional<detail::local_ticket>> found(who.size());
    if (who.empty()) {
      co_return found;
    }
    std::vector<std::string> keys;
    keys.reserve(who.size());
    std::vector<std::string_view> command;
    command.reserve(who.size() + 1);
    command.emplace_back("MGET");
    for (auto const& w : who) {
      command.emplace_back(keys.emplace_back(fleet_keys::ticket(org, w)));
    }
    bool answered = false;
    if (guard.ask_redis(steady_clock::now())) {
      auto const generation_asked = near_generation();
      auto const erasures = erasures_heard.load(std::memory_order_relaxed);
      auto [ec, reply] = co_await redis.async_command(command, asio::experimental::as_tuple(asio::use_awaitable));
      throw_if_cancelled(ec, "lookup");
      if (!ec && (reply.type != redis_reply::kind::array || reply.elements.size() != who.size())) {
        ec = fleet_errc::unexpected_reply; // not one value per key
      }
      if (!ec) {
        guard.redis_answered();
        answered = true;
        // An erase heard meanwhile may have overtaken this reply (its notice comes on the other connection): what
        // was read is answered but not kept, not even for the fallback, which would serve it with Redis away. A
        // subscription that changed meanwhile may have missed one: kept for the fallback only.
        bool const keep_read = erasures == erasures_heard.load(std::memory_order_relaxed);
        auto const keep_as = generation_asked == near_generation() ? generation_asked : 0;
        for (std::size_t i = 0; i < who.size(); ++i) {
          if (auto ticket = accept(reply.elements[i], who[i], now)) {
            found[i] = detail::with_decoded(std::move(*ticket));
            if (wanted == payloads::ticket_store && !found[i]->decoded) {
              ++stats.rejected; // another format under the store's key: never served to it, so not kept either
              found[i].reset();
              continue;
            }
            if (keep_read) {
              keep(std::move(keys[i]), who[i], *found[i], now, keep_as);
            }
          }
        }
      } else {
        guard.redis_failed(ec, steady_clock::now());
      }
    }
    if (!answered) {
      for (std::size_t i = 0; i < who.size(); ++i) {
        found[i] = fallback_copy(who[i], now);
        if (wanted == payloads::ticket_store && found[i] && !found[i]->decoded) {
          found[i].reset();
        }
      }
    }
    for (auto const& f : found) { // near hits are counted apart
      ++(f ? stats.hits : stats.misses);
    }
    co_return found;
  }

  /// The first half of a store: each ticket kept locally and added to `into` (its key, envelope and PX), unless it
  /// is reusable for less than a millisecond at `now`. Until its write ends, the local copy is served near
  /// whatever the subscription's state, with the near cache on: a lookup of this process would otherwise ask Redis
  /// before the write lands. Any thread.
  void prepare(std::vector<std::pair<ticket_identity, detail::local_ticket>> tickets, system_clock::time_point now,
               detail::prepared_stores& into) {
    auto const kept_as = near_generation();
    // This store's token: its copies are served near until its write ends, and only its write's end clears them.
    // None with the near cache off (every lookup asks Redis) or once the writes stopped (never written now).
    std::uint64_t const token = options.near_cache && !writes_stopped.load(std::memory_order_acquire)
                                    ? next_token.fetch_add(1, std::memory_order_relaxed)
                                    : 0;
    for (auto& [who, ticket] : tickets) {
      // Saturated, and compared before subtracting: `time_point::min() - now` would overflow.
      auto const reuse_until = detail::saturating_sub(ticket.cached.expires_at, options.reuse_margin);
      auto const px =
          reuse_until <= now ? 0 : std::chrono::duration_cast<std::chrono::milliseconds>(reuse_until - now).count();
      if (px < 1) {
        continue; // nothing left to reuse
      }
      into.keys.push_back(fleet_keys::ticket(org, who));
      into.args.push_back(detail::encode_envelope(who, ticket.cached));
      into.args.push_back(std::to_string(px));
      into.tokens.push_back(token);
      keep_local(into.keys.back(), std::move(who), std::move(ticket), now, kept_as, token); // `who` not used again
    }
  }

  /// The copies `stores` kept are no longer waiting for a write (it ended, or will never happen): from now on they
  /// are served near only under their generation. Copies of later stores of the same keys keep their marks.
  void end_unwritten(detail::prepared_stores const& stores) {
    std::lock_guard lock(local_mutex);
    for (std::size_t i = 0; i < stores.keys.size(); ++i) {
      if (stores.tokens[i] != 0) {
        local.written(stores.keys[i], stores.tokens[i]);
      }
    }
  }

  /// The second half: the prepared stores written in one script (or fallen back). On the executor.
  asio::awaitable<void> write(detail::prepared_stores const& stores) {
    if (stores.keys.empty()) {
      co_return;
    }
    subscribe(); // the local copies just kept are served near once it is live
    // Written or not (fallen back, cancelled), the copies are served near only under their generation from now on.
    struct ends_unwritten {
      impl& self;
      detail::prepared_stores const& stores;
      ends_unwritten(impl& s, detail::prepared_stores const& p) : self(s), stores(p) {}
      ends_unwritten(ends_unwritten const&) = delete;
      ends_unwritten& operator=(ends_unwritten const&) = delete;
      ~ends_unwritten() { self.end_unwritten(stores); }
    } const ended{*this, stores};
    std::vector<std::string_view> const key_views(stores.keys.begin(), stores.keys.end());
    std::vector<std::string_view> const arg_views(stores.args.begin(), stores.args.end());
    co_await detail::run_or_fall_back(put_script, redis, guard, key_views, arg_views, &is_integer,
                                      "ticket cache: store");
  }

  /// Stores each ticket as `put` does: kept locally, then one script for all.
  asio::awaitable<void> store(std::vector<std::pair<ticket_identity, detail::local_ticket>> tickets,
                              system_clock::time_point now) {
    detail::prepared_stores stores;
    prepare(std::move(tickets), now, stores);
    co_await write(stores);
  }

  redis_client& redis;
  std::string org;
  std::string erase_channel;
  ticket_cache_options options;
  mutable std::mutex local_mutex; ///< guards `local`, `subscribed` and `generation`: near lookups come from any thread
  detail::local_ticket_cache local;
  detail::fallback_guard guard;
  detail::redis_script put_script;
  detail::redis_script erase_script;
  ticket_cache_stats stats;                     ///< on the executor; `hits` there excludes near hits
  std::atomic<std::uint64_t> near_hits{0};      ///< counted on any thread
  std::atomic<std::uint64_t> erasures_heard{0}; ///< counted on the executor, read from any thread
  bool subscribed = false;                      ///< the erase channel's subscription is confirmed and its connection up
  std::uint64_t generation = 0;                 ///< bumped whenever the subscription begins or ends
  std::atomic<std::uint64_t> next_token{1};     ///< the next store's token (`prepare`)
  std::atomic<bool> writes_stopped{false};      ///< the cache was shut down: no store is written any more
  /// Stopped first when the cache goes: its handlers never run after that.
  std::shared_ptr<detail::redis_subscriber> subscriber;
};

shared_ticket_cache::shared_ticket_cache(redis_client& redis, std::string_view org, ticket_cache_options options) {
  fleet_keys::check_org(org);
  impl_ = std::make_shared<impl>(redis, std::string(org), std::move(options));
}

shared_ticket_cache::~shared_ticket_cache() = default;

asio::awaitable<std::optional<cached_ticket>> shared_ticket_cache::get(ticket_identity who,
                                                                       system_clock::time_point now) {
  std::vector<ticket_identity> one;
  one.push_back(std::move(who));
  auto lookup = get_many(std::move(one), now); // named: GCC 12 and co_await temporaries
  auto found = co_await std::move(lookup);
  co_return std::move(found.front());
}

std::optional<cached_ticket> shared_ticket_cache::find_near(ticket_identity const& who,
                                                            system_clock::time_point now) const {
  check_identity(who);
  std::lock_guard lock(impl_->local_mutex);
  auto const* found = impl_->near_copy(who, now);
  if (found == nullptr) {
    return std::nullopt;
  }
  impl_->near_hits.fetch_add(1, std::memory_order_relaxed);
  return found->cached;
}

asio::awaitable<std::vector<std::optional<cached_ticket>>>
shared_ticket_cache::get_many(std::vector<ticket_identity> who, system_clock::time_point now) {
  for (auto const& w : who) {
    check_identity(w);
  }
  std::vector<std::optional<cached_ticket>> found(who.size());
  std::vector<ticket_identity> rest; // the identities the near cache did not answer
  std::vector<std::size_t> rest_at;
  for (std::size_t i = 0; i < who.size(); ++i) {
    found[i] = find_near(who[i], now);
    if (!found[i]) {
      rest.push_back(std::move(who[i]));
      rest_at.push_back(i);
    }
  }
  auto const self = impl_;                               // the lookup may outlive this cache
  auto lookup = self->look_up(rest, now, payloads::any); // named: GCC 12 and co_await temporaries
  auto remote = co_await std::move(lookup);
  for (std::size_t j = 0; j < rest_at.size(); ++j) {
    if (remote[j]) {
      found[rest_at[j]] = std::move(remote[j]->cached);
    }
  }
  co_return found;
}

asio::awaitable<void> shared_ticket_cache::put(ticket_identity who, cached_ticket ticket,
                                               system_clock::time_point now) {
  std::vector<std::pair<ticket_identity, cached_ticket>> one;
  one.emplace_back(std::move(who), std::move(ticket));
  auto store = put_many(std::move(one), now); // named: GCC 12 and co_await temporaries
  co_await std::move(store);
}

asio::awaitable<void> shared_ticket_cache::put_many(std::vector<std::pair<ticket_identity, cached_ticket>> tickets,
                                                    system_clock::time_point now) {
  for (auto const& [who, ticket] : tickets) {
    check_identity(who);
  }
  std::vector<std::pair<ticket_identity, detail::local_ticket>> entries;
  entries.reserve(tickets.size());
  for (auto& [who, ticket] : tickets) {
    entries.emplace_back(std::move(who), detail::with_decoded(std::move(ticket)));
  }
  auto const self = impl_;                           // the store may outlive this cache
  auto store = self->store(std::move(entries), now); // named: GCC 12 and co_await temporaries
  co_await std::move(store);
}

asio::awaitable<void> shared_ticket_cache::erase(ticket_identity who) {
  check_identity(who);
  auto const self = impl_; // the erase may outlive this cache
  std::string const key = fleet_keys::ticket(self->org, who);
  self->forget(key);
  std::array<std::string_view, 1> const keys{key};
  std::array<std::string_view, 1> const args{self->erase_channel};
  co_await detail::run_or_fall_back(self->erase_script, self->redis, self->guard, keys, args, &is_integer,
                                    "ticket cache: erase");
  // Once more: a lookup whose MGET went out before the erase (one connection, answered in order) read the ticket
  // and kept it meanwhile, and this erase's own notice may come back later than its reply.
  self->forget(key);
}

std::uint64_t shared_ticket_cache::near_hits() const noexcept {
  return impl_->near_hits.load(std::memory_order_relaxed);
}

std::uint64_t shared_ticket_cache::erasures_heard() const noexcept {
  return impl_->erasures_heard.load(std::memory_order_relaxed);
}

bool shared_ticket_cache::near_cache_live() const noexcept {
  return impl_->near_generation() != 0;
}

ticket_cache_stats shared_ticket_cache::stats() const noexcept {
  ticket_cache_stats out = impl_->stats;
  out.fallbacks = impl_->guard.fallbacks();
  out.degraded = impl_->guard.degraded();
  out.near_hits = impl_->near_hits.load(std::memory_order_relaxed);
  out.hits += out.near_hits;
  out.erasures_heard = erasures_heard();
  out.near_cache_live = near_cache_live();
  return out;
}

namespace detail {

std::optional<near_ticket> ticket_cache_access::find_near(shared_ticket_cache& cache, ticket_identity_view who,
                                                          system_clock::time_point now, std::string_view process_id) {
  auto& self = *cache.impl_;
  std::lock_guard lock(self.local_mutex);
  auto const* found = self.near_copy(who, now);
  if (found == nullptr) {
    return std::nullopt;
  }
  if (!found->decoded) {
    self.local.erase(who); // another format under a key of ours: the ticket store never serves it
    return std::nullopt;
  }
  self.near_hits.fetch_add(1, std::memory_order_relaxed);
  return near_ticket{found->decoded->value, found->decoded->process_id != process_id};
}

std::optional<std::vector<near_ticket>> ticket_cache_access::find_near_all(shared_ticket_cache& cache,
                                                                           std::span<ticket_identity_view const> who,
                                                                           system_clock::time_point now,
                                                                           std::string_view process_id) {
  auto& self = *cache.impl_;
  std::lock_guard lock(self.local_mutex);
  // All or nothing: a miss sends the whole lookup the long way, uncounted here. The copies found are held as
  // pointers until every key has one (a batch is at most `ticket_batch::max_episodes`; more look up twice).
  constexpr std::size_t held = ticket_batch::max_episodes;
  std::array<local_ticket const*, held> found{};
  for (std::size_t i = 0; i < who.size(); ++i) {
    auto const* copy = self.near_copy(who[i], now);
    if (copy == nullptr) {
      return std::nullopt;
    }
    if (!copy->decoded) {
      self.local.erase(who[i]); // another format under a key of ours: the ticket store never serves it
      return std::nullopt;
    }
    if (i < held) {
      found[i] = copy;
    }
  }
  std::vector<near_ticket> out;
  out.reserve(who.size());
  for (std::size_t i = 0; i < who.size(); ++i) {
    auto const& stored = *(i < held ? found[i] : self.near_copy(who[i], now))->decoded;
    out.push_back(near_ticket{stored.value, stored.process_id != process_id});
  }
  self.near_hits.fetch_add(who.size(), std::memory_order_relaxed);
  return out;
}

asio::awaitable<std::vector<std::optional<stored_ticket>>>
ticket_cache_access::get_many_past_near(shared_ticket_cache& cache, std::vector<ticket_identity> who,
                                        system_clock::time_point now) {
  for (auto const& w : who) {
    check_identity(w);
  }
  auto lookup = cache.impl_->look_up(who, now, payloads::ticket_store); // named: GCC 12 and co_await temporaries
  auto remote = co_await std::move(lookup);
  std::vector<std::optional<stored_ticket>> found(who.size());
  for (std::size_t i = 0; i < who.size(); ++i) {
    if (remote[i]) {
      found[i] = std::move(remote[i]->decoded);
    }
  }
  co_return found;
}

void ticket_cache_access::prepare(shared_ticket_cache& cache,
                                  std::vector<std::pair<ticket_identity, stored_ticket>> tickets,
                                  system_clock::time_point now, prepared_stores& into) {
  std::vector<std::pair<ticket_identity, local_ticket>> entries;
  entries.reserve(tickets.size());
  for (auto& [who, ticket] : tickets) {
    check_identity(who);
    cached_ticket cached{encode_ticket_payload(ticket.process_id, ticket.value), ticket.value.expires_at};
    entries.emplace_back(std::move(who), local_ticket{std::move(cached), std::move(ticket)});
  }
  cache.impl_->prepare(std::move(entries), now, into);
}

asio::awaitable<void> ticket_cache_access::write(shared_ticket_cache& cache, prepared_stores stores) {
  auto const self = cache.impl_;    // the write may outlive the cache
  auto write = self->write(stores); // named: GCC 12 and co_await temporaries
  co_await std::move(write);
}

void ticket_cache_access::end_unwritten(shared_ticket_cache& cache, prepared_stores const& stores) {
  cache.impl_->end_unwritten(stores);
}

void ticket_cache_access::forget(shared_ticket_cache& cache, std::string_view key) {
  cache.impl_->forget(key);
}

void ticket_cache_access::shut_down(shared_ticket_cache& cache) {
  auto& self = *cache.impl_;
  self.writes_stopped.store(true, std::memory_order_release);
  if (self.subscriber) {
    self.subscriber->stop();
  }
  std::lock_guard lock(self.local_mutex);
  self.subscribed = false; // no erase is heard any more: the copies kept are the fallback's only
  ++self.generation;
}

} // namespace detail

} // namespace wandura
