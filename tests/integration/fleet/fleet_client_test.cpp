// Clients configured by `wandura::fleet`, as processes of one fleet: each on its own io_context and thread with
// its own connection to the in-process emulator, sharing one real redis-server (started, paused and killed here)
// or a fake one that misbehaves.
#include "wandura/fleet/fleet.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>

#include "fleet_test_support.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"
#include "wandura/fleet/key_layout.hpp"
#include "wandura/fleet/redis_client.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/ticket_store.hpp"

using namespace std::chrono_literals;
using wandura::item_outcome;

namespace {

constexpr char const* viewer_a = "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a";
constexpr char const* viewer_b = "Qw7Ls0pXc3Vb8Nm1Tz6Ry4:Hk2Jd5Fa9Ge";

/// One process of a fleet: an io_context on its own thread, a fleet object on it, and a client configured by it.
struct process {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::mutex lines_mutex;
  std::vector<std::string> lines; // the fleet's WARN and INFO lines
  std::unique_ptr<wandura::fleet> shared;
  std::unique_ptr<wandura::client> api;
  std::shared_ptr<wandura::ticket_store> tickets; ///< the store `configure` gave the client
  std::shared_ptr<wandura::viewer_limit> limit;   ///< the viewer limit `configure` gave it (none without a rate)
  bool keys_known_on = true;                      ///< the replica of keys is kept (a capacity other than 0)
  std::thread thread;

  process(std::string const& redis_url, std::string const& base_url, std::string name,
          wandura::client_options options = {}, std::chrono::milliseconds command_timeout = 500ms,
          std::chrono::milliseconds probe_interval = 200ms,
          std::optional<std::size_t> known_keys_capacity = std::nullopt) {
    wandura::fleet_options fo;
    if (known_keys_capacity) {
      fo.known_keys_capacity = *known_keys_capacity;
    }
    keys_known_on = fo.known_keys_capacity != 0;
    fo.redis.url = redis_url;
    fo.redis.command_timeout = command_timeout;
    fo.org = "acme";
    fo.process_id = std::move(name);
    fo.fallback.probe_interval = probe_interval;
    fo.fallback.log = [this](std::string_view line) {
      std::lock_guard lock(lines_mutex);
      lines.emplace_back(line);
    };
    shared = std::make_unique<wandura::fleet>(io.get_executor(), std::move(fo));
    options.base_url = base_url;
    options.api_key = "test-key";
    shared->configure(options);
    tickets = options.tickets;
    limit = options.viewer_limit;
    api = std::make_unique<wandura::client>(io.get_executor(), std::move(options));
    thread = std::thread([this] { io.run(); });
  }
  ~process() {
    work.reset();
    io.stop();
    thread.join();
    api.reset(); // the io_context is stopped: nothing runs concurrently with the destruction
    shared.reset();
  }

  /// One play of `episode` for `viewer` on `device`, waited for from the test's thread.
  wandura::ticket_item_result play(std::string viewer, std::string device, int episode) {
    wandura::ticket_batch batch;
    batch.union_info = std::move(device);
    batch.drm_kek = "kek";
    batch.viewer_ref = std::move(viewer);
    batch.episodes.push_back({"the-heiress-returns", episode, wandura::intent::play});
    auto result = wait_for(api->issue_tickets(std::move(batch)));
    REQUIRE(result.items.size() == 1);
    return std::move(result.items.front());
  }

  /// Runs `op` on the process's thread and waits for it from the test's thread. The result is handed over under a
  /// mutex, not through a std::future, whose shared state TSan reports when it is released on another thread.
  /// @param slot where the call's cancellation comes from (none by default).
  template <class T> T wait_for(asio::awaitable<T> op, asio::cancellation_slot slot = {}) {
    std::mutex m;
    std::condition_variable done;
    std::optional<T> out;
    std::exception_ptr failure;
    bool finished = false;
    asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(slot, [&](std::exception_ptr e, T value) {
                     std::lock_guard lock(m);
                     failure = e;
                     if (!e) {
                       out.emplace(std::move(value));
                     }
                     finished = true;
                     done.notify_one();
                   }));
    std::unique_lock lock(m);
    REQUIRE(done.wait_for(lock, 30s, [&] { return finished; }));
    if (failure) {
      std::rethrow_exception(failure);
    }
    return std::move(*out);
  }

  /// The ticket keys this process's replica holds now: before another process stores, for `heard`.
  std::size_t known_keys() const { return shared->stats().tickets.known_keys; }

  /// Waits until this process has heard of `added` more ticket keys than the `known_before` it held before another
  /// process stored them (or its replica is not complete, and its lookups ask Redis): a store is announced to the
  /// fleet one network delay after it was written, and until then a complete replica answers the key absent.
  void heard(std::size_t known_before, std::size_t added) {
    REQUIRE(test_support::wait_until([&] {
      auto const t = shared->stats().tickets;
      return !t.known_keys_complete || t.known_keys >= known_before + added;
    }));
  }

  /// Waits until the tickets this process's calls stored so far are written to Redis (they are written behind the
  /// calls: until then another process may not find them).
  void flush() {
    REQUIRE(wait_for([](wandura::fleet& f) -> asio::awaitable<bool> {
      co_await f.flush();
      co_return true;
    }(*shared)));
  }

  /// One play through the client, its ticket written: the store script is cached in Redis from then on (a write
  /// is one EVALSHA, no NOSCRIPT and EVAL to reorder what a test counts or pauses).
  /// One play, its ticket written, and (with the keys known on) the replica read whole: from then on the process
  /// sends Redis only what its calls need, which tests count.
  void warm() {
    REQUIRE(play(viewer_b, "warm-up-device", 1).outcome == item_outcome::granted);
    flush();
    keys_read();
  }

  /// Waits until the replica of keys is read whole (at once with it off): its read's scripts are done.
  void keys_read() {
    if (keys_known_on) {
      REQUIRE(test_support::wait_until([&] { return shared->stats().tickets.known_keys_complete; }));
    }
  }

  std::size_t lines_starting(std::string_view prefix) {
    std::lock_guard lock(lines_mutex);
    return test_support::count_starting(lines, prefix);
  }
};

std::unique_ptr<wandura::emulator::server> start_emulator() {
  wandura::emulator::config cfg;
  cfg.seed = 7;
  return wandura::emulator::server::start(std::move(cfg));
}

std::uint64_t playback_requests(wandura::emulator::server const& emu) {
  auto const s = emu.stats();
  auto const it = s.requests.find("playback");
  return it == s.requests.end() ? 0 : it->second;
}

/// Accepts every connection and answers each one's first bytes with `answer`, then closes it: a "Redis" that
/// answers garbage, or closes mid-reply.
asio::awaitable<void> misbehave(asio::ip::tcp::acceptor& acceptor, std::string answer) {
  for (;;) {
    auto socket = co_await acceptor.async_accept(asio::use_awaitable);
    std::array<char, 4096> buf{};
    co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
    co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
    socket.close();
  }
}

/// A fake Redis on its own thread.
struct hostile_redis {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  std::thread thread;
  explicit hostile_redis(std::string answer) {
    asio::co_spawn(io, misbehave(acceptor, std::move(answer)), asio::detached);
    thread = std::thread([this] { io.run(); });
  }
  ~hostile_redis() {
    io.stop();
    thread.join();
  }
  [[nodiscard]] std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  }
};

