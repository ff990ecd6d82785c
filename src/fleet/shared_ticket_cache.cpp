#include "wandura/fleet/shared_ticket_cache.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <mutex>
#include <string_view>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "fallback_guard.hpp"
#include "known_keys.hpp"
#include "local_ticket_cache.hpp"
#include "lua_scripts.hpp"
#include "redis_script.hpp"
#include "redis_subscriber.hpp"
#include "saturating_time.hpp"
#include "ticket_cache_access.hpp"
#include "ticket_envelope.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/redis_url.hpp"

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

/// A positive number of milliseconds in decimal, as a store's message and the resync carry a PX; nothing otherwise.
std::optional<std::int64_t> positive_ms(std::string_view text) noexcept {
  std::int64_t ms = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc{} || end != text.data() + text.size() || ms <= 0) {
    return std::nullopt;
  }
  return ms;
}

/// The most keys one page of the replica's resync reads (`SCAN`'s COUNT: a hint, pages may hold a few more).
/// 200 keys, each with its `PTTL` in the script: well under a millisecond of Redis's time a page, so that a page
/// fits the default command timeout of a few ms and never holds other clients' commands long (1000 keys took
/// Redis 1.8-3.4 ms, and a read whole of 20,000 keys at the default timeout often never ended).
constexpr std::string_view resync_page = "200";

/// The least time between the end of one read whole and a read whole of the same subscription after the replica
/// lost track (an unreadable message, an overflow).
constexpr std::chrono::seconds min_reread{2};

/// What a lookup answers: any bytes stored (the public API carries any), or only the fleet's ticket store's payloads
/// (for the store, other bytes under its key are refused, as corrupt ones are).
enum class payloads { any, ticket_store };

} // namespace

