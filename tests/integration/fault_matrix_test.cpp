// The fault matrix: every emulator fault kind (SPEC §4) x every endpoint x (write with an automatic idempotency
// key, write with the caller's key, write with keys off, read), through the public `wandura::client` against the
// in-process emulator over real loopback sockets. Each cell asserts the outcome class, the attempts made and, for
// writes, that the emulator counted the ticket once (and replayed it when a retry met a request that had executed).
//
// Every fault hits exactly one request (`count: 1`), so a retried call meets the fault once and then the real
// server. The policy is short (3 attempts, no backoff, 3 s attempts; ticket requests never under 5 s): the whole
// matrix runs in seconds, bounded by the 1 s `retry_after` of the stale-database ticket rows.
//
// A truncated or garbage 2xx body is retried when the request is safe to resend (a keyed write replays, counted once;
// a read), as a connection reset is; a response that ends after its status line is a retryable truncated response
// (a test case of its own: no emulator fault makes one). One item that cannot be read fails alone and is not asked
// again, whatever the keys (its ticket was issued and counted); a read has no items and gets its answer intact.
#include "wandura/playback/client.hpp"

#include "wandura/emulator/emulator.hpp"
#include "wandura/error.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/use_future.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <string_view>
#include <thread>

using namespace std::chrono_literals;

namespace {

enum class mode { auto_key, caller_key, keys_off, read };
constexpr std::array<mode, 4> all_modes{mode::auto_key, mode::caller_key, mode::keys_off, mode::read};

std::string_view to_string(mode m) {
  switch (m) {
  case mode::auto_key: return "write with automatic key";
  case mode::caller_key: return "write with caller key";
  case mode::keys_off: return "write with keys off";
  case mode::read: return "read";
  }
  return "?";
}

/// The endpoints of SPEC §1, the ticket batch first; each read endpoint is its own column entry.
enum class endpoint { tickets, config, film, videos, video, creatives };
constexpr std::array<endpoint, 5> read_endpoints{endpoint::config, endpoint::film, endpoint::videos, endpoint::video,
                                                 endpoint::creatives};

std::string_view path_of(endpoint e) {
  switch (e) {
  case endpoint::tickets: return "/v1/playback/tickets";
  case endpoint::config: return "/v1/config";
  case endpoint::film: return "/v1/catalog/films/the-heiress-returns";
  case endpoint::videos: return "/v1/videos";
  case endpoint::video: return "/v1/videos/trailer-heiress";
  case endpoint::creatives: return "/v1/creatives";
  }
  return "?";
}

/// What a call ended with: "ok" (value returned; for a batch, its play item granted), "item:<outcome>" (the batch
/// came back, its play item not granted), or "error:<errc>" (the call threw).
struct expected {
  std::string_view outcome;
  int attempts = 1;
};

/// One fault kind with its expectation in each mode. `executes`: the emulator executes (and counts) the request
/// before damaging its answer, so a write's ticket is counted even when the client never sees it.
struct row {
  std::string_view name;
  std::string_view rule; ///< The rule's fields besides `path` and `count`.
  bool executes;
  expected auto_key;
  expected caller_key;
  expected keys_off;
  expected read;
  /// Reads of the film (catalog) when they differ from `read` (stale_db affects the catalogue only).
  std::optional<expected> film_read = std::nullopt;