/// The number of times `what` occurs in `bytes`.
std::size_t count_of(std::string const& bytes, std::string_view what) {
  std::size_t n = 0;
  for (auto at = bytes.find(what); at != std::string::npos; at = bytes.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

/// Accepts one connection and answers its first read, whatever it holds, as one `MGET` of every ticket key in it:
/// an array of that many nils. Records that read, then closes the connection.
asio::awaitable<void> answer_first_read(asio::ip::tcp::acceptor& acceptor, std::promise<std::string>& first_read) {
  auto socket = co_await acceptor.async_accept(asio::use_awaitable);
  std::array<char, 4096> buf{};
  auto const n = co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
  std::string const bytes(buf.data(), n);
  auto const keys = count_of(bytes, ":ticket:");
  std::string answer = "*" + std::to_string(keys) + "\r\n";
  for (std::size_t i = 0; i < keys; ++i) {
    answer += "$-1\r\n";
  }
  first_read.set_value(bytes);
  co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
  socket.close();
}

/// How many times the Redis at `url` has run `command` (lower case, `INFO commandstats`), asked on a connection of
/// its own: unlike a process's command count, not moved by its counter pace's background reads.
std::uint64_t command_calls(std::string const& url, std::string const& command) {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = url, .command_timeout = 2s});
  auto const info = test_support::raw(io, client, {"INFO", "commandstats"});
  std::string const field = "cmdstat_" + command + ":calls=";
  auto const at = info.text.find(field);
  return at == std::string::npos ? 0 : std::stoull(info.text.substr(at + field.size()));
}

std::uint64_t mget_calls(std::string const& url) {
  return command_calls(url, "mget");
}

/// `n` fresh tickets for `n` viewers of one device, as a call's store gets them.
std::vector<std::pair<wandura::ticket_key, wandura::ticket>> fresh_tickets(int first_viewer, int n) {
  std::vector<std::pair<wandura::ticket_key, wandura::ticket>> out;
  for (int i = first_viewer; i < first_viewer + n; ++i) {
    wandura::ticket t;
    t.ticket_id = "tkt_" + std::to_string(i);
    t.expires_at = std::chrono::system_clock::now() + 1h;
    out.emplace_back(
        wandura::ticket_key{"viewer-" + std::to_string(i), "phone-1", "the-heiress-returns", 1, wandura::intent::play},
        std::move(t));
  }
  return out;
}

/// The ticket id `p`'s store answers at once (`try_find`) for viewer `i` of `fresh_tickets`, or "(declined)".
std::string at_once(process& p, int i) {
  std::vector<wandura::ticket_key> const keys{fresh_tickets(i, 1).front().first};
  auto const got = p.tickets->try_find(keys);
  return got && got->at(0) ? got->at(0)->ticket_id : std::string("(declined)");
}

/// What Redis holds under viewer `i`'s ticket key (of `fresh_tickets`), or "" for nothing.
std::string redis_value(std::string const& url, int i) {
  asio::io_context io;
  wandura::redis_client client(io.get_executor(), {.url = url, .command_timeout = 2s});
  auto const k = fresh_tickets(i, 1).front().first;
  wandura::ticket_identity const who{k.viewer_ref, k.union_info, k.film_ref, k.episode_no, "play"};
  auto const reply = test_support::raw(io, client, {"GET", wandura::fleet_keys::ticket("acme", who)});
  return reply.is_nil() ? std::string() : reply.text;
}

/// Erases viewer `i`'s ticket (of `fresh_tickets`) through `p`'s store, from `p`'s thread, and waits for it.
void erase_on(process& p, int i) {
  REQUIRE(p.wait_for([](std::shared_ptr<wandura::ticket_store> store, int viewer) -> asio::awaitable<bool> {
    auto key = fresh_tickets(viewer, 1).front().first;
    auto erase = store->erase(std::move(key)); // named: GCC 12 and co_await temporaries
    co_await std::move(erase);
    co_return true;
  }(p.tickets, i)));
}

/// How many of the `n` viewers from `first_viewer` on `process` finds a ticket for, with the ticket id it was stored
/// with, in one lookup each.
int found_of(process& p, int first_viewer, int n) {
  return p.wait_for([](std::shared_ptr<wandura::ticket_store> store, int from, int count) -> asio::awaitable<int> {
    int found = 0;
    for (auto& [key, t] : fresh_tickets(from, count)) {
      auto lookup = store->find({key}); // named: GCC 12 and co_await temporaries
      auto const got = co_await std::move(lookup);
      found += got.at(0) && got.at(0)->ticket_id == t.ticket_id ? 1 : 0;
    }
    co_return found;
  }(p.tickets, first_viewer, n));
}

} // namespace

