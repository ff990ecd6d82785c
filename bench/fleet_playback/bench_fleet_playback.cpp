// playback_redis_vs_memory: what sharing tickets through Redis costs a client. Two `wandura::client`s on one
// io_context call `issue_tickets` against one in-process emulator on loopback (playback limit 10,000,000 a minute,
// never refusing): client A keeps reusable tickets in the default in-memory store, client B is configured by a
// `wandura::fleet` on a private redis-server (loopback, no persistence). Both run the same workload: batches of
// play N, prefetch N+1 and N+2 with a viewer_ref, over 500 viewers (each on its own device) taken in turn, each
// viewer moving one episode on every fourth call of its own; so after the first pass three calls in four are
// answered from the store alone and the fourth asks the emulator for the episode not seen yet. 64 calls in
// flight per side. The sides alternate (which goes first alternates too), many short runs each; the ratio is
// redis / memory of the median rates, counting calls whose play item was granted. Target: ratio >= 0.8.
// `--only redis|memory` runs one side alone for a few seconds (for `perf record` or `strace -c` of this process) and
// prints its CPU per call and Redis commands per call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "../common/cpu_time.hpp"
#include "../common/loopback_bench.hpp"
#include "redis_server.hpp"
#include "wandura/emulator/emulator.hpp"
#include "wandura/fleet/fleet.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/viewer_ref.hpp"

namespace {

namespace bench = wandura::bench;

constexpr int viewer_count = 500;
constexpr int concurrency = 64;
constexpr int calls_per_episode = 4; ///< each viewer moves one episode on every this many of its calls
constexpr int film_count = 1000;     ///< films of the catalogue: 10,000 positions a viewer never runs through
constexpr int episodes_played = 10;  ///< play N = 1..10 of each film, prefetch N+1 and N+2 (12 episodes a film)

std::string film_ref(int f) {
  return "bench-film-" + std::to_string(f);
}

/// One client and the viewers it serves. `side` names them ("memory", "redis"): the two sides never share a
/// viewer, so that neither is answered by the server's own reuse of a ticket the other was issued.
struct side {
  side(asio::io_context& io, wandura::client_options options, std::string const& name)
      : api(io.get_executor(), std::move(options)) {
    for (int v = 0; v < viewer_count; ++v) {
      auto const id = std::to_string(v);
      viewers.push_back({wandura::make_viewer_ref("bench-secret", name + "-user-" + id, "install-" + id),
                         name + "-device-" + id, "device-key-" + id});
    }
  }

  /// Call number `next` of this side: viewer `next % viewer_count`, at the position its own calls so far reached.
  wandura::ticket_batch next_batch() {
    auto const call = next++;
    auto const v = static_cast<int>(call % viewer_count);
    auto const position =
        static_cast<int>(call / viewer_count / calls_per_episode) + v; // v spreads the viewers over films
    auto const film = film_ref((position / episodes_played) % film_count);
    auto const n = 1 + position % episodes_played;
    auto const& who = viewers[static_cast<std::size_t>(v)];
    return {{{film, n, wandura::intent::play},
             {film, n + 1, wandura::intent::prefetch},
             {film, n + 2, wandura::intent::prefetch}},
            who.union_info,
            who.drm_kek,
            who.viewer_ref};
  }

  /// One call; good when its play item was granted.
  asio::awaitable<bench::outcome> one_call(bench::run_result& result) {
    auto batch = next_batch(); // named: no class temporaries inside co_await (GCC 12)
    std::string failure;
    try {
      auto const answer = co_await api.issue_tickets(std::move(batch));
      if (!answer.items.empty() && answer.items.front().outcome == wandura::item_outcome::granted) {
        co_return bench::outcome::good;
      }
      failure = answer.items.empty() ? std::string("no items")
                                     : "play item " + std::string(wandura::to_string(answer.items.front().outcome)) +
                                           " (status " + std::to_string(answer.items.front().status) + ")";
    } catch (std::exception const& e) {
      failure = std::string("threw: ") + e.what();
    }
    if (result.first_failure.empty()) {
      result.first_failure = std::move(failure);
    }
    co_return bench::outcome::failed;
  }

  /// `concurrency` calls back to back until `duration` has passed.
  bench::run_result run(asio::io_context& io, std::chrono::duration<double> duration) {
    return bench::run_coroutines(io, concurrency, duration, [this](bench::run_result& out) { return one_call(out); });
  }

