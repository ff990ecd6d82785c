// wandura::fleet: one object that makes the clients of many processes act as one through Redis (docs/adr/0008).
//
//     wandura::fleet shared(io.get_executor(), {.redis = wandura::redis_options{.url = "redis://10.0.0.5:6379"},
//                                              .org = "acme"});
//     wandura::client_options options{.base_url = url, .api_key = key, .viewer_tickets_per_minute = 30};
//     shared.configure(options); // ticket reuse, per-viewer limit and the playback counter's pace, fleet-wide
//     wandura::client api(io.get_executor(), std::move(options));
//
// What is shared: reusable tickets (the same reuse rule as in one process, never across devices or viewers), the
// per-viewer ticket limit, and each rate-limit counter's hold-off and pace, so that N processes release requests at
// the counter's refill together, not N times it. When Redis is slow, down or failing, each of them answers from
// this process's local state within `redis.command_timeout` (degrade, never block) and goes back to Redis by itself.
// A reconnect is within that bound too (a Redis host that stops answering the connect, or answers it and never
// the URL's `AUTH`, costs a call `command_timeout`). One wait is longer, once per process: the calls that come
// while the fleet's first connection is being made wait for it, up to `redis.connect_timeout` (200 ms by default),
// before their command's timeout starts (redis_client.hpp).
//
// A fleet keeps Redis connections open (the commands' and, once a ticket is kept locally, the erase subscription's,
// reconnected for as long as the fleet lives), so `io_context::run()` does not return by itself: call
// `shutdown()` when the program is done, as one closes a socket.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>

#include "wandura/fleet/fallback.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/fleet/redis_counter_pace.hpp"
#include "wandura/fleet/shared_counter_pace.hpp"
#include "wandura/fleet/shared_ticket_cache.hpp"
#include "wandura/fleet/shared_viewer_limit.hpp"
#include "wandura/playback/client.hpp"

namespace wandura {

/// Options of a `fleet`.
struct fleet_options {
  /// Where the shared state lives, and how long each Redis command may take (a few ms: then local state answers).
  // `= redis_options()`, not `{}`: with `{}`, GCC 12 at -O3 warns -Wmaybe-uninitialized (a false positive) on
  // every designated initializer of fleet_options, and a user's -Werror build fails.
  redis_options redis = redis_options();
  /// The organisation: the hash tag of every key (`wandura:{org}:...`), 1-64 of [A-Za-z0-9._-].
  std::string org = "default";
  /// This process's name in the tickets it stores, to count `fleet_stats::cross_process_reuse`. Empty: the host
  /// name and process id ("host:1234").
  std::string process_id{};
  /// How each shared part logs and probes while it answers locally.
  fallback_options fallback{};
  /// This process's share of each viewer's limit while it answers locally (Redis away, and until the next probe
  /// `fallback.probe_interval` after a failure, however short the stall): `viewer_limit_options::local_share`. 1
  /// (the default) lets each process spend the rest of a viewer's limit it last saw, so N processes may together
  /// grant up to N times that rest during an outage; 1/N keeps what they grant during it within that rest and the
  /// refill (for requests of at most 1/N of the burst; a larger one goes from a full local bucket, so up to one
  /// burst per process at an outage's start), and a process then grants a viewer 1/N even where it serves that
  /// viewer alone. Either way, tickets granted locally are charged to the viewer's bucket in Redis at its next
  /// take Redis answers, less what the refill to the burst absorbed meanwhile (`shared_viewer_limit`, "Owed
  /// tickets"), so a window that spans an outage does not give a viewer the rest twice. In (0, 1]. (Counters are
  /// paced by each process's
  /// admission gate alone while Redis is away, at the rate it learnt: the API's own 429s and `Retry-After` then
  /// hold it back.)
  double viewer_local_share = 1.0;
  /// The most ticket keys of the organisation this process keeps track of, to answer a lookup of a key no process
  /// stored without asking Redis: `ticket_cache_options::known_keys_capacity` (16-byte slots, at most three quarters
  /// full: 8 MiB at most at the default; 0: every lookup the near cache cannot answer asks Redis).
  std::size_t known_keys_capacity = ticket_cache_options{}.known_keys_capacity;
};

/// Counters of one fleet object, summed over its shared parts. A snapshot.
struct fleet_stats {
  /// Tickets this process reused that another process of the fleet had issued and stored.
  std::uint64_t cross_process_reuse = 0;
  /// Operations answered from local state because Redis was slow, down or failing (all parts).
  std::uint64_t fallbacks = 0;
  /// Whether any part answers locally right now. A part stays so until one of its own operations next asks Redis
  /// (after `fallback_options::probe_interval`) and gets an answer: a part nobody used since its failure (the
  /// counter pace between requests) reads degraded while Redis is healthy again.
  bool degraded = false;
  ticket_cache_stats tickets{};
  viewer_limit_stats viewers{};
  counter_pace_stats pace{};
  redis_client_stats redis{};
};

/// The shared state of a fleet of clients, over one Redis connection.
///
/// @par Thread safety
/// `configure` and `stats` may be called from any thread. The clients it configures may be called from any thread;
/// Redis commands are run on a strand of `executor`.
/// @par Lifetime
/// Clients configured by a fleet share its state: the fleet may be destroyed before them (its parts live as long
/// as any client uses them). Destroy it, and its clients, before the io_context.
///
/// What keeps `io_context::run()` busy: once a call went through a configured client, the Redis connection's read
/// wait (see `redis_client`) and, from the first ticket kept locally, the erase subscription and its reconnects.
/// Destroying the fleet does not end them while a configured client lives. `shutdown()` does: after it, `run()`
/// returns once nothing else is pending, and the clients keep working from this process's local state.
class fleet {
public:
  /// Makes the shared parts; connects to Redis at the first command, not here.
  /// @param executor where Redis commands run: the fleet uses a strand of it, so a multi-threaded io_context is
  ///        fine. It must outlive the fleet and every client it configured.
  /// @param options the Redis server and timeouts, the organisation, this process's id and the fallback; copied.
  /// @throws wandura::error `errc::invalid_argument` for a bad `org`, Redis URL or `viewer_local_share` (outside
  ///         (0, 1], or too small a share of 1 ticket a minute to count: under about 1.3e-303), or Redis
  ///         options `redis_client` refuses (a timeout of 0 or less, a bound of 0). Never for
  ///         Redis being down: the first commands then fall back to local state.
  fleet(asio::any_io_executor executor, fleet_options options);
  fleet(fleet const&) = delete;
  fleet& operator=(fleet const&) = delete;
  ~fleet();