// Options written with designated initializers that name a few fields, as a user writes them: GCC before 14 warns
// (-Wextra) about every field left out that has no default member initializer.
TEST_CASE("fleet client: designated initializers naming a few fields keep every other default, warning-free") {
  wandura::fleet_options const fo{.org = "acme"};
  CHECK(fo.process_id.empty());
  CHECK(fo.redis.url == "redis://127.0.0.1:6379");
  CHECK(fo.redis.command_timeout == 5ms);
  CHECK(fo.known_keys_capacity == 250'000);
}

TEST_CASE("fleet client: the lookups of one batch reach Redis as one MGET") {
  auto emu = start_emulator();
  asio::io_context fake_io;
  asio::ip::tcp::acceptor acceptor(fake_io, {asio::ip::make_address("127.0.0.1"), 0});
  std::promise<std::string> first_read;
  asio::co_spawn(fake_io, answer_first_read(acceptor, first_read), asio::detached);
  std::thread fake_thread([&] { fake_io.run(); });
  {
    process a("redis://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), emu->base_url(), "process-a");
    wandura::viewer who{viewer_a, "phone-1", "kek"};
    auto const result = a.wait_for(a.api->start_episode(who, "the-heiress-returns", 4, 6));
    CHECK(result.play.outcome == item_outcome::granted);
    CHECK(result.prefetch.size() == 2);
  }
  auto const bytes = first_read.get_future().get();
  CHECK(count_of(bytes, "MGET") == 1);
  CHECK(count_of(bytes, "GET") == 1);
  CHECK(count_of(bytes, ":ticket:") == 3); // the play and both prefetches, in that one command
  fake_io.stop();
  fake_thread.join();
}

TEST_CASE("fleet client: a ticket this process holds answers its next calls from the near cache, no Redis command") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a");
  auto const first = a.play(viewer_a, "phone-1", 4);
  REQUIRE(first.outcome == item_outcome::granted);
  REQUIRE(first.ticket);
  a.flush(); // written: until then its copy is served near whatever the subscription's state
  REQUIRE(test_support::wait_until([&] { return a.shared->stats().tickets.near_cache_live; })); // a loaded machine
  CHECK(a.play(viewer_a, "phone-1", 4).reused); // stored before the subscription was confirmed: read from Redis
  REQUIRE(test_support::wait_until([&] { return a.shared->stats().tickets.known_keys_complete; })); // its read done
  auto const commands = a.shared->stats().redis.commands;
  auto const third = a.play(viewer_a, "phone-1", 4);
  CHECK(third.reused);
  REQUIRE(third.ticket);
  CHECK(third.ticket->ticket_id == first.ticket->ticket_id);
  CHECK(a.shared->stats().redis.commands == commands);
  CHECK(a.shared->stats().tickets.near_hits == 1);
  CHECK_FALSE(a.play(viewer_a, "phone-2", 4).reused); // never another device, near or not
  CHECK(a.shared->stats().tickets.near_hits == 1);
}

TEST_CASE("fleet client: a near hit of another process's ticket is the whole ticket, counted once, never for "
          "another device or viewer, and gone once an erase is heard") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a");
  process b(redis->url(), emu->base_url(), "process-b");
  auto const first = a.play(viewer_a, "phone-1", 4);
  REQUIRE(first.outcome == item_outcome::granted);
  REQUIRE(first.ticket);
  a.flush();                                      // written behind the call
  REQUIRE(b.play(viewer_a, "phone-1", 4).reused); // read from Redis: b keeps a copy and subscribes
  REQUIRE(test_support::wait_until([&] { return b.shared->stats().tickets.near_cache_live; })); // a loaded machine
  REQUIRE(b.play(viewer_a, "phone-1", 4).reused); // kept before the subscription was confirmed: read again
  CHECK(b.shared->stats().tickets.near_hits == 0);

  auto const mgets = mget_calls(redis->url());
  auto const near = b.play(viewer_a, "phone-1", 4);
  CHECK(near.reused);
  REQUIRE(near.ticket);
  CHECK(*near.ticket == *first.ticket); // every field, expires_at to the nanosecond
  CHECK(mget_calls(redis->url()) == mgets);
  CHECK(b.shared->stats().tickets.near_hits == 1);
  CHECK(b.shared->stats().cross_process_reuse == 3); // each served item once: two from Redis, one near
  CHECK(b.api->stats().metrics.cache_hits == 3);

  // A batch the near cache answers in part: the rest in one MGET, the near item not asked again nor counted twice.
  // Its prefetches were issued by a (b hears of their store, so it does not take them for absent).
  wandura::viewer who{viewer_a, "phone-1", "kek"};
  REQUIRE(a.wait_for(a.api->start_episode(who, "the-heiress-returns", 4, 6)).prefetch.size() == 2);
  a.flush();
  REQUIRE(test_support::wait_until([&] { return b.shared->stats().tickets.known_keys_complete; }));
  REQUIRE(test_support::wait_until([&] { return b.shared->stats().tickets.known_keys == 3; }));
  auto const mgets_before_batch = mget_calls(redis->url()); // a's lookup of its prefetches may have asked
  auto const batch = b.wait_for(b.api->start_episode(who, "the-heiress-returns", 4, 6));
  CHECK(batch.play.reused);
  REQUIRE(batch.prefetch.size() == 2);
  CHECK(batch.prefetch[0].reused);
  CHECK(batch.prefetch[1].reused);
  CHECK(mget_calls(redis->url()) == mgets_before_batch + 1); // the two prefetches in one MGET
  CHECK(b.shared->stats().tickets.near_hits == 2);
  CHECK(b.shared->stats().cross_process_reuse == 6);

  // Never another device or viewer: fresh tickets, no near hit, and no process stored them: known absent, asked
  // of no one but the server.
  auto const absent = b.shared->stats().tickets.known_absent;
  CHECK_FALSE(b.play(viewer_a, "tv-1", 4).reused);
  CHECK_FALSE(b.play(viewer_b, "phone-1", 4).reused);
  CHECK(b.shared->stats().tickets.near_hits == 2);
  CHECK(b.shared->stats().cross_process_reuse == 6);
  CHECK(b.shared->stats().tickets.known_absent == absent + 2);
  CHECK(mget_calls(redis->url()) == mgets_before_batch + 1);

  // Erased by the process that issued it: b drops its decoded copy when the notice arrives, and asks the server.
  auto const heard = b.shared->stats().tickets.erasures_heard;
  auto erase = [](std::shared_ptr<wandura::ticket_store> store, wandura::ticket_key key) -> asio::awaitable<bool> {
    co_await store->erase(std::move(key));
    co_return true;
  };
  REQUIRE(a.wait_for(erase(a.tickets, {viewer_a, "phone-1", "the-heiress-returns", 4, wandura::intent::play})));
  REQUIRE(test_support::wait_until([&] { return b.shared->stats().tickets.erasures_heard != heard; }));
  REQUIRE(b.shared->stats().tickets.erasures_heard == heard + 1);
  auto const requests = playback_requests(*emu);
  auto const after = b.play(viewer_a, "phone-1", 4);
  CHECK(after.outcome == item_outcome::granted);  // `reused` may be true: the server itself may return its ticket
  CHECK(playback_requests(*emu) == requests + 1); // asked of the server, not served from a copy
  CHECK(b.shared->stats().tickets.near_hits == 2);
  CHECK(b.shared->stats().fallbacks == 0);
}

TEST_CASE("fleet client: a call's fresh tickets reach Redis in one store script, after one MGET unless no process "
          "stored them") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  bool const known_keys = GENERATE(true, false);
  CAPTURE(known_keys);
  process a(redis->url(), emu->base_url(), "process-a", {}, 500ms, 200ms, known_keys ? 1000 : 0);
  wandura::viewer first{viewer_a, "phone-1", "kek"};
  REQUIRE(a.wait_for(a.api->start_episode(first, "the-heiress-returns", 4, 6)).play.outcome ==
          item_outcome::granted); // the store script is cached in Redis from now on
  a.flush();
  if (known_keys) { // its subscription live and the keys read: the commands from now on are the calls'
    REQUIRE(test_support::wait_until([&] { return a.shared->stats().tickets.known_keys_complete; }));
  }
  // Counted by the server: the fleet's counters are as of its latest call, and the replica's read is none.
  auto const mgets = mget_calls(redis->url());
  auto const scripts = command_calls(redis->url(), "evalsha");
  wandura::viewer second{viewer_b, "tablet-1", "kek"};
  auto const result = a.wait_for(a.api->start_episode(second, "the-heiress-returns", 1, 3));
  CHECK(result.play.outcome == item_outcome::granted);
  CHECK(result.prefetch.size() == 2);
  a.flush();
  // One EVALSHA of three tickets, after one MGET of three keys unless the replica knew them absent.
  CHECK(mget_calls(redis->url()) == mgets + (known_keys ? 0 : 1));
  CHECK(command_calls(redis->url(), "evalsha") == scripts + 1);
  CHECK(a.shared->stats().tickets.known_absent == (known_keys ? 3U : 0U));
}

