#include "wandura/fleet/shared_ticket_cache.hpp"

#include <array>

#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>

#include "fallback_guard.hpp"
#include "local_ticket_cache.hpp"
#include "lua_scripts.hpp"
#include "redis_script.hpp"
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

} // namespace

struct shared_ticket_cache::impl {
  impl(redis_client& r, std::string o, ticket_cache_options opts)
      : redis(r), org(std::move(o)), options(std::move(opts)), local(options.local_capacity),
        guard("ticket_cache", r.server_name(), options.fallback), put_script(detail::lua::ticket_put) {}

  // The stored bytes as a reusable ticket for `who` at `now`, or nothing (counted as rejected if bytes were there).
  std::optional<cached_ticket> accept(redis_reply const& reply, ticket_identity const& who,
                                      system_clock::time_point now) {
    if (reply.is_nil()) {
      return std::nullopt;
    }
    auto env = reply.type == redis_reply::kind::string ? detail::decode_envelope(reply.text) : std::nullopt;
    if (!env || env->who != who || now >= env->ticket.expires_at - options.reuse_margin) {
      ++stats.rejected;
      return std::nullopt;
    }
    return std::move(env->ticket);
  }

  redis_client& redis;
  std::string org;
  ticket_cache_options options;
  detail::local_ticket_cache local;
  detail::fallback_guard guard;
  detail::redis_script put_script;
  ticket_cache_stats stats;
};

shared_ticket_cache::shared_ticket_cache(redis_client& redis, std::string_view org, ticket_cache_options options) {
  fleet_keys::check_org(org);
  impl_ = std::make_unique<impl>(redis, std::string(org), std::move(options));
}

shared_ticket_cache::~shared_ticket_cache() = default;

asio::awaitable<std::optional<cached_ticket>> shared_ticket_cache::get(ticket_identity who,
                                                                       system_clock::time_point now) {
  check_identity(who);
  impl& self = *impl_;
  std::string const key = fleet_keys::ticket(self.org, who);
  std::optional<cached_ticket> found;
  bool answered = false;
  if (self.guard.ask_redis(steady_clock::now())) {
    std::array<std::string_view, 2> const command{"GET", key};
    auto [ec, reply] = co_await self.redis.async_command(command, asio::experimental::as_tuple(asio::use_awaitable));
    throw_if_cancelled(ec, "lookup");
    if (!ec) {
      self.guard.redis_answered();
      found = self.accept(reply, who, now);
      answered = true;
    } else {
      self.guard.redis_failed(ec, steady_clock::now());
    }
  }
  if (!answered) {
    found = self.local.find(key, who, now);
  }
  ++(found ? self.stats.hits : self.stats.misses);
  co_return found;
}

asio::awaitable<void> shared_ticket_cache::put(ticket_identity who, cached_ticket ticket,
                                               system_clock::time_point now) {
  check_identity(who);
  impl& self = *impl_;
  auto const reuse_until = ticket.expires_at - self.options.reuse_margin;
  auto const px = std::chrono::duration_cast<std::chrono::milliseconds>(reuse_until - now).count();
  if (px < 1) {
    co_return; // nothing left to reuse
  }
  std::string const key = fleet_keys::ticket(self.org, who);
  self.local.store(key, who, ticket, reuse_until, now);
  std::string const envelope = detail::encode_envelope(who, ticket);
  std::string const px_text = std::to_string(px);
  std::array<std::string_view, 1> const keys{key};
  std::array<std::string_view, 2> const args{envelope, px_text};
  co_await detail::run_or_fall_back(self.put_script, self.redis, self.guard, keys, args, &is_integer,
                                    "ticket cache: store");
}

asio::awaitable<void> shared_ticket_cache::erase(ticket_identity who) {
  check_identity(who);
  impl& self = *impl_;
  std::string const key = fleet_keys::ticket(self.org, who);
  self.local.erase(key);
  if (!self.guard.ask_redis(steady_clock::now())) {
    co_return;
  }
  std::array<std::string_view, 2> const command{"DEL", key};
  auto [ec, reply] = co_await self.redis.async_command(command, asio::experimental::as_tuple(asio::use_awaitable));
  throw_if_cancelled(ec, "erase");
  if (!ec) {
    self.guard.redis_answered();
  } else {
    self.guard.redis_failed(ec, steady_clock::now());
  }
}

ticket_cache_stats shared_ticket_cache::stats() const noexcept {
  ticket_cache_stats out = impl_->stats;
  out.fallbacks = impl_->guard.fallbacks();
  out.degraded = impl_->guard.degraded();
  return out;
}

} // namespace wandura