  [[nodiscard]] expected in(mode m, endpoint e) const {
    switch (m) {
    case mode::auto_key: return auto_key;
    case mode::caller_key: return caller_key;
    case mode::keys_off: return keys_off;
    case mode::read: return e == endpoint::film && film_read ? *film_read : read;
    }
    return read;
  }
};

constexpr expected ok1{"ok", 1};
constexpr expected ok2{"ok", 2};

// clang-format off
/// Every fault kind and its outcome (seed 000 and 004, SPEC §3).
std::array<row, 17> const matrix{{
  // name                rule                                       executes  auto key  caller key  keys off                      read
  {"status 429",         R"("kind":"status","status":429)",          false,    ok2,      ok2,        {"item:rate_limited", 1},     ok2},
  {"status 500",         R"("kind":"status","status":500)",          false,    ok2,      ok2,        {"item:unavailable", 1},      ok2},
  {"status 502",         R"("kind":"status","status":502)",          false,    ok2,      ok2,        {"item:unavailable", 1},      ok2},
  {"status 503",         R"("kind":"status","status":503)",          false,    ok2,      ok2,        {"item:unavailable", 1},      ok2},
  {"status 400",         R"("kind":"status","status":400)",          false,    {"item:failed", 1}, {"item:failed", 1}, {"item:failed", 1}, {"error:http_error", 1}},
  {"status 401",         R"("kind":"status","status":401)",          false,    {"error:unauthorized", 1}, {"error:unauthorized", 1}, {"error:unauthorized", 1}, {"error:unauthorized", 1}},
  {"status 404",         R"("kind":"status","status":404)",          false,    {"item:failed", 1}, {"item:failed", 1}, {"item:failed", 1}, {"error:http_error", 1}},
  {"status 409",         R"("kind":"status","status":409)",          false,    {"item:failed", 1}, {"item:failed", 1}, {"item:failed", 1}, {"error:http_error", 1}},
  {"delay",              R"("kind":"delay","ms":150)",               true,     ok1,      ok1,        ok1,                          ok1},
  {"reset",              R"("kind":"reset")",                        true,     ok2,      ok2,        {"error:connection_reset", 1}, ok2},
  {"drop_after_read",    R"("kind":"drop_after_read")",              false,    ok2,      ok2,        {"error:connection_reset", 1}, ok2},
  {"huge",               R"("kind":"huge","bytes":262144)",          true,     {"error:response_too_large", 1}, {"error:response_too_large", 1}, {"error:response_too_large", 1}, {"error:response_too_large", 1}},
  {"slow_body",          R"("kind":"slow_body","bytes_per_s":20000)", true,    ok1,      ok1,        ok1,                          ok1},
  {"stale_db",           R"("kind":"stale_db")",                     false,    ok2,      ok2,        {"item:unavailable", 1},      ok1, ok2},
  {"truncate",           R"("kind":"truncate")",                     true,     ok2,      ok2,        {"error:invalid_response", 1}, ok2},
  {"garbage",            R"("kind":"garbage")",                      true,     ok2,      ok2,        {"error:invalid_response", 1}, ok2},
  {"unreadable_item",    R"("kind":"unreadable_item")",              true,     {"item:failed", 1}, {"item:failed", 1}, {"item:failed", 1}, ok1},
}};
// clang-format on

/// One cell's world: a fresh emulator (manual clock, so that rate limits never interfere) and a fresh client with
/// the short policy, whose io_context runs on one thread.
class cell {
public:
  explicit cell(bool keys_on) {
    wandura::emulator::config cfg;
    cfg.manual_clock = true;
    cfg.seed = 11;
    emu_ = wandura::emulator::server::start(std::move(cfg));

    wandura::client_options options;
    options.base_url = emu_->base_url();
    options.api_key = "test-key";
    options.reuse_tickets = false;
    options.transport.max_response_bytes = std::size_t{64} * 1024; // the huge fault sends 256 KiB of padding
    auto& retry = options.retry;
    retry.policy.max_retries = 2;
    retry.policy.initial_delay = 1ms;
    retry.policy.max_delay = 5ms;
    retry.policy.attempt_timeout = 3s;
    retry.policy.total_timeout = 20s;
    retry.auto_idempotency_keys = keys_on;
    retry.random = [] { return 0.0; }; // no jitter: a Retry-After wait is exactly the server's
    retry.on_retry = [this](wandura::retry_event const&) { retries_.fetch_add(1); };
    api_ = std::make_unique<wandura::client>(io_.get_executor(), std::move(options));
  }

  void install(row const& r, endpoint e) {
    std::string rules = R"({"rules":[{"path":")" + std::string(path_of(e)) + R"(","count":1,)";
    rules.append(r.rule).append("}]}");
    emu_->install_faults(rules);
  }