struct shared_ticket_cache::impl : std::enable_shared_from_this<impl> {
  impl(impl const&) = delete;
  impl& operator=(impl const&) = delete;
  ~impl() {
    if (subscriber) {
      subscriber->stop();
    }
  }
  impl(redis_client& r, std::string o, ticket_cache_options opts)
      : redis(r), org(std::move(o)),
        erase_channel(fleet_keys::ticket_erasures(org, redis_url::parse(detail::options_of(r).url).db)),
        options(std::move(opts)),
        local(options.local_capacity, &detail::local_ticket_cache::hash_of, options.local_max_bytes),
        known(options.near_cache ? options.known_keys_capacity : 0),
        guard("ticket_cache", r.server_name(), options.fallback, "ticket"),
        put_script(detail::lua::ticket_put, detail::redis_access::write),
        erase_script(detail::lua::ticket_erase, detail::redis_access::write),
        scan_script(detail::lua::ticket_scan, detail::redis_access::read) {
    ticket_prefix = fleet_keys::ticket(org, ticket_identity{"v", "d", "", 0, ""});
    ticket_prefix.resize(ticket_prefix.size() - 32); // `wandura:{org}:ticket:`, without the hash's hex
    scan_pattern = ticket_prefix + '*';
  }

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
    subscriber = std::make_shared<detail::redis_subscriber>(
        redis.get_executor(), detail::options_of(redis), erase_channel,
        // The handlers hold the state weakly: a handler running on one of the executor's threads while the last
        // owner lets go of the cache on another keeps what it uses until it returns.
        detail::redis_subscriber::handlers{
            .on_message =
                [weak = weak_from_this()](std::string_view message) {
                  if (auto const self = weak.lock()) {
                    self->hear(message);
                  }
                },
            .on_state =
                [weak = weak_from_this()](bool live) {
                  if (auto const self = weak.lock()) {
                    self->subscription_changed(live);
                  }
                },
        });
    subscriber->start();
  }

  /// The id the local copy and the replica know the Redis key `key` by; nothing for a key that is not a ticket
  /// key of this organisation (no copy is ever kept under such a key).
  [[nodiscard]] std::optional<detail::ticket_key_id> id_of(std::string_view key) const noexcept {
    return detail::ticket_key_id_of(key, ticket_prefix);
  }

  /// Keeps `ticket` of `who` (Redis key id `id`) locally until its reuse limit, as a near copy of generation
  /// `kept_as` (0: a fallback copy only). Any thread.
  void keep_local(detail::ticket_key_id id, detail::ticket_identity_view who, detail::local_ticket ticket,
                  system_clock::time_point now, std::uint64_t kept_as, std::uint64_t unwritten = 0) {
    auto const reuse_until = detail::saturating_sub(ticket.cached.expires_at, options.reuse_margin);
    std::lock_guard lock(local_mutex);
    local.store(id, who, std::move(ticket), reuse_until, now, kept_as, unwritten);
  }

  /// `keep_local` under the Redis key `key`, and the erase subscription opened if it is not yet. On the executor.
  void keep(std::string_view key, detail::ticket_identity_view who, detail::local_ticket ticket,
            system_clock::time_point now, std::uint64_t kept_as) {
    if (auto const id = id_of(key)) { // always: every key read is built by `fleet_keys::ticket`
      keep_local(*id, who, std::move(ticket), now, kept_as);
    }
    subscribe();
  }

  void forget(std::string_view key) {
    if (auto const id = id_of(key)) {
      std::lock_guard lock(local_mutex);
      local.erase(*id);
    }
  }

  /// The subscription began (`live`) or ended. On the executor.
  void subscription_changed(bool live) {
    {
      // Either way, copies kept so far are not served near again: erases may have been missed before the
      // subscription began; and the keys known are read again, stores may have been missed too.
      std::lock_guard lock(local_mutex);
      subscribed = live;
      ++generation;
      if (live) {
        known.begin(generation);
      } else {
        known.lose();
      }
    }
    if (live) { // read at once, not after an earlier failure's backoff
      resync_timer.cancel();
    }
    resync_if_wanted();
  }

  /// A message on the erase channel: an erased ticket's key, or a store script's `+` and `<key> <px>` lines. On
  /// the executor.
  void hear(std::string_view message) {
    if (!message.starts_with('+')) {
      if (auto const id = id_of(message)) {
        std::lock_guard lock(local_mutex);
        local.erase(*id);
        known.remove(*id);
      }
      erasures_heard.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto const now = steady_clock::now();
    {
      std::lock_guard lock(local_mutex);
      bool readable = true;
      for (auto rest = message.substr(1); !rest.empty();) {
        auto const end = rest.find('\n');
        auto const line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        auto const space = line.find(' ');
        auto const id = id_of(line.substr(0, space));
        auto const px = space == std::string_view::npos ? std::nullopt : positive_ms(line.substr(space + 1));
        if (!id || !px) {
          readable = false; // not one of ours: what it stood for is unknown
          continue;
        }
        known.add(*id, detail::saturating_add(now, std::chrono::milliseconds(*px)));
      }
      if (!readable) {
        known.lose_track();
      }
    }
    stores_heard.fetch_add(1, std::memory_order_relaxed);
    resync_if_wanted(); // after an overflow, or a message that could not be read
  }

  /// True when the key `id` is known to be absent from Redis (known.hpp). With `local_mutex` held.
  [[nodiscard]] bool known_absent_locked(detail::ticket_key_id id) const {
    return known.absent(id, steady_clock::now());
  }

  /// Starts the replica's resync unless it runs: when a subscription began, or the replica lost track. On the
  /// executor.
  void resync_if_wanted() {
    {
      std::lock_guard lock(local_mutex);
      if (stopped() || resync_running || !(known.resync_wanted() || known.syncing())) {
        return; // stopped: the client may be gone already (it must outlive the cache, not what the cache left)
      }
      resync_running = true;
    }
    asio::co_spawn(redis.get_executor(), resync(shared_from_this()), asio::detached);
  }

  /// Reads every ticket key of the organisation and its PTTL, a page a round trip, into the replica, for as long
  /// as a resync is wanted: after a failure or an overflow, again after a backoff (1 s, doubling, at most 5 min);
  /// at once for a new subscription. Holds the cache's state until it ends, which the cache's end or `shut_down`
  /// brings about within one command timeout. On the executor.
  static asio::awaitable<void> resync(std::shared_ptr<impl> self) {
    try {
      auto run = self->resync_while_wanted(); // named: GCC 12 and co_await temporaries
      co_await std::move(run);
    } catch (...) { // NOLINT(bugprone-empty-catch): out of memory, say: incomplete (lookups ask) until next heard
      std::lock_guard lock(self->local_mutex);
      self->known.lose_track();
      self->resync_running = false;
    }
  }

  /// `resync`'s loop. Ends with `resync_running` false, under the lock that saw nothing more to do.
  asio::awaitable<void> resync_while_wanted() {
    auto const self = shared_from_this();
    std::chrono::milliseconds backoff{0};
    std::optional<steady_clock::time_point> wait_until;
    // Where the pass of `resume_of` stopped: a pass that failed resumes there, not from the first page (SCAN's
    // guarantee holds over the pages of one iteration however long apart, and the keys of the pages read are kept
    // while the subscription stays the one begun; a store or erase meanwhile comes as a message).
    std::string resume_at = "0";
    std::optional<std::uint64_t> resume_of;
    for (;;) {
      std::uint64_t resyncing = 0;
      {
        std::lock_guard lock(self->local_mutex);
        if (self->stopped() || !(self->known.resync_wanted() || self->known.syncing())) {
          self->resync_running = false;
          co_return;
        }
        if (self->known.resync_wanted()) {
          // The same subscription: what it lost is read again, but not sooner than `min_reread` after the last
          // read whole ended, so that a message anyone can publish (one it cannot read) or a replica that keeps
          // overflowing does not make every process of the fleet read every key back to back.
          auto const due = self->last_read_ended + min_reread;
          if (steady_clock::now() < due) {
            wait_until = due;
          } else {
            self->known.begin(self->known.generation()); // everything held dropped: read from the first page
            resume_of.reset();
          }
        }
        resyncing = self->known.generation();
      }
      if (wait_until) {
        self->resync_timer.expires_at(*std::exchange(wait_until, std::nullopt));
        auto const [ec] = co_await self->resync_timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
        (void)ec; // expired or cancelled: the loop's first check decides
        continue;
      }
      if (resume_of != resyncing) {
        resume_at = "0";
      }
      auto pass = self->read_all_keys(resyncing, std::move(resume_at)); // named: GCC 12 and co_await temporaries
      auto const [read, stopped_at] = co_await std::move(pass);
      bool done = false;
      {
        std::lock_guard lock(self->local_mutex);
        // A pass that failed with the subscription it read for still live and syncing resumes where it stopped.
        bool const resumable = !read && self->known.generation() == resyncing && self->known.syncing();
        resume_of = resumable ? std::optional(resyncing) : std::nullopt;
        resume_at = resumable ? stopped_at : "0";
        done = read && self->known.resynced(resyncing);
        ++(done ? self->resyncs : self->resync_failures);
        self->last_read_ended = steady_clock::now();
        if (!done && self->known.generation() != resyncing) {
          continue; // a new subscription: read at once
        }
      }
      if (done) {
        // Every page was read: Redis answers reads (an outage a failed lookup opened is over, though every lookup
        // may now be answered from the replica without asking).
        self->guard.answered_without_turn(detail::redis_access::read);
        backoff = std::chrono::milliseconds(0);
        continue; // complete unless it lost track meanwhile
      }
      if (self->stopped()) { // checked on the executor, where the cache's end and `shut_down` cancel the timer
        continue;            // (the loop's first check ends it)
      }
      backoff = std::clamp(backoff * 2, std::chrono::milliseconds(1000), std::chrono::milliseconds(300'000));
      self->resync_timer.expires_after(backoff);
      auto const [ec] =
          co_await self->resync_timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable)); // ended: cancelled
      (void)ec; // whether it expired or was cancelled, the loop's first check decides
    }
  }

  /// How a pass of the resync ended: every page read, or not, and then the cursor of the first page not read.
  struct resync_pass {
    bool read = false;
    std::string stopped_at;
  };

  /// One pass of the resync of subscription `resyncing`: every page from `cursor` (`"0"`: the first) until `SCAN`'s
  /// cursor comes back to 0. Not read when a command failed (stopped at its page) or answered something else, or
  /// the subscription changed (stopped at the first page; the caller reads again).
  asio::awaitable<resync_pass> read_all_keys(std::uint64_t resyncing, std::string cursor) {
    do {
      std::array<std::string_view, 3> const args{cursor, scan_pattern, resync_page};
      auto page = scan_script.run(redis, {}, args); // named: GCC 12 and co_await temporaries
      auto [ec, reply] = co_await std::move(page);
      if (own_commands_done) {
        own_commands_done();
      }
      if (stopped() || ec) {
        co_return resync_pass{false, std::move(cursor)}; // late, or the connection lost: that page again
      }
      if (reply.type != redis_reply::kind::array || reply.elements.empty() || reply.elements.size() % 2 != 1 ||
          reply.elements[0].type != redis_reply::kind::string) {
        co_return resync_pass{false, "0"}; // an answer of another shape (an error): no cursor trusted
      }
      auto const now = steady_clock::now();
      std::lock_guard lock(local_mutex);
      if (known.generation() != resyncing || !known.syncing()) {
        co_return resync_pass{false, "0"};
      }
      for (std::size_t i = 1; i + 1 < reply.elements.size(); i += 2) {
        auto const& key = reply.elements[i];
        auto const& ttl = reply.elements[i + 1];
        auto const id = key.type == redis_reply::kind::string ? id_of(key.text) : std::nullopt;
        if (id && ttl.type == redis_reply::kind::integer && ttl.integer > 0) {
          known.add(*id, detail::saturating_add(now, std::chrono::milliseconds(ttl.integer)));
        } // anything else under the pattern is no ticket of the store's: never looked up by its key
      }
      cursor = std::move(reply.elements[0].text);
    } while (cursor != "0");
    co_return resync_pass{true, "0"};
  }

  /// The cache's end, or the fleet's shutdown: no resync goes on.
  [[nodiscard]] bool stopped() const noexcept {
    return cache_gone.load(std::memory_order_acquire) || writes_stopped.load(std::memory_order_acquire);
  }

  /// The tickets of `who` at `now` from Redis (one `MGET`), or from the local copy when Redis is not asked or
  /// fails; what Redis answered is kept locally. Only `wanted` payloads are answered (others are misses, refused
  /// and not kept when read from Redis). Counts hits and misses. The near cache is not asked.
  asio::awaitable<std::vector<std::optional<detail::local_ticket>>>
  look_up(std::vector<ticket_identity> const& who, system_clock::time_point now, payloads wanted) {
    std::vector<std::optional<detail::local_ticket>> found(who.size());
    std::vector<std::string> keys;
    keys.reserve(who.size());
    std::vector<std::optional<detail::ticket_key_id>> ids;
    ids.reserve(who.size());
    // The keys the replica knows are absent are answered so at once; the rest (`asked`, by position) are read.
    std::vector<std::size_t> asked;
    asked.reserve(who.size());
    {
      std::lock_guard lock(local_mutex);
      for (std::size_t i = 0; i < who.size(); ++i) {
        auto [key, id] = detail::ticket_key_with_id(org, who[i]);
        keys.push_back(std::move(key));
        ids.emplace_back(id);
        if (!known_absent_locked(id)) {
          asked.push_back(i);
        }
      }
    }
    // Counted as the lookup ends, with the rest: a lookup cancelled while it waits for Redis counts nothing.
    auto const absent = who.size() - asked.size();
    if (asked.empty()) {
      known_absent.fetch_add(absent, std::memory_order_relaxed);
      co_return found;
    }
    std::vector<std::string_view> command;
    command.reserve(asked.size() + 1);
    command.emplace_back("MGET");
    for (auto const i : asked) {
      command.emplace_back(keys[i]);
    }
    bool answered = false;
    // Cancelled (with the reply, or by Asio at the co_await when already cancelled) or out of memory, the lookup
    // ends without an outcome, and `turn` releases its probe as it goes.
    if (auto turn = guard.ask_redis(steady_clock::now(), detail::redis_access::read)) {
      auto const generation_asked = near_generation();
      auto const erasures = erasures_heard.load(std::memory_order_relaxed);
      auto const stores = stores_heard.load(std::memory_order_relaxed);
      auto [ec, reply] = co_await redis.async_command(command, asio::experimental::as_tuple(asio::use_awaitable));
      throw_if_cancelled(ec, "lookup");
      if (!ec && (reply.type != redis_reply::kind::array || reply.elements.size() != asked.size())) {
        ec = fleet_errc::unexpected_reply; // not one value per key
      }
      if (!ec) {
        turn.answered();
        answered = true;
        // An erase heard meanwhile may have overtaken this reply (its notice comes on the other connection): what
        // was read is answered but not kept, not even for the fallback, which would serve it with Redis away. A
        // subscription that changed meanwhile may have missed one: kept for the fallback only.
        bool const keep_read = erasures == erasures_heard.load(std::memory_order_relaxed);
        auto const keep_as = generation_asked == near_generation() ? generation_asked : 0;
        // A key read as nil is no longer known (it expired, or something else deleted it), unless a store was heard
        // meanwhile: it may have stored the key after the read.
        if (stores == stores_heard.load(std::memory_order_relaxed)) {
          std::lock_guard lock(local_mutex);
          for (std::size_t j = 0; j < asked.size(); ++j) {
            if (reply.elements[j].is_nil() && ids[asked[j]]) {
              known.remove(*ids[asked[j]]);
            }
          }
        }
        for (std::size_t j = 0; j < asked.size(); ++j) {
          auto const i = asked[j];
          if (auto ticket = accept(reply.elements[j], who[i], now)) {
            found[i] = detail::with_decoded(std::move(*ticket));
            if (wanted == payloads::ticket_store && !found[i]->decoded) {
              ++stats.rejected; // another format under the store's key: never served to it, so not kept either
              found[i].reset();
              continue;
            }
            if (keep_read) {
              keep(keys[i], who[i], *found[i], now, keep_as);
            }
          }
        }
      } else {
        turn.failed(ec, steady_clock::now(), reply.is_error() ? std::string_view(reply.text) : std::string_view());
      }
    }
    if (!answered) {
      for (auto const i : asked) {
        found[i] = fallback_copy(who[i], now);
        if (wanted == payloads::ticket_store && found[i] && !found[i]->decoded) {
          found[i].reset();
        }
      }
    }
    for (auto const i : asked) { // near hits are counted apart
      ++(found[i] ? stats.hits : stats.misses);
    }
    known_absent.fetch_add(absent, std::memory_order_relaxed);
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
      auto [key, id] = detail::ticket_key_with_id(org, who);
      into.keys.push_back(std::move(key));
      into.ids.push_back(id);
      into.args.push_back(detail::encode_envelope(who, ticket.cached));
      into.args.push_back(std::to_string(px));
      into.tokens.push_back(token);
      keep_local(id, who, std::move(ticket), now, kept_as, token);
    }
  }

  /// The copies `stores` kept are no longer waiting for a write (it ended, or will never happen): from now on they
  /// are served near only under their generation. Copies of later stores of the same keys keep their marks.
  void end_unwritten(detail::prepared_stores const& stores) {
    std::lock_guard lock(local_mutex);
    for (std::size_t i = 0; i < stores.keys.size(); ++i) {
      if (stores.tokens[i] != 0) {
        local.written(stores.ids[i], stores.tokens[i]);
      }
    }
  }

  /// The second half: the prepared stores written in one script (or fallen back). On the executor.
  asio::awaitable<void> write(detail::prepared_stores const& stores) {
    if (stores.keys.empty()) {
      co_return;
    }
    subscribe(); // the local copies just kept are served near once it is live
    // Written or not (fallen back, cancelled), the copies are served near only under their generation from now on;
    // except when the script surely did not store them (not sent, or refused: an error reply such as maxmemory
    // reached, a read-only replica, an ACL). Redis then lacks them, and the reads it still answers would find
    // nothing: a copy kept before the subscription was live (generation 0) was never reused again, not even by this
    // process. Those copies stay served near, as while their write was pending, until replaced, erased or past
    // their reuse limit. A timeout or a lost connection leaves it unknown: the script may have run.
    struct ends_unwritten {
      impl& self;
      detail::prepared_stores const& stores;
      bool refused = false;
      ends_unwritten(impl& s, detail::prepared_stores const& p) : self(s), stores(p) {}
      ends_unwritten(ends_unwritten const&) = delete;
      ends_unwritten& operator=(ends_unwritten const&) = delete;
      ~ends_unwritten() {
        if (!refused) {
          self.end_unwritten(stores);
        }
      }
    } ended{*this, stores};
    std::vector<std::string_view> const key_views(stores.keys.begin(), stores.keys.end());
    std::vector<std::string_view> arg_views(stores.args.begin(), stores.args.end());
    arg_views.emplace_back(erase_channel); // where the script announces what it stored
    auto const failures = guard.failures();
    auto const written = co_await detail::run_or_fall_back(put_script, redis, guard, key_views, arg_views, &is_integer,
                                                           "ticket cache: store");
    if (!written) {
      auto const why = guard.last_failure(); // this store's, if it was sent: no suspension since
      ended.refused = guard.failures() == failures || why == fleet_errc::server_error ||
                      why == fleet_errc::auth_failed || why == fleet_errc::overloaded;
      co_return;
    }
    // Every key is in Redis now, stored by this script or by a longer-lived store: known at once, before the
    // script's own message comes back on the other connection.
    auto const now = steady_clock::now();
    {
      std::lock_guard lock(local_mutex);
      for (std::size_t i = 0; i < stores.keys.size(); ++i) {
        if (auto const px = positive_ms(stores.args[2 * i + 1])) {
          known.add(stores.ids[i], detail::saturating_add(now, std::chrono::milliseconds(*px)));
        }
      }
    }
    resync_if_wanted(); // after an overflow
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
  /// Which ticket keys exist in Redis (known_keys.hpp); under `local_mutex`, changed on the executor only.
  detail::known_keys known;
  std::string ticket_prefix; ///< `wandura:{org}:ticket:`
  std::string scan_pattern;  ///< `wandura:{org}:ticket:*`
  detail::fallback_guard guard;
  detail::redis_script put_script;
  detail::redis_script erase_script;
  detail::redis_script scan_script;
  ticket_cache_stats stats; ///< on the executor; `hits` and `misses` there exclude near hits and known absent
  std::atomic<std::uint64_t> near_hits{0};      ///< counted on any thread
  std::atomic<std::uint64_t> erasures_heard{0}; ///< counted on the executor, read from any thread
  bool subscribed = false;                      ///< the erase channel's subscription is confirmed and its connection up
  std::uint64_t generation = 0;                 ///< bumped whenever the subscription begins or ends
  std::atomic<std::uint64_t> next_token{1};     ///< the next store's token (`prepare`)
  std::atomic<bool> writes_stopped{false};      ///< the cache was shut down: no store is written any more
  std::atomic<bool> cache_gone{false};          ///< the public object was destroyed: no resync goes on
  std::atomic<std::uint64_t> known_absent{0};   ///< lookups answered absent by the replica, counted on any thread
  std::atomic<std::uint64_t> stores_heard{0};   ///< store messages heard (a nil read may race one)
  std::function<void()> own_commands_done;      ///< `ticket_cache_access::after_own_commands`
  bool resync_running = false;                  ///< under `local_mutex`
  steady_clock::time_point last_read_ended{};   ///< under `local_mutex`: when the latest read whole ended
  std::uint64_t resyncs = 0;                    ///< under `local_mutex`: resyncs that made the replica complete
  std::uint64_t resync_failures = 0;            ///< under `local_mutex`: passes that failed or were overtaken
  asio::steady_timer resync_timer{redis.get_executor()}; ///< the backoff between failed resyncs
  /// Stopped first when the cache goes: its handlers never run after that.
  std::shared_ptr<detail::redis_subscriber> subscriber;
};

