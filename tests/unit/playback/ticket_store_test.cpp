#include "wandura/playback/ticket_store.hpp"

#include <atomic>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "wandura/testing/manual_clock.hpp"

using namespace std::chrono;
using wandura::intent;
using wandura::memory_ticket_store;
using wandura::memory_ticket_store_options;
using wandura::ticket;
using wandura::ticket_key;

namespace {

/// The store's time source, hand-stepped: a manual clock whose wall time starts at 2026-11-30T10:00Z.
struct fake_wall_clock {
  std::shared_ptr<wandura::testing::manual_clock> source = std::make_shared<wandura::testing::manual_clock>(
      steady_clock::time_point(hours(1000)), sys_days{year{2026} / 11 / 30} + hours{10});
  [[nodiscard]] system_clock::time_point now() const { return source->system_now(); }
  /// Moves the clock forward to `t` (never back).
  void set(system_clock::time_point t) { source->advance(duration_cast<wandura::clock::duration>(t - now())); }
};

ticket make_ticket(std::string id, system_clock::time_point expires_at) {
  ticket t;
  t.ticket_id = std::move(id);
  t.expires_at = expires_at;
  t.manifest_url = "https://cdn.example/m.mpd";
  return t;
}

ticket_key key(std::string viewer, std::string device, std::int32_t episode, intent what = intent::play) {
  return ticket_key{std::move(viewer), std::move(device), "the-heiress-returns", episode, what};
}

/// Drives a store through the `ticket_store` interface, each operation run to its end on a private io_context.
class through_interface {
public:
  explicit through_interface(wandura::ticket_store& store) : store_(store) {}

  std::vector<std::optional<ticket>> find(std::vector<ticket_key> keys) { return run(store_.find(std::move(keys))); }
  std::optional<ticket> find(ticket_key k) { return find(std::vector<ticket_key>{std::move(k)}).at(0); }
  void insert(ticket_key k, ticket t) { run_void(store_.insert(std::move(k), std::move(t))); }
  void erase(ticket_key k) { run_void(store_.erase(std::move(k))); }

private:
  template <class T> T run(asio::awaitable<T> op) {
    std::optional<T> out;
    asio::co_spawn(io_, std::move(op), [&](std::exception_ptr e, T value) {
      if (e) {
        std::rethrow_exception(e);
      }
      out = std::move(value);
    });
    io_.restart();
    io_.run();
    if (!out) { // not REQUIRE: this runs on worker threads too, and Catch2's assertions are not thread-safe
      throw std::logic_error("the store's operation did not complete");
    }
    return std::move(*out);
  }
  void run_void(asio::awaitable<void> op) {
    run([](asio::awaitable<void> inner) -> asio::awaitable<bool> {
      co_await std::move(inner);
      co_return true;
    }(std::move(op)));
  }

  wandura::ticket_store& store_;
  asio::io_context io_;
};

} // namespace

TEST_CASE("ticket store: one lookup answers every key of a batch, in order") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  store.insert(key("viewer-a", "device-1", 4), make_ticket("tkt_4", clock.now() + minutes(30)));
  store.insert(key("viewer-a", "device-1", 6, intent::prefetch), make_ticket("tkt_6", clock.now() + minutes(30)));
  auto found = store.find({key("viewer-a", "device-1", 4), key("viewer-a", "device-1", 5, intent::prefetch),
                           key("viewer-a", "device-1", 6, intent::prefetch)});
  REQUIRE(found.size() == 3);
  REQUIRE(found[0]);
  CHECK(found[0]->ticket_id == "tkt_4");
  CHECK_FALSE(found[1]);
  REQUIRE(found[2]);
  CHECK(found[2]->ticket_id == "tkt_6");
  CHECK(store.find(std::vector<ticket_key>{}).empty());
}

TEST_CASE("ticket store: a stored ticket is found for exactly its key") {
  fake_wall_clock clock;
  memory_ticket_store memory(
      {.max_entries = 100, .reuse_margin = minutes(5), .shards = 4, .time_source = clock.source});
  through_interface store(memory);
  auto const t = make_ticket("tkt_1", clock.now() + minutes(30));
  store.insert(key("viewer-a", "device-1", 4), t);
  auto found = store.find(key("viewer-a", "device-1", 4));
  REQUIRE(found);
  CHECK(*found == t);
  CHECK_FALSE(store.find(key("viewer-a", "device-1", 4, intent::prefetch)));
  CHECK_FALSE(store.find(key("viewer-a", "device-1", 5)));
  CHECK_FALSE(store.find(key("viewer-b", "device-1", 4)));
  auto other_film = key("viewer-a", "device-1", 4);
  other_film.film_ref = "another-film";
  CHECK_FALSE(store.find(other_film));
}