  /// Runs the call of `m` on `e` and says how it ended (see `expected`).
  std::string call(mode m, endpoint e) {
    try {
      if (e == endpoint::tickets) {
        return ticket_call(m);
      }
      read_call(e);
      return "ok";
    } catch (wandura::error const& failure) {
      return "error:" + name_of(failure.code());
    } catch (std::system_error const& failure) {
      return "error:" + failure.code().message();
    }
  }

  [[nodiscard]] int attempts() const { return retries_.load() + 1; }
  [[nodiscard]] wandura::emulator::stats_snapshot stats() const { return emu_->stats(); }

private:
  template <typename T> T wait(asio::awaitable<T> op) {
    auto done = asio::co_spawn(io_, std::move(op), asio::use_future);
    io_.restart();
    std::thread runner([this] { io_.run(); });
    auto const status = done.wait_for(30s);
    if (status != std::future_status::ready) {
      io_.stop();
    }
    runner.join();
    REQUIRE(status == std::future_status::ready);
    return done.get();
  }

  std::string ticket_call(mode m) {
    wandura::ticket_batch batch;
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    batch.union_info = "device-1";
    batch.drm_kek = "kek-1";
    wandura::call_options per_call;
    if (m == mode::caller_key) {
      per_call.idempotency_key = "order-4711";
    }
    auto result = wait(api_->issue_tickets(std::move(batch), std::move(per_call)));
    REQUIRE(result.items.size() == 1);
    auto const& play = result.items.front();
    if (play.outcome == wandura::item_outcome::granted) {
      return "ok";
    }
    return "item:" + std::string(wandura::to_string(play.outcome));
  }

  void read_call(endpoint e) {
    switch (e) {
    case endpoint::config: (void)wait(api_->get_config()); break;
    case endpoint::film: (void)wait(api_->get_film("the-heiress-returns")); break;
    case endpoint::videos: (void)wait(api_->list_videos()); break;
    case endpoint::video: (void)wait(api_->get_video("trailer-heiress")); break;
    case endpoint::creatives: (void)wait(api_->list_creatives()); break;
    case endpoint::tickets: FAIL("not a read"); break;
    }
  }

  static std::string name_of(std::error_code code) {
    if (code.category() == wandura::error_category()) {
      return std::string(wandura::to_string(static_cast<wandura::errc>(code.value())));
    }
    return code.message();
  }

  std::unique_ptr<wandura::emulator::server> emu_;
  asio::io_context io_;
  std::unique_ptr<wandura::client> api_;
  std::atomic<int> retries_{0};
};

/// Runs one cell and checks it against its row.
void check_cell(row const& r, mode m, endpoint e) {
  cell world(m != mode::keys_off);
  world.install(r, e);
  std::string const outcome = world.call(m, e);
  expected const want = r.in(m, e);
  CHECK(outcome == want.outcome);
  CHECK(world.attempts() == want.attempts);
  auto const stats = world.stats();
  CHECK(stats.faults_injected == 1);
  if (e != endpoint::tickets) {
    return;
  }
  // A write's ticket is counted once: when the client got it, or when the emulator executed the damaged request;
  // a retry that met a request which had executed is a replay, never a second execution.
  bool const granted = outcome == "ok";
  CHECK(stats.tickets_counted == ((granted || r.executes) ? 1U : 0U));
  bool const replay_expected = r.executes && want.attempts > 1;
  CHECK(stats.idempotent_replays == (replay_expected ? 1U : 0U));
}

template <std::size_t N> void run_matrix(std::array<row, N> const& rows) {
  for (row const& r : rows) {
    for (mode m : all_modes) {
      if (m != mode::read) {
        DYNAMIC_SECTION(r.name << " | tickets | " << to_string(m)) {
          check_cell(r, m, endpoint::tickets);
        }
        continue;
      }
      for (endpoint e : read_endpoints) {
        DYNAMIC_SECTION(r.name << " | " << path_of(e) << " | " << to_string(m)) {
          check_cell(r, m, e);
        }
      }
    }
  }
}

} // namespace

TEST_CASE("fault matrix: every fault kind on every endpoint, in every idempotency mode") {
  run_matrix(matrix);
}