TEST_CASE("fleet client: fresh tickets are written behind the calls, those of one moment in one script of at most "
          "128, and flush waits for them") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a");
  process b(redis->url(), emu->base_url(), "process-b");
  a.warm();
  // Ten calls' stores handed over within one handler of the process's thread, as calls finishing in one turn of
  // its event loop do: taken at once, each, and kept locally at once.
  auto const scripts = command_calls(redis->url(), "evalsha") + command_calls(redis->url(), "eval");
  auto const handed = a.wait_for([](std::shared_ptr<wandura::ticket_store> store) -> asio::awaitable<int> {
    int taken = 0;
    for (int call = 0; call < 10; ++call) {
      auto tickets = fresh_tickets(3 * call, 3);
      taken += store->try_insert_many(tickets) ? 1 : 0;
    }
    co_return taken;
  }(a.tickets));
  CHECK(handed == 10);
  CHECK(found_of(a, 0, 30) == 30); // this process's own copies answer at once
  a.flush();
  CHECK(command_calls(redis->url(), "evalsha") + command_calls(redis->url(), "eval") == scripts + 1);
  CHECK(found_of(b, 0, 30) == 30); // every one of them in Redis, for another process

  // 300 at once: three scripts (128, 128, 44), one after another.
  b.keys_read(); // b subscribed at its first hit: its read whole's script is not one of these
  auto const before = command_calls(redis->url(), "evalsha") + command_calls(redis->url(), "eval");
  auto const b_known = b.known_keys();
  auto many = fresh_tickets(100, 300);
  CHECK(a.wait_for([](std::shared_ptr<wandura::ticket_store> store,
                      std::vector<std::pair<wandura::ticket_key, wandura::ticket>>& tickets) -> asio::awaitable<bool> {
    co_return store->try_insert_many(tickets);
  }(a.tickets, many)));
  a.flush();
  CHECK(command_calls(redis->url(), "evalsha") + command_calls(redis->url(), "eval") == before + 3);
  b.heard(b_known, 300);
  CHECK(found_of(b, 100, 300) == 300);
  CHECK(a.shared->stats().fallbacks == 0);

  // The store's awaitable insert waits for its write: another process finds the ticket once it heard of it.
  auto const b_known_one = b.known_keys();
  REQUIRE(a.wait_for([](std::shared_ptr<wandura::ticket_store> store) -> asio::awaitable<bool> {
    auto one = fresh_tickets(500, 1).front();
    auto insert = store->insert(std::move(one.first), std::move(one.second)); // named: GCC 12
    co_await std::move(insert);
    co_return true;
  }(a.tickets)));
  CHECK(!redis_value(redis->url(), 500).empty()); // written when it returns
  b.heard(b_known_one, 1);
  CHECK(found_of(b, 500, 1) == 1);
  // Erased while its write waits behind another: the write does not bring it back. Redis paused, so that the first
  // write is in flight while the second store and the erase come.
  auto const b_known_690 = b.known_keys();
  redis->pause();
  auto first = fresh_tickets(690, 1);
  auto second = fresh_tickets(700, 1);
  REQUIRE(a.tickets->try_insert_many(first));
  std::this_thread::sleep_for(50ms);           // its write goes out on the process's idle thread and waits for Redis
  REQUIRE(a.tickets->try_insert_many(second)); // waits behind the first write
  std::atomic<bool> erased{false};
  asio::co_spawn(
      a.io,
      [](std::shared_ptr<wandura::ticket_store> store, std::atomic<bool>& done) -> asio::awaitable<void> {
        auto key = fresh_tickets(700, 1).front().first;
        auto erase = store->erase(std::move(key)); // named: GCC 12 and co_await temporaries
        co_await std::move(erase);
        done = true;
      }(a.tickets, erased),
      asio::detached);
  std::this_thread::sleep_for(50ms);
  redis->resume();
  REQUIRE(test_support::wait_until([&] { return erased.load(); }));
  a.flush();
  b.heard(b_known_690, 1);
  CHECK(found_of(b, 690, 1) == 1);
  CHECK(redis_value(redis->url(), 700).empty()); // not brought back by the write it waited behind
  CHECK(found_of(b, 700, 1) == 0);
  CHECK(found_of(a, 700, 1) == 0);
  // A key without a device is never stored, at once or awaited.
  auto nodevice = fresh_tickets(600, 1);
  nodevice.front().first.union_info.clear();
  CHECK(a.tickets->try_insert_many(nodevice));
  a.flush();
  CHECK(found_of(b, 600, 1) == 0);
}

TEST_CASE("fleet client: flush waits at most for Redis's timeout, is cancelled on its own, and completes at once "
          "after shutdown") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a", {}, 1000ms);
  a.warm();
  redis->pause();
  auto tickets = fresh_tickets(0, 2);
  REQUIRE(a.tickets->try_insert_many(tickets)); // its write waits for the paused Redis
  asio::cancellation_signal cancel;
  asio::co_spawn(
      a.io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        co_await timer.async_wait(asio::use_awaitable);
        cancel.emit(asio::cancellation_type::terminal);
      },
      asio::detached);
  auto started = std::chrono::steady_clock::now();
  try {
    (void)a.wait_for(
        [](wandura::fleet& f) -> asio::awaitable<bool> {
          co_await f.flush();
          co_return true;
        }(*a.shared),
        cancel.slot());
    FAIL("expected operation_aborted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
  CHECK(test_support::elapsed_ms(started) < 800); // not the write's 1 s
  started = std::chrono::steady_clock::now();
  a.flush(); // the write ends at the command timeout: fallen back, kept locally
  CHECK(test_support::elapsed_ms(started) < 3000);
  CHECK(a.shared->stats().tickets.fallbacks >= 1);
  CHECK(found_of(a, 0, 2) == 2);
  redis->resume();

  a.shared->shutdown();
  auto after = fresh_tickets(10, 2);
  REQUIRE(a.tickets->try_insert_many(after)); // dropped by the writer, kept locally
  started = std::chrono::steady_clock::now();
  a.flush();
  CHECK(test_support::elapsed_ms(started) < 500);
  CHECK(found_of(a, 10, 2) == 2);
}

TEST_CASE("fleet client: an erase of a ticket the store served while it was handed over is never overtaken by "
          "its write") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a");
  a.warm();
  // The process's thread watches for the first ticket of a large batch handed over from the test's thread, and
  // erases it as soon as the store serves it (as after a player reported it rejected). Keeping a batch locally
  // and staging it for the writer is one step: the erase finds it staged, never kept but not yet staged.
  int erased_rounds = 0;
  for (int round = 0; round < 5; ++round) {
    int const first = 10'000 * (round + 1);
    std::atomic<int> outcome{0}; // 1 erased, 2 never served
    std::atomic<bool> watching{false};
    asio::co_spawn(
        a.io,
        [](std::shared_ptr<wandura::ticket_store> store, int viewer, std::atomic<int>& out,
           std::atomic<bool>& started) -> asio::awaitable<void> {
          std::vector<wandura::ticket_key> const keys{fresh_tickets(viewer, 1).front().first};
          started = true;
          for (int spin = 0; spin < 2'000'000; ++spin) {
            auto const got = store->try_find(keys);
            if (got && got->at(0)) {
              auto key = keys.front();
              auto erase = store->erase(std::move(key)); // named: GCC 12 and co_await temporaries
              co_await std::move(erase);
              out = 1;
              co_return;
            }
          }
          out = 2;
        }(a.tickets, first, outcome, watching),
        asio::detached);
    REQUIRE(test_support::wait_until([&] { return watching.load(); }));
    auto batch = fresh_tickets(first, 128);
    REQUIRE(a.tickets->try_insert_many(batch));
    REQUIRE(test_support::wait_until([&] { return outcome != 0; }, 20s));
    if (outcome != 1) {
      continue;
    }
    ++erased_rounds;
    a.flush();
    CHECK(redis_value(redis->url(), first).empty()); // not brought back by its write
    CHECK(at_once(a, first) == "(declined)");
    CHECK(found_of(a, first, 1) == 0);
    CHECK(found_of(a, first + 1, 127) == 127); // the rest of the batch written
  }
  CHECK(erased_rounds > 0);
}