TEST_CASE("ticket store: never returns a ticket issued for another device") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  store.insert(key("viewer-a", "phone", 4), make_ticket("tkt_phone", clock.now() + hours(1)));
  CHECK_FALSE(store.find(key("viewer-a", "tv", 4)));
  store.insert(key("viewer-a", "tv", 4), make_ticket("tkt_tv", clock.now() + hours(1)));
  CHECK(store.find(key("viewer-a", "phone", 4))->ticket_id == "tkt_phone");
  CHECK(store.find(key("viewer-a", "tv", 4))->ticket_id == "tkt_tv");
}

TEST_CASE("ticket store: reuse stops 5 minutes before expires_at") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  auto const expires = clock.now() + minutes(20);
  store.insert(key("v", "d", 1), make_ticket("t", expires));
  clock.set(expires - minutes(5) - seconds(1));
  CHECK(store.find(key("v", "d", 1)));
  clock.set(expires - minutes(5));
  CHECK_FALSE(store.find(key("v", "d", 1)));
  CHECK(memory.size() == 0); // dropped when found expired
}

TEST_CASE("ticket store: a negative reuse_margin counts as none, and one past the clock's span reuses nothing") {
  fake_wall_clock clock;
  auto const expires = clock.now() + minutes(20);
  {
    memory_ticket_store memory({.reuse_margin = seconds(-60), .time_source = clock.source});
    through_interface store(memory);
    store.insert(key("v", "d", 1), make_ticket("t", expires));
    clock.set(expires - seconds(1));
    CHECK(store.find(key("v", "d", 1)));
    clock.set(expires); // never reused at or past its expiry, whatever the margin
    CHECK_FALSE(store.find(key("v", "d", 1)));
  }
  fake_wall_clock later;
  memory_ticket_store memory({.reuse_margin = seconds::max(), .time_source = later.source});
  through_interface store(memory);
  store.insert(key("v", "d", 2), make_ticket("t", later.now() + hours(1)));
  CHECK(memory.size() == 0);
  CHECK_FALSE(store.find(key("v", "d", 2)));
}

TEST_CASE("ticket store: declines tickets already inside the margin and keys without viewer or device") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  store.insert(key("v", "d", 1), make_ticket("t", clock.now() + minutes(5)));
  store.insert(key("v", "d", 2), make_ticket("t", clock.now() - minutes(1)));
  store.insert(key("", "d", 3), make_ticket("t", clock.now() + hours(1)));
  store.insert(key("v", "", 4), make_ticket("t", clock.now() + hours(1)));
  CHECK(memory.size() == 0);
  CHECK_FALSE(store.find(key("", "d", 3)));
  // A declined ticket replaces the key's earlier one by none.
  store.insert(key("v", "d", 1), make_ticket("earlier", clock.now() + hours(1)));
  REQUIRE(store.find(key("v", "d", 1)));
  store.insert(key("v", "d", 1), make_ticket("later", clock.now() + minutes(4)));
  CHECK_FALSE(store.find(key("v", "d", 1)));
  CHECK(memory.size() == 0);
}