  wandura::client api;
  std::vector<wandura::viewer> viewers;
  std::uint64_t next = 0;
  std::uint64_t failed = 0;
  std::string first_failure;
};

/// Adds a run's failures to the side's.
void note(side& s, bench::run_result const& r) {
  s.failed += r.failed + r.stream_resets;
  if (s.first_failure.empty() && !r.first_failure.empty()) {
    s.first_failure = r.first_failure;
  }
}

/// What the command line asked for: both sides alternating (the ratio), or one side alone for a profiler.
struct mode {
  bool quick = false;
  std::optional<std::string> only; ///< "redis" or "memory"
  int runs = 0;                    ///< `--only`'s timed runs; 0: the default (10, or 3 with `--quick`)
};

std::optional<mode> parse(int argc, char** argv) {
  mode m;
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    if (arg == "--quick") {
      m.quick = true;
    } else if (arg == "--only" && i + 1 < argc &&
               (std::string_view(argv[i + 1]) == "redis" || std::string_view(argv[i + 1]) == "memory")) {
      m.only = argv[++i];
    } else if (arg == "--runs" && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      m.runs = std::atoi(argv[++i]);
    } else {
      return std::nullopt;
    }
  }
  return m;
}

/// `--only`: one side, an untimed first pass then `runs` runs of 0.5 s, nothing of the other side in between.
int run_one_side(asio::io_context& io, side& s, wandura::fleet const& shared, pid_t redis_pid, std::string const& name,
                 int runs) {
  std::chrono::duration<double> const run_length(0.5);
  note(s, s.run(io, run_length));
  auto const commands_before = shared.stats().redis.commands;
  auto const redis_cpu_before = bench::process_cpu_seconds_of(redis_pid);
  std::vector<double> rates;
  std::vector<double> cpu;
  std::vector<double> busy;     // the event loop thread's CPU time over the run's wall time
  std::vector<double> loop_cpu; // the event loop thread's CPU time per call
  std::uint64_t calls = 0;
  for (int r = 0; r < runs; ++r) {
    auto const res = s.run(io, run_length);
    busy.push_back(100.0 * res.thread_cpu_seconds / res.seconds);
    loop_cpu.push_back(res.ok == 0 ? 0.0 : 1e6 * res.thread_cpu_seconds / static_cast<double>(res.ok));
    note(s, res);
    rates.push_back(res.rate());
    cpu.push_back(res.cpu_us_per_request());
    calls += res.ok + res.drained + res.failed; // Redis's figures below are read over the drains too
  }
  auto const commands = shared.stats().redis.commands - commands_before;
  auto const redis_cpu = bench::process_cpu_seconds_of(redis_pid) - redis_cpu_before;
  std::printf("%s alone: %.0f calls/s, CPU %.1f us per call (this process, medians of %d runs of 0.5 s; range "
              "%.1f-%.1f us); event loop thread %.1f us per call, busy %.0f %% of the time; %.2f Redis commands per "
              "call; redis-server "
              "CPU %.1f us per call\n",
              name.c_str(), bench::median(rates), bench::median(cpu), runs, *std::min_element(cpu.begin(), cpu.end()),
              *std::max_element(cpu.begin(), cpu.end()), bench::median(loop_cpu), bench::median(busy),
              calls == 0 ? 0.0 : static_cast<double>(commands) / static_cast<double>(calls),
              calls == 0 ? 0.0 : 1e6 * redis_cpu / static_cast<double>(calls));
  if (s.failed != 0) {
    std::printf("  %llu calls failed, the first: %s\n", static_cast<unsigned long long>(s.failed),
                s.first_failure.c_str());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto const args = parse(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: %s [--quick] [--only redis|memory [--runs N]]\n"
                 "  --only SIDE: that side alone for a few seconds (to profile it), printing its CPU per call and\n"
                 "               Redis commands per call\n"
                 "  --runs N:    with --only, N timed runs of 0.5 s (default 10; more under a slow profiler such as\n"
                 "               callgrind, so that the viewers reach their steady state)\n",
                 argv[0]);
    return 2;
  }
  bool const quick = args->quick;
  int const rounds = quick ? 7 : 11;
  std::chrono::duration<double> const run_length(quick ? 0.3 : 0.5);

  auto binary = test_support::redis_server::find_binary();
  if (!binary) {
    std::fprintf(stderr, "bench_fleet_playback: redis-server not found (scripts/install-deps.sh installs it)\n");
    return 1;
  }
  test_support::redis_server redis(*binary); // loopback, `--save '' --appendonly no`

  wandura::emulator::config cfg;
  cfg.orgs.front().limits.playback = 10'000'000; // never refuses: the store's cost is measured, not the limit
  for (int f = 0; f < film_count; ++f) {
    cfg.films.push_back({film_ref(f), "Bench film " + std::to_string(f), episodes_played + 2, true});
  }
  auto emu = wandura::emulator::server::start(cfg);

  asio::io_context io(wandura::bench::io_concurrency_hint()); // run by this thread alone, and made so
  // Redis commands get 100 ms, not the default 5 ms: on a machine shared with other jobs a command may wait a few
  // ms for the CPU, and a fallback to local state would measure the memory store on the Redis side.
  wandura::fleet_options fleet_options;
  fleet_options.redis.url = redis.url();
  fleet_options.redis.command_timeout = std::chrono::milliseconds(100);
  fleet_options.org = "org_demo";
  // Sized for the run's keys. Each viewer here moves an episode every 2,000 calls of its side (every ~15 ms), so
  // the live ticket keys grow by about one for every two calls (450,000 in a full run at 150,000 calls/s) where a
  // deployment's stay near what its viewers watch within the reuse window. Past the default 250,000 the replica
  // empties and reads every key again after a backoff (`ticket_cache_options::known_keys_capacity`): the Redis
  // side would then measure a replica kept too small for its keys. The line below the ratio shows it held.
  fleet_options.known_keys_capacity = 2'000'000;
  wandura::fleet shared(io.get_executor(), std::move(fleet_options));
  wandura::client_options memory_options;
  memory_options.base_url = emu->base_url();
  memory_options.api_key = "test-key";
  wandura::client_options shared_options = memory_options;
  shared.configure(shared_options);
  side memory(io, std::move(memory_options), "memory");
  side redis_side(io, std::move(shared_options), "redis");

  if (args->only) {
    return run_one_side(io, *args->only == "redis" ? redis_side : memory, shared, redis.pid(), *args->only,
                        args->runs != 0 ? args->runs : (quick ? 3 : 10));
  }

  // Untimed first pass of every viewer on both sides: the stores hold what the timed runs reuse.
  note(memory, memory.run(io, run_length));
  note(redis_side, redis_side.run(io, run_length));
  std::vector<double> memory_rates;
  std::vector<double> redis_rates;
  std::vector<double> memory_cpu;
  std::vector<double> redis_cpu;
  auto const commands_before = shared.stats().redis.commands;
  std::uint64_t redis_calls = 0;
  for (int r = 0; r < rounds; ++r) {
    side* first = r % 2 == 0 ? &redis_side : &memory;
    side* second = first == &memory ? &redis_side : &memory;
    auto const a = first->run(io, run_length);
    auto const b = second->run(io, run_length);
    note(*first, a);
    note(*second, b);
    for (auto const* res : {&a, &b}) {
      bool const is_memory = (res == &a ? first : second) == &memory;
      (is_memory ? memory_rates : redis_rates).push_back(res->rate());
      (is_memory ? memory_cpu : redis_cpu).push_back(res->cpu_us_per_request());
      redis_calls += is_memory ? 0 : res->ok + res->failed;
    }
  }

  double const memory_rate = bench::median(memory_rates);
  double const redis_rate = bench::median(redis_rates);
  std::printf("playback_redis_vs_memory: ratio=%.2f (redis %.0f calls/s, memory %.0f calls/s, medians of %d "
              "alternating runs; target >= 0.8)\n",
              redis_rate / memory_rate, redis_rate, memory_rate, rounds);

  auto const fleet_stats = shared.stats();
  auto const memory_metrics = memory.api.stats().metrics;
  auto const redis_metrics = redis_side.api.stats().metrics;
  auto const share = [](wandura::metrics_snapshot const& m) {
    auto const items = 3.0 * static_cast<double>(m.calls);
    return items == 0 ? 0.0 : 100.0 * static_cast<double>(m.cache_hits) / items;
  };
  std::printf("  CPU per call (this process: both clients and the in-process emulator; redis-server apart): redis "
              "%.1f us, memory %.1f us; %.2f Redis commands per call; items answered from the store: redis %.0f %%, "
              "memory %.0f %% (redis: %.0f %% by the near cache); Redis fallbacks %llu\n",
              bench::median(redis_cpu), bench::median(memory_cpu),
              redis_calls == 0 ? 0.0
                               : static_cast<double>(fleet_stats.redis.commands - commands_before) /
                                     static_cast<double>(redis_calls),
              share(redis_metrics), share(memory_metrics),
              redis_metrics.calls == 0 ? 0.0
                                       : 100.0 * static_cast<double>(fleet_stats.tickets.near_hits) /
                                             (3.0 * static_cast<double>(redis_metrics.calls)),
              static_cast<unsigned long long>(fleet_stats.fallbacks));
  std::printf("  replica of keys: %zu keys, %s, %llu overflows, %llu near misses answered absent\n",
              fleet_stats.tickets.known_keys, fleet_stats.tickets.known_keys_complete ? "complete" : "incomplete",
              static_cast<unsigned long long>(fleet_stats.tickets.known_keys_overflows),
              static_cast<unsigned long long>(fleet_stats.tickets.known_absent));
  bool ok = true;
  for (side const* s : {&memory, &redis_side}) {
    if (s->failed != 0) {
      std::printf("  %s: %llu calls failed, the first: %s\n", s == &memory ? "memory" : "redis",
                  static_cast<unsigned long long>(s->failed), s->first_failure.c_str());
      ok = false;
    }
  }
  if (fleet_stats.fallbacks != 0) {
    std::printf("  the Redis side answered %llu operations from local state: not all of its figure is Redis\n",
                static_cast<unsigned long long>(fleet_stats.fallbacks));
    ok = false;
  }
  return ok ? 0 : 1;
}