TEST_CASE("fleet client: flush waits for the stores handed over before it, in order, whatever is erased after") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  // Redis paused throughout; a probe interval of 0, so that each write is sent and waits its own timeout (1 s),
  // and fails: a fallback each.
  process a(redis->url(), emu->base_url(), "process-a", {}, 1000ms, 0ms);
  a.warm();
  redis->pause();
  auto const fallbacks = a.shared->stats().tickets.fallbacks;
  auto first = fresh_tickets(0, 1);
  REQUIRE(a.tickets->try_insert_many(first)); // write 1 goes out and waits
  std::this_thread::sleep_for(50ms);
  auto second = fresh_tickets(1, 1);
  REQUIRE(a.tickets->try_insert_many(second)); // staged behind write 1: write 2
  std::atomic<int> flushed{0};
  std::atomic<long long> flush_took{0};
  auto const flush_started = std::chrono::steady_clock::now();
  asio::co_spawn(
      a.io,
      [](wandura::fleet& f) -> asio::awaitable<void> {
        auto flush = f.flush(); // named: GCC 12 and co_await temporaries
        co_await std::move(flush);
      }(*a.shared),
      [&](std::exception_ptr e) {
        flush_took = test_support::elapsed_ms(flush_started);
        flushed = e ? 2 : 1;
      });
  std::this_thread::sleep_for(50ms); // the flush begins on the process's idle thread
  // Handed over after the flush began, twice, then erased: dropped, and never counted for the flush.
  auto later = fresh_tickets(2, 1);
  auto later_again = fresh_tickets(2, 1);
  REQUIRE(a.tickets->try_insert_many(later));
  REQUIRE(a.tickets->try_insert_many(later_again));
  erase_on(a, 2); // waits for its DEL: past the two writes' timeouts, or at once locally
  REQUIRE(test_support::wait_until([&] { return flushed != 0; }, 10s));
  CHECK(flushed == 1);
  // Write 2 ended before the flush did: it began when write 1 ended (1 s) and waited its own 1 s.
  CHECK(flush_took >= 1500);
  CHECK(a.shared->stats().tickets.fallbacks >= fallbacks + 2);
  redis->resume();
}

TEST_CASE("fleet client: a later store of a key is served near until its own write ends, not only the first's") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  // No subscription yet (nothing kept before): only the stores' own marks make their copies near.
  process a(redis->url(), emu->base_url(), "process-a", {}, 1000ms, 0ms);
  redis->pause();
  auto first = fresh_tickets(0, 1);
  first.front().second.ticket_id = "first";
  REQUIRE(a.tickets->try_insert_many(first)); // write 1, waiting for the paused Redis
  std::this_thread::sleep_for(50ms);
  auto second = fresh_tickets(0, 2);
  second.front().second.ticket_id = "second";
  REQUIRE(a.tickets->try_insert_many(second)); // the same key again, and another: write 2, behind write 1
  CHECK(at_once(a, 0) == "second");
  REQUIRE(test_support::wait_until([&] { return a.shared->stats().tickets.fallbacks >= 1; }, 5s)); // write 1 over
  CHECK(at_once(a, 0) == "second"); // still being written, by write 2
  CHECK(at_once(a, 1) == "tkt_1");
  redis->resume();
  a.flush();
}

TEST_CASE("fleet client: after shutdown, stores staged or made then are kept locally and served as fallback copies, "
          "not near") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a", {}, 1000ms, 0ms);
  a.warm();
  redis->pause();
  auto in_flight = fresh_tickets(0, 1);
  REQUIRE(a.tickets->try_insert_many(in_flight));
  std::this_thread::sleep_for(50ms);
  auto staged = fresh_tickets(1, 1);
  REQUIRE(a.tickets->try_insert_many(staged));
  a.shared->shutdown();
  a.flush();
  auto after = fresh_tickets(2, 1);
  REQUIRE(a.tickets->try_insert_many(after));
  a.flush();
  auto const near_hits = a.shared->stats().tickets.near_hits;
  for (int i = 0; i < 3; ++i) {
    CHECK(at_once(a, i) == "(declined)");
  }
  CHECK(a.shared->stats().tickets.near_hits == near_hits);
  CHECK(found_of(a, 0, 3) == 3); // the fallback copies answer
  redis->resume();
}

TEST_CASE("fleet client: a flush awaited on another io_context ends when the fleet is destroyed, without keeping it") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  asio::io_context other;
  std::atomic<int> ended{0};
  {
    process a(redis->url(), emu->base_url(), "process-a", {}, 3000ms);
    a.warm();
    redis->pause();
    auto stores = fresh_tickets(0, 2);
    REQUIRE(a.tickets->try_insert_many(stores)); // its write waits for the paused Redis
    asio::co_spawn(
        other,
        [](wandura::fleet& f) -> asio::awaitable<void> {
          auto flush = f.flush(); // named: GCC 12 and co_await temporaries
          co_await std::move(flush);
        }(*a.shared),
        [&](std::exception_ptr e) {
          if (!e) {
            ended = 1;
            return;
          }
          try {
            std::rethrow_exception(e);
          } catch (wandura::error const& failure) {
            ended = failure.code() == asio::error::operation_aborted ? 2 : 3;
          } catch (...) {
            ended = 4;
          }
        });
    other.run_for(100ms);
    CHECK(ended == 0);
  } // the process goes: its io_context stopped, the client and the fleet destroyed, then the io_context
  redis->resume();
  other.restart();
  CHECK(test_support::run_returns_within(other, 3000ms));
  CHECK(ended == 2);
}

TEST_CASE("fleet client: a ticket one process issued is reused by another, never across devices or viewers") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a");
  process b(redis->url(), emu->base_url(), "process-b");

  auto const first = a.play(viewer_a, "phone-1", 4);
  REQUIRE(first.outcome == item_outcome::granted);
  CHECK_FALSE(first.reused);
  REQUIRE(first.ticket);
  a.flush(); // written behind the call

  auto const second = b.play(viewer_a, "phone-1", 4);
  REQUIRE(second.outcome == item_outcome::granted);
  CHECK(second.reused);
  REQUIRE(second.ticket);
  CHECK(*second.ticket == *first.ticket); // every field, expires_at included
  CHECK(b.shared->stats().cross_process_reuse == 1);
  CHECK(emu->stats().tickets_counted == 1);
  CHECK(playback_requests(*emu) == 1); // the second process sent nothing

  // Its own ticket is reused by the first process too, and that is not a cross-process reuse.
  CHECK(a.play(viewer_a, "phone-1", 4).reused);
  CHECK(a.shared->stats().cross_process_reuse == 0);
  CHECK(playback_requests(*emu) == 1);

  // Another device, or another viewer: a fresh ticket from the server, never the stored one.
  auto const other_device = b.play(viewer_a, "tv-1", 4);
  REQUIRE(other_device.ticket);
  CHECK_FALSE(other_device.reused);
  CHECK(other_device.ticket->ticket_id != first.ticket->ticket_id);
  auto const other_viewer = b.play(viewer_b, "phone-1", 4);
  REQUIRE(other_viewer.ticket);
  CHECK_FALSE(other_viewer.reused);
  CHECK(other_viewer.ticket->ticket_id != first.ticket->ticket_id);
  CHECK(emu->stats().tickets_counted == 3);
  CHECK(b.shared->stats().cross_process_reuse == 1);
  CHECK(b.shared->stats().fallbacks == 0);
  CHECK(b.api->stats().metrics.cache_hits == 1);
}