namespace {

/// A loopback server that answers the first request with a status line only and closes, and every later one with
/// `200` and `body`: the "HTTP/1.1 200\r\n and close" reproduction of the issue, which no emulator fault makes.
/// It runs on its own thread; destroying it stops it wherever its connections are.
class status_line_only_server {
public:
  explicit status_line_only_server(std::string body)
      : body_(std::move(body)), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~status_line_only_server() {
    io_.stop();
    thread_.join();
  }
  status_line_only_server(status_line_only_server const&) = delete;
  status_line_only_server& operator=(status_line_only_server const&) = delete;

  [[nodiscard]] std::string base_url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  [[nodiscard]] int requests() const { return requests_.load(); }

private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
      asio::co_spawn(io_, answer(std::move(socket)), asio::detached);
    }
  }

  /// Every request of one keep-alive connection, until the client closes it.
  asio::awaitable<void> answer(asio::ip::tcp::socket socket) {
    std::string in;
    for (;;) {
      std::size_t const head =
          co_await asio::async_read_until(socket, asio::dynamic_buffer(in), "\r\n\r\n", asio::use_awaitable);
      std::size_t length = 0;
      if (auto at = in.find("Content-Length: "); at != std::string::npos && at < head) {
        length = std::stoul(in.substr(at + 16));
      }
      if (in.size() < head + length) {
        co_await asio::async_read(socket, asio::dynamic_buffer(in), asio::transfer_exactly(head + length - in.size()),
                                  asio::use_awaitable);
      }
      in.erase(0, head + length);
      if (requests_.fetch_add(1) == 0) {
        co_await asio::async_write(socket, asio::buffer(std::string_view("HTTP/1.1 200\r\n")), asio::use_awaitable);
        co_return; // closes
      }
      std::string const reply =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body_.size()) +
          "\r\n\r\n" + body_;
      co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
    }
  }

  std::string body_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

wandura::client_options short_options(std::string base_url, std::atomic<int>& retries) {
  wandura::client_options options;
  options.base_url = std::move(base_url);
  options.api_key = "test-key";
  options.reuse_tickets = false;
  options.retry.policy.max_retries = 2;
  options.retry.policy.initial_delay = 1ms;
  options.retry.policy.max_delay = 5ms;
  options.retry.random = [] { return 0.0; };
  options.retry.on_retry = [&retries](wandura::retry_event const&) { retries.fetch_add(1); };
  return options;
}

template <typename T> T run_on(asio::io_context& io, asio::awaitable<T> op) {
  auto done = asio::co_spawn(io, std::move(op), asio::use_future);
  io.restart();
  std::thread runner([&io] { io.run(); });
  auto const status = done.wait_for(30s);
  if (status != std::future_status::ready) {
    io.stop();
  }
  runner.join();
  REQUIRE(status == std::future_status::ready);
  return done.get();
}

} // namespace

TEST_CASE("fault matrix: a response that ends after its status line is a retryable truncated response") {
  std::atomic<int> retries{0};
  asio::io_context io;
  SECTION("read") {
    status_line_only_server server(R"({"org_id":"org_demo","limits":{"playback":6000}})");
    wandura::client api(io.get_executor(), short_options(server.base_url(), retries));
    CHECK_NOTHROW(run_on(io, api.get_config()));
    CHECK(retries.load() + 1 == 2);
    CHECK(server.requests() == 2);
  }
  SECTION("write with automatic key") {
    status_line_only_server server(
        R"({"request_id":"req_1","items":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play",)"
        R"("status":200,"ticket":{"ticket_id":"tkt_1","expires_at":"2099-01-01T00:00:00Z"}}]})");
    wandura::client api(io.get_executor(), short_options(server.base_url(), retries));
    wandura::ticket_batch batch;
    batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    batch.union_info = "device-1";
    batch.drm_kek = "kek-1";
    wandura::ticket_batch_result result;
    CHECK_NOTHROW(result = run_on(io, api.issue_tickets(std::move(batch))));
    CHECK(retries.load() + 1 == 2);
    CHECK(server.requests() == 2);
  }
}