shared_ticket_cache::shared_ticket_cache(redis_client& redis, std::string_view org, ticket_cache_options options) {
  fleet_keys::check_org(org);
  impl_ = std::make_shared<impl>(redis, std::string(org), std::move(options));
}

shared_ticket_cache::~shared_ticket_cache() {
  // Operations in flight keep the state; the replica's resync, which nobody awaits, ends at its next step: at once
  // if it waits out a backoff (the timer is cancelled on the executor, where the resync uses it).
  impl_->cache_gone.store(true, std::memory_order_release);
  asio::post(impl_->redis.get_executor(), [weak = std::weak_ptr<impl>(impl_)] {
    if (auto const self = weak.lock()) {
      self->resync_timer.cancel();
    }
  });
}

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
  {
    std::lock_guard lock(impl_->local_mutex);
    for (std::size_t i = 0; i < who.size(); ++i) {
      if (auto const* near = impl_->near_copy(who[i], now)) {
        found[i] = near->cached;
      } else {
        rest.push_back(std::move(who[i]));
        rest_at.push_back(i);
      }
    }
  }
  auto const self = impl_;                               // the lookup may outlive this cache
  auto lookup = self->look_up(rest, now, payloads::any); // named: GCC 12 and co_await temporaries
  auto remote = co_await std::move(lookup);
  // Counted once the lookup ended, as look_up counts the rest: a cancelled lookup counts nothing.
  self->near_hits.fetch_add(who.size() - rest.size(), std::memory_order_relaxed);
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