TEST_CASE("fleet client: the per-viewer limit is one limit across two processes") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  wandura::client_options options;
  options.viewer_tickets_per_minute = 2;
  process a(redis->url(), emu->base_url(), "process-a", options);
  process b(redis->url(), emu->base_url(), "process-b", options);

  CHECK(a.play(viewer_a, "phone-1", 1).outcome == item_outcome::granted);
  CHECK(b.play(viewer_a, "phone-1", 2).outcome == item_outcome::granted);
  // Two a minute for this viewer, whichever process serves them: the third and fourth are refused.
  auto const third = a.play(viewer_a, "phone-1", 3);
  CHECK(third.outcome == item_outcome::viewer_limited);
  REQUIRE(third.retry_after);
  CHECK(*third.retry_after >= 29s); // one ticket every 30 s
  CHECK(*third.retry_after <= 30s);
  CHECK(b.play(viewer_a, "phone-1", 4).outcome == item_outcome::viewer_limited);
  CHECK(emu->stats().tickets_counted == 2);
  // Another viewer has an allowance of their own.
  CHECK(b.play(viewer_b, "phone-2", 1).outcome == item_outcome::granted);
  // A reused ticket takes nothing: the allowance taken for it is given back (on the fleet's strand, before the
  // next acquire of the process).
  CHECK(a.play(viewer_b, "phone-2", 1).reused);
  CHECK(a.play(viewer_b, "phone-2", 2).outcome == item_outcome::granted);
  CHECK(b.play(viewer_b, "phone-2", 3).outcome == item_outcome::viewer_limited);
  auto const stats = a.shared->stats().viewers;
  CHECK(stats.fallbacks == 0);
  CHECK(stats.refused >= 1);
}

TEST_CASE("fleet client: the viewer limit says which bucket decided, and a give-back returns to that bucket") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  using account = wandura::viewer_limit::account;
  auto emu = start_emulator();
  wandura::client_options options;
  options.viewer_tickets_per_minute = 2;
  process a(redis->url(), emu->base_url(), "process-a", options, 50ms);
  REQUIRE(a.limit != nullptr);
  auto const in_redis = a.wait_for(a.limit->acquire(viewer_a, 1));
  CHECK(in_redis.allowed);
  CHECK(in_redis.taken_from == account::primary); // one of two left in Redis

  redis->pause();
  // The local bucket decides, from what Redis last said (one of two left): one more, not a fresh two.
  auto const local = a.wait_for(a.limit->acquire(viewer_a, 1));
  CHECK(local.allowed);
  CHECK(local.taken_from == account::fallback);
  CHECK_FALSE(a.wait_for(a.limit->acquire(viewer_a, 1)).allowed);
  redis->resume();
  std::this_thread::sleep_for(300ms); // past the probe interval: Redis decides again
  // The local take, given back now that Redis answers: to the local bucket. Redis, which never counted it, keeps
  // its one ticket, so two are refused there and one is granted.
  a.limit->release(viewer_a, 1, local.taken_from);
  auto const refused = a.wait_for(a.limit->acquire(viewer_a, 2));
  CHECK_FALSE(refused.allowed);
  CHECK(refused.taken_from == account::primary);
  CHECK(a.wait_for(a.limit->acquire(viewer_a, 1)).allowed);
  CHECK(a.shared->stats().viewers.fallbacks == 2);
}

TEST_CASE("fleet client: Redis paused mid-run, calls answer from local state within the timeout, then share again") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  wandura::client_options options;
  options.viewer_tickets_per_minute = 30;
  constexpr auto timeout = 100ms;
  process a(redis->url(), emu->base_url(), "process-a", options, timeout);
  process b(redis->url(), emu->base_url(), "process-b", options, timeout);
  REQUIRE(a.play(viewer_a, "phone-1", 1).outcome == item_outcome::granted);
  REQUIRE(a.shared->stats().fallbacks == 0);

  redis->pause();
  // Every call still succeeds: each costs at most one command timeout per part (lookup, viewer limit), then the
  // parts answer locally until the probe interval has passed.
  for (int episode = 2; episode <= 5; ++episode) {
    auto const started = std::chrono::steady_clock::now();
    auto const item = a.play(viewer_a, "phone-1", episode);
    CHECK(item.outcome == item_outcome::granted);
    CHECK(test_support::elapsed_ms(started) < 2000);
  }
  // What the process issued while Redis was away is still reused by the process itself.
  CHECK(a.play(viewer_a, "phone-1", 3).reused);
  // The lookups of episodes no process stored may have been answered absent without asking (the keys known, read
  // before the pause); the stores, written behind the calls, fall back at their command timeout.
  REQUIRE(test_support::wait_until([&] { return a.shared->stats().tickets.fallbacks >= 1; }, 5s));
  auto const degraded = a.shared->stats();
  CHECK(degraded.fallbacks >= 2);
  CHECK(degraded.fallbacks == degraded.tickets.fallbacks + degraded.viewers.fallbacks + degraded.pace.fallbacks);
  CHECK(degraded.tickets.fallbacks >= 1);
  CHECK(degraded.viewers.fallbacks >= 1);
  CHECK(degraded.degraded);
  CHECK(a.lines_starting("WARN fleet ticket_cache") == 1); // one line per outage, not one per call
  CHECK(a.lines_starting("WARN fleet viewer_limit") == 1);

  redis->resume();
  std::this_thread::sleep_for(300ms); // past the probe interval
  auto const b_known = b.known_keys();
  auto const fresh = a.play(viewer_a, "phone-1", 9);
  REQUIRE(fresh.outcome == item_outcome::granted);
  CHECK_FALSE(fresh.reused);
  a.flush(); // written: the ticket cache's probe succeeded
  b.heard(b_known, 1);
  // Shared again: the other process reuses what this one stored after the outage.
  auto const shared = b.play(viewer_a, "phone-1", 9);
  CHECK(shared.reused);
  CHECK(b.shared->stats().cross_process_reuse == 1);
  CHECK_FALSE(a.shared->stats().degraded);
  CHECK(a.lines_starting("INFO fleet ticket_cache") == 1);
  CHECK(a.lines_starting("WARN fleet ticket_cache") == 1);
}