TEST_CASE("ticket store: the memory store always answers at once, by the same rules as its awaitable operations") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  std::vector<std::pair<ticket_key, ticket>> tickets;
  tickets.emplace_back(key("v", "d", 1), make_ticket("t1", clock.now() + hours(1)));
  tickets.emplace_back(key("v", "d", 2), make_ticket("t2", clock.now() + minutes(5))); // inside the margin
  tickets.emplace_back(key("", "d", 3), make_ticket("t3", clock.now() + hours(1)));    // no viewer
  CHECK(memory.try_insert_many(tickets));
  CHECK(memory.size() == 1);
  std::vector<ticket_key> const keys{key("v", "d", 1), key("v", "d", 2), key("", "d", 3), key("v", "other", 1)};
  auto found = memory.try_find(keys);
  REQUIRE(found);
  REQUIRE(found->size() == 4);
  REQUIRE((*found)[0]);
  CHECK((*found)[0]->ticket_id == "t1");
  CHECK_FALSE((*found)[1]);
  CHECK_FALSE((*found)[2]);
  CHECK_FALSE((*found)[3]); // another device
  through_interface store(memory);
  CHECK(store.find(std::vector<ticket_key>(keys)) == *found);
  clock.set(clock.now() + minutes(55));
  auto late = memory.try_find(keys);
  REQUIRE(late);
  CHECK_FALSE((*late)[0]); // inside the margin now, and dropped
  CHECK(memory.size() == 0);
  CHECK(memory.try_find({})->empty());
}

TEST_CASE("ticket store: the interface's defaults decline to answer at once and leave the tickets as given") {
  class awaitable_only final : public wandura::ticket_store {
  public:
    asio::awaitable<std::vector<std::optional<ticket>>> find(std::vector<ticket_key> keys) override {
      co_return std::vector<std::optional<ticket>>(keys.size());
    }
    asio::awaitable<void> insert(ticket_key, ticket) override { co_return; }
    asio::awaitable<void> erase(ticket_key) override { co_return; }
  } store;
  std::vector<ticket_key> const keys{key("v", "d", 1)};
  CHECK_FALSE(store.try_find(keys));
  std::vector<std::pair<ticket_key, ticket>> tickets;
  tickets.emplace_back(key("v", "d", 1), make_ticket("t1", system_clock::now() + hours(1)));
  auto const given = tickets;
  CHECK_FALSE(store.try_insert_many(tickets));
  CHECK(tickets == given);
}

TEST_CASE("ticket store: the least recently used ticket is evicted first") {
  fake_wall_clock clock;
  memory_ticket_store memory({.max_entries = 3, .shards = 1, .time_source = clock.source});
  through_interface store(memory);
  auto const expires = clock.now() + hours(1);
  store.insert(key("v", "d", 1), make_ticket("t1", expires));
  store.insert(key("v", "d", 2), make_ticket("t2", expires));
  store.insert(key("v", "d", 3), make_ticket("t3", expires));
  REQUIRE(store.find(key("v", "d", 1))); // 1 is now the most recent; 2 the least
  store.insert(key("v", "d", 4), make_ticket("t4", expires));
  CHECK(memory.size() == 3);
  CHECK_FALSE(store.find(key("v", "d", 2)));
  CHECK(store.find(key("v", "d", 1)));
  CHECK(store.find(key("v", "d", 3)));
  CHECK(store.find(key("v", "d", 4)));
  // Replacing an existing key does not evict anything and refreshes it.
  store.insert(key("v", "d", 3), make_ticket("t3b", expires));
  CHECK(memory.size() == 3);
  CHECK(store.find(key("v", "d", 3))->ticket_id == "t3b");
}

TEST_CASE("ticket store: erase and clear forget tickets") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  store.insert(key("v", "d", 1), make_ticket("t1", clock.now() + hours(1)));
  store.insert(key("v", "d", 2), make_ticket("t2", clock.now() + hours(1)));
  store.erase(key("v", "d", 1));
  store.erase(key("v", "d", 9));
  CHECK_FALSE(store.find(key("v", "d", 1)));
  CHECK(memory.size() == 1);
  memory.clear();
  CHECK(memory.size() == 0);
}