  /// Points `options` at the shared state: `options.tickets` (ticket reuse, replaced), `options.viewer_limit` at
  /// `options.viewer_tickets_per_minute` (set only when that is; one shared limit per rate) and
  /// `options.retry.admission`'s shared pace. Every client configured by one fleet shares its Redis connection.
  /// @param options the client's options, changed in place; give them to the client's constructor afterwards.
  /// @throws wandura::error `errc::invalid_argument` when `viewer_tickets_per_minute` is 0; `options` is then
  ///         unchanged.
  void configure(client_options& options) const;

  /// The counters of every shared part, as of each part's latest completed operation, and as of now
  /// `cross_process_reuse` and the ticket cache's `near_hits`, `known_absent`, `erasures_heard`,
  /// `near_cache_live` and `known_keys*` (they change between operations).
  [[nodiscard]] fleet_stats stats() const;

  /// Completes once every ticket that a client configured by this fleet stored before the call has been written to
  /// Redis, or has fallen back (Redis slow, down or failing: the ticket stays in this process's local copy only),
  /// or was dropped after `shutdown`.
  ///
  /// A client's call does not wait for its tickets to reach Redis: they are kept in this process's local copy
  /// at once (its next calls reuse them) and written behind the call, with those of other calls of the moment in
  /// one script (at most 128 tickets a script, one script at a time), usually within a round trip. Until then
  /// another process does not find them, and after it once that process has heard of the store (one network
  /// delay: its replica of which keys exist answers a key it has not heard of absent; see `shared_ticket_cache`,
  /// Keys known absent). Await this where that matters: before a process leaves the fleet (so that the others
  /// reuse what it issued), or in a test about to look from another process (and wait there until it heard).
  ///
  /// Takes at most about one `redis.command_timeout` per 128 tickets waiting, plus the one in flight.
  /// @par Thread safety
  /// Any thread, any executor; completes on the awaiting coroutine's executor.
  /// @throws wandura::error with `operation_aborted` when cancelled, or when this fleet object is destroyed first
  ///         (a flush does not keep the fleet's state alive: one awaited on another io_context ends there).
  /// @par Cancellation
  /// Through the awaiting coroutine's cancellation slot: throws `operation_aborted` at once; the writes go on.
  [[nodiscard]] asio::awaitable<void> flush();

  /// Ends the fleet's use of Redis for good, so that `io_context::run()` can return: stops the erase subscription
  /// and its reconnects and closes the Redis connection, which is not opened again (`redis_client::close`).
  ///
  /// From then on every shared part answers from this process's local state at once, with no Redis command: the
  /// clients configured by this fleet keep working as one process would, and each of their operations counts in
  /// `fleet_stats::fallbacks` with `degraded` true (commands are no longer counted in `redis.commands`). A
  /// command waiting for its reply at that moment completes with `asio::error::shut_down` and its operation
  /// answers locally too. One line is logged through `fallback_options::log`, `INFO fleet: shut down; the shared
  /// parts answer from local state` (not one WARN line per part).
  ///
  /// The connection is closed on the fleet's strand: before `shutdown` returns when called there, else as soon
  /// as the executor runs the posted step (so call it while, or before, the io_context runs). `run()` then returns
  /// once the clients' own work is done: after a client's last call, its admission gate may still sleep up to
  /// `admission_gate_options::shared_pace_refresh` (100 ms) before its shared-pace read ends (measured: about
  /// 100 ms from the last call to the return of `run()`).
  ///
  /// @par Thread safety
  /// Any thread, concurrently with the clients' calls and with `stats`. Idempotent: later calls do nothing.
  void shutdown() noexcept;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
  /// The pace of every rate-limit counter, one for all the clients this fleet configures. Held here, not in
  /// `impl_`: it owns the Redis client through `impl_`, and would otherwise keep it alive forever.
  std::shared_ptr<redis_counter_pace> pace_;
};

} // namespace wandura