TEST_CASE("fleet client: after Redis restarted empty, one request per ticket refills it and both processes reuse it "
          "again") {
  // A trial: Redis killed and restarted without persistence; each process, its replica read again and complete,
  // answered every key absent, the server reused the tickets, and nothing stored them: every later call went to the
  // API (124 a second against 0 before) until the tickets expired.
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  process a(redis->url(), emu->base_url(), "process-a", {}, 100ms);
  process b(redis->url(), emu->base_url(), "process-b", {}, 100ms);
  auto const b_known = b.known_keys();
  auto const first = a.play(viewer_a, "phone-1", 4);
  REQUIRE(first.ticket);
  a.flush();
  b.heard(b_known, 1);
  REQUIRE(b.play(viewer_a, "phone-1", 4).reused);
  REQUIRE(playback_requests(*emu) == 1);

  redis->kill();
  redis->start();            // empty: no persistence
  for (auto* p : {&a, &b}) { // both read the (empty) keys again: a lookup is answered absent without asking
    REQUIRE(test_support::wait_until([&] {
      auto const t = p->shared->stats().tickets;
      return t.known_keys_complete && t.known_keys == 0 && !p->shared->stats().degraded;
    }));
  }

  auto const again = a.play(viewer_a, "phone-1", 4);
  REQUIRE(again.ticket);
  CHECK(again.reused);
  CHECK(again.ticket->ticket_id == first.ticket->ticket_id);
  auto const requests = playback_requests(*emu);
  CHECK(requests == 2); // asked again: the server reused it, counting 0
  CHECK(emu->stats().tickets_reused >= 1);
  a.flush();
  b.heard(0, 1); // stored again, announced to the fleet
  for (int i = 0; i < 3; ++i) {
    auto const item = (i % 2 == 0 ? b : a).play(viewer_a, "phone-1", 4);
    REQUIRE(item.ticket);
    CHECK(item.reused);
    CHECK(item.ticket->ticket_id == first.ticket->ticket_id);
  }
  CHECK(playback_requests(*emu) == requests); // answered by the store again
  CHECK(emu->stats().tickets_counted == 1);
}

TEST_CASE("fleet client: Redis down from the start, every call succeeds and a process reuses its own tickets") {
  auto emu = start_emulator();
  std::string const nowhere = "redis://127.0.0.1:" + std::to_string(test_support::free_loopback_port());
  wandura::client_options options;
  options.viewer_tickets_per_minute = 30;
  process a(nowhere, emu->base_url(), "process-a", options);
  auto const started = std::chrono::steady_clock::now();
  auto const first = a.play(viewer_a, "phone-1", 4);
  REQUIRE(first.outcome == item_outcome::granted);
  auto const again = a.play(viewer_a, "phone-1", 4);
  CHECK(again.reused);
  CHECK(test_support::elapsed_ms(started) < 2000);
  CHECK(emu->stats().tickets_counted == 1);
  auto const stats = a.shared->stats();
  CHECK(stats.fallbacks >= 3); // lookup, limit and store of the first call at least
  // The reuse was of the process's own ticket, never written: a near hit (shared_ticket_cache.hpp), not a fallback.
  CHECK(stats.tickets.hits == 1);
  CHECK(stats.tickets.near_hits == 1);
  CHECK(stats.degraded);
  CHECK(stats.redis.connect_failures >= 1);
  CHECK(a.lines_starting("WARN fleet ticket_cache") == 1);
}

TEST_CASE("fleet client: a Redis that answers garbage or closes mid-reply never fails a call") {
  auto emu = start_emulator();
  for (std::string const answer : {"HTTP/1.1 400 Bad Request\r\n\r\n", "$10\r\nabc"}) {
    hostile_redis fake(answer);
    wandura::client_options options;
    options.viewer_tickets_per_minute = 30;
    process a(fake.url(), emu->base_url(), "process-a", options);
    auto const before = emu->stats().tickets_counted;
    auto const first = a.play(viewer_a, "tv-" + std::to_string(answer.size()), 4);
    REQUIRE(first.outcome == item_outcome::granted);
    CHECK(a.play(viewer_a, "tv-" + std::to_string(answer.size()), 4).reused);
    CHECK(emu->stats().tickets_counted == before + 1);
    auto const stats = a.shared->stats();
    CHECK(stats.fallbacks >= 2);
    CHECK(a.lines_starting("WARN fleet ticket_cache") == 1);
  }
}