std::uint64_t shared_ticket_cache::known_absent() const noexcept {
  return impl_->known_absent.load(std::memory_order_relaxed);
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
  out.known_absent = known_absent();
  out.misses += out.known_absent;
  detail::ticket_cache_access::known_keys_now(*this, out);
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
  return near_ticket{found->ticket(), found->process_id() != process_id};
}

bool ticket_cache_access::find_near_all(shared_ticket_cache& cache, std::span<ticket_identity_view const> who,
                                        system_clock::time_point now, std::string_view process_id,
                                        std::span<std::optional<wandura::ticket>> out,
                                        std::size_t& from_other_processes) {
  auto& self = *cache.impl_;
  std::lock_guard lock(self.local_mutex);
  // All or nothing: a key that needs Redis sends the whole lookup the long way, uncounted here. The copies found
  // are held as pointers until every key is answered (a batch is at most `ticket_batch::max_episodes`; more look
  // up twice).
  constexpr std::size_t held = ticket_batch::max_episodes;
  std::array<local_ticket const*, held> found{};
  std::size_t hits = 0;
  std::size_t absent = 0;
  for (std::size_t i = 0; i < who.size(); ++i) {
    if (who[i].viewer_ref.empty() || who[i].union_info.empty()) {
      continue; // never stored: nothing, and not a lookup
    }
    auto const* copy = self.near_copy(who[i], now);
    if (copy != nullptr && !copy->decoded) {
      self.local.erase(who[i]); // another format under a key of ours: the ticket store never serves it
      return false;
    }
    if (copy == nullptr) {
      // Absent from Redis, if the replica is complete and lacks the key (hashed only then).
      bool const known_absent =
          self.known.complete() &&
          self.known_absent_locked(ticket_key_id_for(who[i].viewer_ref, who[i].union_info, who[i].film_ref,
                                                     who[i].episode_no, who[i].intent));
      if (!known_absent) {
        return false;
      }
      ++absent;
    } else {
      ++hits;
    }
    if (i < held) {
      found[i] = copy;
    }
  }
  from_other_processes = 0;
  for (std::size_t i = 0; i < who.size(); ++i) {
    if (who[i].viewer_ref.empty() || who[i].union_info.empty()) {
      continue;
    }
    auto const* copy = i < held ? found[i] : self.near_copy(who[i], now);
    if (copy != nullptr) {
      out[i] = copy->ticket();
      from_other_processes += copy->process_id() != process_id ? 1U : 0U;
    }
  }
  self.near_hits.fetch_add(hits, std::memory_order_relaxed);
  self.known_absent.fetch_add(absent, std::memory_order_relaxed);
  return true;
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
    if (remote[i]) { // decoded: a value of another format is not kept by a lookup of the ticket store's
      found[i] = remote[i]->decoded->stored(remote[i]->cached.payload);
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
    entries.emplace_back(std::move(who), with_decoded({encode_ticket_payload(ticket.process_id, ticket.value),
                                                       ticket.value.expires_at}));
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

void ticket_cache_access::after_own_commands(shared_ticket_cache& cache, std::function<void()> done) {
  cache.impl_->own_commands_done = std::move(done);
}

void ticket_cache_access::known_keys_now(shared_ticket_cache const& cache, ticket_cache_stats& into) {
  auto const& self = *cache.impl_;
  std::lock_guard lock(self.local_mutex);
  into.known_keys = self.known.size();
  into.known_keys_complete = self.known.complete();
  into.known_keys_resyncs = self.resyncs;
  into.known_keys_overflows = self.known.overflows();
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
  self.resync_timer.cancel();
  std::lock_guard lock(self.local_mutex);
  self.subscribed = false; // no erase is heard any more: the copies kept are the fallback's only
  ++self.generation;
  self.known.lose();
}

} // namespace detail

} // namespace wandura