TEST_CASE("ticket store: stays bounded and consistent under concurrent use") {
  memory_ticket_store memory({.max_entries = 64, .shards = 8});
  auto const expires = system_clock::now() + hours(1);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      through_interface store(memory); // one io_context per thread, one store for all
      for (int i = 0; i < 2000; ++i) {
        auto k = key("viewer-" + std::to_string(i % 50), "device-" + std::to_string(t), i % 7);
        store.insert(k, make_ticket("tkt-" + std::to_string(t) + "-" + std::to_string(i % 7), expires));
        if (auto found = store.find(k); found && found->ticket_id.rfind("tkt-" + std::to_string(t) + "-", 0) != 0) {
          ++wrong; // a ticket of another device
        }
        if (i % 13 == 0) {
          store.erase(k);
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  CHECK(wrong == 0);
  CHECK(memory.size() <= 64);
}

namespace {

/// Inserts `count` tickets of distinct keys into `memory`, valid for an hour.
void fill(memory_ticket_store& memory, fake_wall_clock const& clock, int count) {
  through_interface store(memory);
  for (int i = 0; i < count; ++i) {
    store.insert(key("viewer-" + std::to_string(i), "d", i % 40 + 1),
                 make_ticket("t" + std::to_string(i), clock.now() + hours(1)));
  }
}

} // namespace

TEST_CASE("ticket store: max_entries is rounded up to a multiple of the shard count, and bounds the size") {
  fake_wall_clock clock;
  SECTION("10 entries in 4 shards: 3 a shard, 12 in all") {
    memory_ticket_store memory({.max_entries = 10, .shards = 4, .time_source = clock.source});
    fill(memory, clock, 500); // enough keys for every shard to fill up
    CHECK(memory.size() == 12);
  }
  SECTION("a multiple of the shard count is kept as it is") {
    memory_ticket_store memory({.max_entries = 12, .shards = 4, .time_source = clock.source});
    fill(memory, clock, 500);
    CHECK(memory.size() == 12);
  }
  SECTION("one shard: exactly max_entries") {
    memory_ticket_store memory({.max_entries = 7, .shards = 1, .time_source = clock.source});
    fill(memory, clock, 500);
    CHECK(memory.size() == 7);
  }
}

TEST_CASE("ticket store: each shard evicts on its own, so many shards may keep fewer than max_entries, and one keeps "
          "all") {
  fake_wall_clock clock;
  memory_ticket_store sharded({.max_entries = 1000, .shards = 16, .time_source = clock.source});
  fill(sharded, clock, 1000); // 1,000 distinct keys: as many as the store's bound
  INFO(sharded.size());
  CHECK(sharded.size() < 1000); // a full shard dropped its own least recently used
  CHECK(sharded.size() > 900);  // by a few per cent, as documented
  memory_ticket_store one({.max_entries = 1000, .shards = 1, .time_source = clock.source});
  fill(one, clock, 1000);
  CHECK(one.size() == 1000);
}

TEST_CASE("ticket store: the shard count is clamped to [1, max_entries]") {
  fake_wall_clock clock;
  SECTION("0 shards is one shard: one LRU over every key") {
    memory_ticket_store memory({.max_entries = 5, .shards = 0, .time_source = clock.source});
    through_interface store(memory);
    auto const expires = clock.now() + hours(1);
    for (int i = 1; i <= 6; ++i) {
      store.insert(key("v", "d", i), make_ticket("t" + std::to_string(i), expires));
    }
    // Globally least recently used goes first: with several shards some other key could have gone instead.
    CHECK(memory.size() == 5);
    CHECK_FALSE(store.find(key("v", "d", 1)));
    for (int i = 2; i <= 6; ++i) {
      CHECK(store.find(key("v", "d", i)));
    }
  }
  SECTION("more shards than entries: as many shards as entries, one entry each, never more than max_entries") {
    memory_ticket_store memory({.max_entries = 3, .shards = 64, .time_source = clock.source});
    fill(memory, clock, 500); // unclamped, 64 shards of one entry each would hold 64
    CHECK(memory.size() == 3);
  }
}

TEST_CASE("ticket store: max_entries 0 keeps no ticket") {
  // "The most tickets kept" and "bounded by max_entries tickets": 0 is a store that keeps none, not one of 1.
  fake_wall_clock clock;
  memory_ticket_store memory({.max_entries = 0, .shards = 4, .time_source = clock.source});
  through_interface store(memory);
  store.insert(key("v", "d", 1), make_ticket("t1", clock.now() + hours(1)));
  std::vector<std::pair<ticket_key, ticket>> batch{{key("v", "d", 2), make_ticket("t2", clock.now() + hours(1))}};
  CHECK(memory.try_insert_many(batch));
  CHECK(memory.size() == 0);
  CHECK_FALSE(store.find(key("v", "d", 1)));
  CHECK_FALSE(store.find(key("v", "d", 2)));
}

TEST_CASE("ticket store: max_entries at its largest value keeps every ticket, for any shard count") {
  // "Rounded up to a multiple of the shard count": the rounding must not wrap around, or a store meant to be as
  // large as memory allows would keep nothing at all.
  fake_wall_clock clock;
  std::size_t const shards = GENERATE(std::size_t{1}, std::size_t{3}, std::size_t{16});
  INFO(shards << " shards");
  memory_ticket_store memory(
      {.max_entries = std::numeric_limits<std::size_t>::max(), .shards = shards, .time_source = clock.source});
  through_interface store(memory);
  auto const expires = clock.now() + hours(1);
  for (int i = 1; i <= 40; ++i) {
    store.insert(key("v", "d", i), make_ticket("t" + std::to_string(i), expires));
  }
  CHECK(memory.size() == 40);
  for (int i = 1; i <= 40; ++i) {
    auto const found = store.find(key("v", "d", i));
    REQUIRE(found);
    CHECK(found->ticket_id == "t" + std::to_string(i));
  }
}

TEST_CASE("ticket store: max_bytes bounds what the tickets take, least recently used first, whatever the entries") {
  fake_wall_clock clock;
  auto const expires = clock.now() + hours(1);
  auto const big = [&](std::string id, std::size_t payload) {
    ticket t = make_ticket(std::move(id), expires);
    t.drm_payload.assign(payload, 'p');
    return t;
  };
  memory_ticket_store memory({.max_entries = 1000, .max_bytes = 1024 * 1024, .shards = 1, .time_source = clock.source});
  through_interface store(memory);
  for (int episode = 1; episode <= 20; ++episode) {
    store.insert(key("v", "d", episode), big("t" + std::to_string(episode), 100 * 1024));
    CHECK(memory.bytes() <= 1024 * 1024);
    if (episode == 15) {
      REQUIRE(store.find(key("v", "d", 6))); // the least recent of 6-15 becomes the most recent
    }
  }
  CHECK(memory.size() == 10); // eleven tickets of 100 KiB and their structures are over 1 MiB
  CHECK(store.find(key("v", "d", 6)));
  CHECK_FALSE(store.find(key("v", "d", 7)));
  CHECK_FALSE(store.find(key("v", "d", 11)));
  CHECK(store.find(key("v", "d", 12)));
  CHECK(store.find(key("v", "d", 20)));

  // A ticket over a shard's share is not kept, and replaces the ticket its key had by none (a superseded ticket
  // is never handed out for it).
  auto const before = memory.bytes();
  store.insert(key("v", "d", 19), big("huge", 2 * 1024 * 1024));
  CHECK_FALSE(store.find(key("v", "d", 19)));
  CHECK(memory.bytes() < before);
  CHECK(memory.size() == 9);

  // A replacement is weighed anew: a larger ticket for a kept key evicts others, a smaller one gives bytes back.
  store.insert(key("v", "d", 20), big("t20b", 500 * 1024));
  CHECK(memory.bytes() <= 1024 * 1024);
  CHECK(memory.size() < 10);
  CHECK(store.find(key("v", "d", 20))->ticket_id == "t20b");
  auto const with_large = memory.bytes();
  store.insert(key("v", "d", 20), big("t20c", 10));
  CHECK(memory.bytes() == with_large - 500 * 1024 + 10);
  store.erase(key("v", "d", 20));
  CHECK(memory.bytes() < with_large - 500 * 1024);
  memory.clear();
  CHECK(memory.bytes() == 0);
  CHECK(memory.size() == 0);
}

TEST_CASE("ticket store: by default, tickets with payloads of hundreds of KiB stay within 64 MiB") {
  fake_wall_clock clock;
  memory_ticket_store memory({.time_source = clock.source});
  through_interface store(memory);
  ticket t = make_ticket("t", clock.now() + hours(1));
  t.drm_payload.assign(340 * 1024, 'p'); // an outside trial's ticket: 1,000 of them grew the process to 1 GB
  for (int viewer = 0; viewer < 1000; ++viewer) {
    store.insert(key("viewer-" + std::to_string(viewer), "d", 1), t);
  }
  CHECK(memory.bytes() <= 64 * 1024 * 1024);
  CHECK(memory.size() <= 64 * 1024 / 340);
  CHECK(memory.size() >= 100);                  // the shards share the bytes, the hash shares the viewers
  CHECK(store.find(key("viewer-999", "d", 1))); // the last one in is kept
}