TEST_CASE("fleet client: a call cancelled while its lookup waits for a paused Redis ends at once") {
  auto redis = test_support::start_redis_or_skip();
  if (!redis) {
    return;
  }
  auto emu = start_emulator();
  // A lookup would wait 3 s. Without the keys known: with them, a key no process stored is answered absent without
  // asking, and nothing would wait.
  process a(redis->url(), emu->base_url(), "process-a", {}, 3000ms, 200ms, 0);
  REQUIRE(a.play(viewer_a, "phone-1", 1).outcome == item_outcome::granted);
  redis->pause();
  wandura::ticket_batch batch;
  batch.union_info = "phone-1";
  batch.drm_kek = "kek";
  batch.viewer_ref = viewer_a;
  batch.episodes.push_back({"the-heiress-returns", 2, wandura::intent::play});
  asio::cancellation_signal cancel;
  // Cancelled from the process's thread after 100 ms, while the lookup waits for Redis.
  asio::co_spawn(
      a.io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        co_await timer.async_wait(asio::use_awaitable);
        cancel.emit(asio::cancellation_type::terminal);
      },
      asio::detached);
  auto const started = std::chrono::steady_clock::now();
  try {
    (void)a.wait_for(a.api->issue_tickets(std::move(batch)), cancel.slot());
    FAIL("expected operation_aborted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
  CHECK(test_support::elapsed_ms(started) < 1500);
  CHECK(emu->stats().tickets_counted == 1); // nothing was sent for the cancelled call
  redis->resume();
  CHECK(a.play(viewer_a, "phone-1", 3).outcome == item_outcome::granted);
}

TEST_CASE("fleet client: configure gives every client the fleet's one store kind and counter pace, a viewer limit "
          "only when asked for") {
  asio::io_context io;
  wandura::fleet_options fo;
  fo.redis.url = "redis://127.0.0.1:1"; // nothing listens: every part answers locally
  fo.fallback.log = [](std::string_view) {};
  wandura::fleet shared(io.get_executor(), fo);
  wandura::client_options plain;
  wandura::client_options limited;
  limited.viewer_tickets_per_minute = 30;
  shared.configure(plain);
  shared.configure(limited);
  CHECK(plain.tickets != nullptr);
  CHECK(plain.viewer_limit == nullptr); // no limit asked for: none set
  CHECK(limited.viewer_limit != nullptr);
  REQUIRE(plain.retry.admission.shared_pace != nullptr);
  CHECK(plain.retry.admission.shared_pace == limited.retry.admission.shared_pace); // one pace per fleet
  // One shared limit per rate: clients of the same rate take from one allowance (here the local fallback's: Redis
  // at this address refuses connections), another rate from its own.
  wandura::client_options same_rate;
  same_rate.viewer_tickets_per_minute = 30;
  wandura::client_options other_rate;
  other_rate.viewer_tickets_per_minute = 3;
  shared.configure(same_rate);
  shared.configure(other_rate);
  REQUIRE(same_rate.viewer_limit != nullptr);
  REQUIRE(other_rate.viewer_limit != nullptr);
  CHECK(test_support::run(io, limited.viewer_limit->acquire("viewer:1", 30)).allowed);
  auto const spent = test_support::run(io, same_rate.viewer_limit->acquire("viewer:1", 1));
  CHECK_FALSE(spent.allowed);
  CHECK(spent.taken_from == wandura::viewer_limit::account::fallback);
  CHECK(test_support::run(io, other_rate.viewer_limit->acquire("viewer:1", 3)).allowed);
  // A store the options had is replaced by the fleet's.
  wandura::client_options own_store;
  auto const mine = std::make_shared<wandura::memory_ticket_store>();
  own_store.tickets = mine;
  shared.configure(own_store);
  CHECK(own_store.tickets != nullptr);
  CHECK(own_store.tickets != mine);
  wandura::client_options zero;
  zero.viewer_tickets_per_minute = 0;
  try {
    shared.configure(zero);
    FAIL("a zero rate was accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
  }
}

TEST_CASE("fleet: viewer_local_share gives each process its share of every viewer limit while Redis is away and "
          "one outside 0 to 1 is refused") {
  asio::io_context io;
  auto granted = [&](double share) { // tickets granted to one viewer at once
    wandura::fleet_options fo;
    fo.redis.url = "redis://127.0.0.1:1"; // nothing listens: every part answers locally
    fo.fallback.log = [](std::string_view) {};
    fo.viewer_local_share = share;
    wandura::fleet shared(io.get_executor(), fo);
    wandura::client_options options;
    options.viewer_tickets_per_minute = 30;
    shared.configure(options);
    int tickets = 0;
    while (tickets < 40 && test_support::run(io, options.viewer_limit->acquire("viewer:1", 1)).allowed) {
      ++tickets;
    }
    return tickets;
  };
  CHECK(granted(1.0) == 30);
  CHECK(granted(0.5) == 15);
  CHECK(granted(0.1) == 3);
  // Too small a share of 1 ticket a minute to count is refused as the fleet is made (a review: it was taken, the
  // first `configure` at 1 a minute then threw from the viewer limit's constructor and left an empty limit behind,
  // which the fleet's next stats read crashed on).
  for (double const bad : {0.0, -1.0, 1.01, std::numeric_limits<double>::quiet_NaN(), 1e-306}) {
    CAPTURE(bad);
    wandura::fleet_options fo;
    fo.redis.url = "redis://127.0.0.1:1";
    fo.viewer_local_share = bad;
    CHECK(test_support::refused_as_invalid([&] { wandura::fleet shared(io.get_executor(), fo); }));
  }
  wandura::fleet_options smallest;
  smallest.redis.url = "redis://127.0.0.1:1";
  smallest.viewer_local_share = 2e-303;
  wandura::fleet shared(io.get_executor(), smallest);
  wandura::client_options options;
  options.viewer_tickets_per_minute = 1;
  shared.configure(options);
  CHECK(options.viewer_limit != nullptr);
  shared.shutdown();
  io.restart();
  io.poll();
  CHECK(shared.stats().viewers.granted == 0);

  // A configure that throws leaves the options as they were.
  wandura::client_options refused;
  refused.viewer_tickets_per_minute = 0;
  CHECK(test_support::refused_as_invalid([&] { shared.configure(refused); }));
  CHECK(refused.tickets == nullptr);
  CHECK(refused.viewer_limit == nullptr);
  CHECK(refused.retry.admission.shared_pace == nullptr);
}

TEST_CASE("fleet: a bad org or Redis URL is refused with invalid_argument, never with the password in the message") {
  asio::io_context io;
  auto refusal = [&](std::string org, std::string url) -> std::optional<wandura::error> {
    wandura::fleet_options fo;
    fo.org = std::move(org);
    fo.redis.url = std::move(url);
    try {
      wandura::fleet shared(io.get_executor(), fo);
    } catch (wandura::error const& e) {
      return e;
    }
    return std::nullopt;
  };
  for (std::string const& org : {std::string(), std::string("a{b}"), std::string("a b"), std::string(65, 'o')}) {
    auto const e = refusal(org, "redis://127.0.0.1:1");
    REQUIRE(e);
    CHECK(e->code() == wandura::errc::invalid_argument);
  }
  for (std::string const& url : {std::string("rediss://:s3cret@127.0.0.1:6379"), std::string("http://:s3cret@h:1"),
                                 std::string("redis://:s3cret@[1::2::3]:1"), std::string("redis://:s3cret@h:99999"),
                                 std::string("redis://:s3cret@h:1/x")}) {
    auto const e = refusal("org_demo", url);
    REQUIRE(e);
    CHECK(e->code() == wandura::errc::invalid_argument);
    CHECK(std::string_view(e->what()).find("s3cret") == std::string_view::npos);
  }
}

TEST_CASE("fleet: Redis options that would switch Redis off are refused with invalid_argument, as redis_client "
          "refuses them") {
  // A trial: a command timeout of 0 or -5 ms was taken, Redis was never really used, and the only sign was a WARN
  // line blaming a healthy server.
  using wandura::redis_options;
  std::vector<std::pair<std::string, redis_options>> cases{
      {"command_timeout must be > 0", redis_options{.command_timeout = 0ms}},
      {"command_timeout must be > 0", redis_options{.command_timeout = -5ms}},
      {"connect_timeout must be > 0", redis_options{.connect_timeout = 0ms}},
      {"max_pending must be > 0", redis_options{.max_pending = 0}},
      {"max_reply_bytes and max_reply_elements must be > 0", redis_options{.max_reply_bytes = 0}},
      {"max_reply_bytes and max_reply_elements must be > 0", redis_options{.max_reply_elements = 0}},
  };
  asio::io_context io;
  for (auto const& [why, redis] : cases) {
    CAPTURE(why);
    wandura::fleet_options fo;
    fo.org = "acme";
    fo.redis = redis;
    try {
      wandura::fleet shared(io.get_executor(), fo);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK(std::string(e.what()) == "redis options: " + why);
    }
    try {
      wandura::redis_client client(io.get_executor(), redis);
      FAIL("accepted by redis_client");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
    }
  }
  // Anything above 0 is taken as given (redis_client.hpp: a bound too small for a reply fails it, named in the WARN
  // line), and `milliseconds::max()` for no limit.
  CHECK_NOTHROW(wandura::redis_client(io.get_executor(), redis_options{.command_timeout = 1ms,
                                                                       .connect_timeout = 1ms,
                                                                       .max_pending = 1,
                                                                       .max_reply_bytes = 1,
                                                                       .max_reply_elements = 1}));
  CHECK_NOTHROW(
      wandura::redis_client(io.get_executor(), redis_options{.command_timeout = std::chrono::milliseconds::max(),
                                                             .connect_timeout = std::chrono::milliseconds::max()}));
}

TEST_CASE("fleet: the lines it logs when Redis refuses its password or is down never contain the password") {
  auto redis = test_support::start_redis_or_skip(); // no password set: an AUTH is refused
  if (!redis) {
    return;
  }
  asio::io_context io;
  std::vector<std::string> lines;
  wandura::fleet_options fo;
  fo.redis.url = "redis://:s3cret@127.0.0.1:" + std::to_string(redis->port());
  fo.fallback.log = [&](std::string_view line) { lines.emplace_back(line); };
  fo.fallback.probe_interval = 10ms;
  wandura::fleet shared(io.get_executor(), fo);
  wandura::client_options options;
  shared.configure(options);
  auto look_up = [&] {
    std::vector<wandura::ticket_key> keys;
    keys.push_back({"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", "phone-1", "the-heiress-returns", 1, wandura::intent::play});
    auto const found = test_support::run(io, options.tickets->find(std::move(keys)));
    CHECK_FALSE(found.at(0)); // answered locally: nothing stored
  };
  look_up();
  redis->kill();
  test_support::wait(io, 20ms);
  look_up();
  shared.shutdown();
  REQUIRE_FALSE(lines.empty());
  CHECK(test_support::count_starting(lines, "WARN fleet ticket_cache: redis 127.0.0.1:") == 1);
  for (auto const& line : lines) {
    CHECK(line.find("s3cret") == std::string::npos);
  }
  CHECK(shared.stats().redis.connect_failures >= 1);
}
