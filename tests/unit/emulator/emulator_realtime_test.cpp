// The behaviours that exist only in real time: the ~0.5 s hold of play requests, slow executions and slow bodies,
// concurrent identical requests, and the command line. Assertions on time have generous margins (shared machine).
#include "wandura/emulator/emulator.hpp"

#include "http_test_client.hpp"

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace wandura::emulator;
using wandura::testing::batch_body;
using wandura::testing::http_result;
using wandura::testing::http_test_client;
using wandura::testing::play;
using namespace std::chrono_literals;

extern char** environ;

namespace {

/// `per_minute` tickets a minute, exact counters.
std::unique_ptr<server> start_slow_refill(std::uint32_t per_minute, std::chrono::milliseconds hold_window) {
  config cfg;
  cfg.overshoot = 0;
  cfg.orgs[0].limits.playback = per_minute;
  cfg.hold_window = hold_window;
  cfg.films = {film{"long-saga", "Long Saga", 1000, true},
               film{"the-heiress-returns", "The Heiress Returns", 12, true}};
  return server::start(cfg);
}

void spend_all(http_test_client& c, int n) {
  for (int ep = 1; ep <= n; ep += 3) {
    REQUIRE(
        c.tickets(batch_body({{"long-saga", ep, "play"}, {"long-saga", ep + 1, "play"}, {"long-saga", ep + 2, "play"}}))
            .status == 200);
  }
}

} // namespace

TEST_CASE("hold: a play arriving shortly before room returns is held on a timer, then granted") {
  // One ticket every 2 s; a 2.5 s hold window covers the wait for the next one even on a slow machine. (The real
  // window is ~0.5 s; scaled up here so that the test does not depend on the machine's speed.)
  auto emu = start_slow_refill(30, 2500ms);
  http_test_client c(emu->port());
  spend_all(c, 30);
  // Prefetch is never held: refused at once (a held one would wait ~2 s and then be granted).
  auto prefetch = c.tickets(batch_body({{"long-saga", 900, "prefetch"}}));
  CHECK(prefetch.status == 429);
  CHECK(prefetch.elapsed < 1500ms);
  // While one play is held, other connections are served (the hold is a timer, not a blocked thread).
  auto held = std::async(std::launch::async, [&] {
    http_test_client other(emu->port());
    return other.tickets(play(1));
  });
  std::this_thread::sleep_for(100ms);
  http_test_client side(emu->port());
  auto during = side.get("/v1/config");
  CHECK(during.status == 200);
  auto r = held.get();
  CHECK(r.status == 200);
  CHECK(r.json()["items"][0]["status"] == 200);
  CHECK(r.elapsed > 200ms);
  CHECK(emu->stats().held_play == 1);
  CHECK(emu->stats().tickets_counted == 31);
}

TEST_CASE("hold: a play that would wait longer than the hold window is refused with Retry-After") {
  auto emu = start_slow_refill(60, 500ms); // room returns up to 1 s later: beyond ~0.5 s
  http_test_client c(emu->port());
  spend_all(c, 60);
  // The held reservation of one play pushes the next one's wait past the window.
  int refused = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = c.tickets(play(1 + i));
    if (r.status == 429) {
      ++refused;
      CHECK(r.header("retry-after") == "1"); // a held play would have been granted, not refused
    }
  }
  CHECK(refused >= 2);
}

TEST_CASE("hold: stop drops a play held for room without a ticket") {
  // emulator.hpp, server: "Requests in flight when `stop` is called are abandoned (their connections are closed),
  // and a play held for room is dropped without a ticket." Two tickets a minute (one every 30 s) and a 60 s hold
  // window: the third play is held ~30 s. Stopping meanwhile closes its connection without an answer, promptly,
  // and issues nothing: no ticket counted, no held play granted.
  auto emu = start_slow_refill(2, 60'000ms);
  http_test_client c(emu->port());
  REQUIRE(c.tickets(batch_body({{"long-saga", 1, "play"}, {"long-saga", 2, "play"}})).status == 200);
  REQUIRE(emu->stats().tickets_counted == 2);
  auto held = std::async(std::launch::async, [&] {
    http_test_client other(emu->port(), 45s); // longer than the hold: a play not dropped gets its answer
    return other.tickets(play(1));
  });
  // The held request was read and decided once the server counted it (decided on the spot, then held on a timer).
  for (int i = 0; i < 500 && emu->stats().requests["playback"] < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(emu->stats().requests["playback"] == 2);
  std::this_thread::sleep_for(200ms);
  REQUIRE(held.wait_for(0s) == std::future_status::timeout); // still held
  auto const stopping = std::chrono::steady_clock::now();
  emu->stop();
  auto const r = held.get();
  CHECK(std::chrono::steady_clock::now() - stopping < 10s); // not answered at the end of the hold
  CHECK(r.status == 0);
  CHECK(r.closed_early);
  CHECK_FALSE(r.timed_out);
  CHECK(emu->stats().tickets_counted == 2);
  CHECK(emu->stats().held_play == 0);
}

TEST_CASE("faults: delay makes the execution slow, after the key is registered") {
  auto emu = server::start({});
  emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"delay","ms":400,"count":1}]})");
  http_test_client c(emu->port());
  auto slow = c.get("/v1/config");
  CHECK(slow.status == 200);
  CHECK(slow.elapsed >= 350ms);
  auto fast = c.get("/v1/config");
  CHECK(fast.elapsed < slow.elapsed);
}

TEST_CASE("faults: slow_body drips the real body at the given rate") {
  auto emu = server::start({});
  emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"slow_body","bytes_per_s":1000,"count":1}]})");
  http_test_client c(emu->port());
  auto r = c.tickets(play(1));
  REQUIRE(r.complete);
  CHECK(r.is_json());
  // About 500 bytes at 1000 bytes/s: at least ~0.3 s.
  REQUIRE(r.body.size() > 400);
  CHECK(r.elapsed >= 300ms);
}

TEST_CASE("idempotency: a repeat while the first is still running is 409 idempotency_in_progress") {
  auto emu = server::start({});
  // The delay fault makes the first execution slow after its key is registered.
  emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"delay","ms":1500,"count":1}]})");
  http_test_client slow(emu->port());
  slow.write_only("POST /v1/playback/tickets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-key\r\n"
                  "Idempotency-Key: busy\r\nContent-Length: " +
                  std::to_string(play(1).size()) + "\r\n\r\n" + play(1));
  http_test_client c(emu->port());
  wandura::testing::http_result busy;
  // Bounded: the first request is registered within a few ms; allow up to ~1 s for a loaded machine.
  for (int i = 0; i < 100; ++i) {
    busy = c.tickets(play(1), "test-key", "busy");
    if (busy.status == 409) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(busy.status == 409);
  CHECK(busy.json()["error_code"] == "idempotency_in_progress");
  CHECK(busy.header("retry-after") == "1");
  auto first = slow.read_response();
  CHECK(first.status == 200);
  CHECK(c.tickets(play(1), "test-key", "busy").header("idempotency-replayed") == "true");
  CHECK(emu->stats().tickets_counted == 1);
}

TEST_CASE("idempotency: 50 concurrent identical keyed requests execute once") {
  config cfg;
  cfg.threads = 2;
  auto emu = server::start(cfg);
  emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"delay","ms":300,"count":1}]})");
  auto body = batch_body({{"the-heiress-returns", 1, "play"},
                          {"the-heiress-returns", 2, "prefetch"},
                          {"the-heiress-returns", 3, "prefetch"}});
  std::vector<std::future<http_result>> results;
  for (int i = 0; i < 50; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      http_test_client c(emu->port());
      return c.tickets(body, "test-key", "fifty");
    }));
  }
  int executed = 0;
  int replayed = 0;
  int in_progress = 0;
  for (auto& f : results) {
    auto r = f.get();
    if (r.status == 409) {
      CHECK(r.json()["error_code"] == "idempotency_in_progress");
      ++in_progress;
    } else {
      REQUIRE(r.status == 200);
      (r.header("idempotency-replayed") == "true" ? replayed : executed) += 1;
    }
  }
  CHECK(executed == 1);
  CHECK(executed + replayed + in_progress == 50);
  auto s = emu->stats();
  CHECK(s.tickets_counted == 3);
  CHECK(s.idempotent_replays == static_cast<std::uint64_t>(replayed));
}

TEST_CASE("server: two io threads serve many concurrent connections consistently") {
  config cfg;
  cfg.threads = 2;
  cfg.overshoot = 0;
  cfg.orgs[0].limits.playback = 6000;
  auto emu = server::start(cfg);
  std::vector<std::future<int>> workers;
  for (int w = 0; w < 8; ++w) {
    workers.push_back(std::async(std::launch::async, [&, w] {
      http_test_client c(emu->port());
      int ok = 0;
      for (int i = 0; i < 100; ++i) {
        auto r = c.tickets(batch_body({{"the-heiress-returns", 1 + i % 12, "play"}}, "dev-" + std::to_string(w)));
        ok += r.status == 200 ? 1 : 0;
      }
      return ok;
    }));
  }
  int ok = 0;
  for (auto& f : workers) {
    ok += f.get();
  }
  CHECK(ok == 800);
  CHECK(emu->stats().tickets_counted == 800);
  CHECK(emu->stats().responses[200] == 800);
}

namespace {

/// Where the emulator's stdout goes: the pipe its first line is read from (with stderr), /dev/full (a full disk),
/// or nowhere (closed).
enum class stdout_to { pipe, full_disk, closed };

/// Runs the wandura-emulator binary with `args`, reads its first line (waiting 10 s at most), and stops it with
/// SIGTERM at scope exit.
class emulator_process {
public:
  explicit emulator_process(std::vector<std::string> args, stdout_to where = stdout_to::pipe) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (where == stdout_to::pipe) {
      posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    } else if (where == stdout_to::full_disk) {
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/full", O_WRONLY, 0);
    } else {
      posix_spawn_file_actions_addclose(&actions, STDOUT_FILENO);
    }
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    args.insert(args.begin(), WANDURA_EMULATOR_BINARY);
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    REQUIRE(posix_spawn(&pid_, WANDURA_EMULATOR_BINARY, &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    pollfd ready{out[0], POLLIN, 0};
    bool const readable = poll(&ready, 1, 10'000) == 1; // a program that never writes must not hang the test
    out_ = fdopen(out[0], "r");
    char line[512] = {};
    if (readable && std::fgets(line, sizeof line, out_) != nullptr) {
      first_line_ = line;
    }
  }
  ~emulator_process() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (out_ != nullptr) {
      std::fclose(out_);
    }
  }
  /// Waits for the process to exit (it must already be exiting) and returns its exit code.
  int wait_exit() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void terminate() { kill(pid_, SIGTERM); }
  [[nodiscard]] std::string const& first_line() const { return first_line_; }
  [[nodiscard]] std::uint16_t port() const {
    auto colon = first_line_.rfind(':');
    return static_cast<std::uint16_t>(std::stoi(first_line_.substr(colon + 1)));
  }

private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string first_line_;
};

} // namespace

TEST_CASE("command line: --port 0 prints the chosen port once ready and serves until SIGTERM") {
  emulator_process p({"--port", "0", "--seed", "3"});
  REQUIRE(p.first_line().rfind("listening on http://127.0.0.1:", 0) == 0);
  http_test_client c(p.port());
  CHECK(c.tickets(play(1)).status == 200);
  CHECK(c.get("/v1/catalog/films/the-heiress-returns").json()["episodes"] == 12);
  p.terminate();
  CHECK(p.wait_exit() == 0);
}

TEST_CASE("command line: --config and --manual-clock are applied") {
  auto path = std::string("emulator_cli_config_test.json");
  {
    std::ofstream f(path);
    f << R"({"orgs":[{"id":"org_cli","keys":["cli-key"],"limits":{"config":2}}],
             "films":[{"film_ref":"tiny","episodes":1}],
             "faults":[{"path":"/v1/videos","kind":"status","status":503,"count":1}]})";
  }
  emulator_process p({"--port", "0", "--config", path, "--manual-clock"});
  REQUIRE(p.first_line().rfind("listening on ", 0) == 0);
  http_test_client c(p.port());
  CHECK(c.get("/v1/config", "test-key").status == 401);
  CHECK(c.get("/v1/config", "cli-key").json()["org_id"] == "org_cli");
  CHECK(c.get("/v1/catalog/films/the-heiress-returns", "cli-key").status == 404);
  CHECK(c.get("/v1/catalog/films/tiny", "cli-key").json()["episodes"] == 1);
  CHECK(c.get("/v1/videos", "cli-key").status == 503);
  CHECK(c.request("POST", "/_emulator/clock", R"({"advance_ms":1000})").status == 200);
  std::remove(path.c_str());
}

TEST_CASE("command line: --version prints the project's version and exits 0") {
  emulator_process p({"--version"});
  CHECK(p.first_line() == std::string("wandura ") + WANDURA_VERSION + "\n");
  CHECK(p.wait_exit() == 0);
}

TEST_CASE("command line: bad arguments exit with status 2 and a message") {
  emulator_process missing_port({"--seed", "1"});
  CHECK_THAT(missing_port.first_line(), Catch::Contains("--port"));
  CHECK(missing_port.wait_exit() == 2);
  emulator_process bad_config({"--port", "0", "--config", "/nonexistent/emulator.json"});
  CHECK_THAT(bad_config.first_line(),
             Catch::Contains("--config: /nonexistent/emulator.json: No such file or directory"));
  CHECK(bad_config.wait_exit() == 2);
  emulator_process directory({"--port", "0", "--config", "/tmp"});
  CHECK_THAT(directory.first_line(), Catch::Contains("--config: /tmp: Is a directory"));
  CHECK(directory.wait_exit() == 2);
  emulator_process endless({"--port", "0", "--config", "/dev/zero"}); // read up to its bound, not for ever
  CHECK_THAT(endless.first_line(), Catch::Contains("--config: /dev/zero: over 16 MiB"));
  CHECK(endless.wait_exit() == 2);
  emulator_process bad_port({"--port", "70000"});
  CHECK(bad_port.wait_exit() == 2);
}

TEST_CASE("command line: a stdout that cannot take the address line ends the run, exit 1, the reason on stderr") {
  // A script waits for "listening on ..." on stdout: a server nobody learns the port of must not go on serving.
  for (auto const& [where, why] : {std::pair{stdout_to::full_disk, "No space left on device"},
                                   std::pair{stdout_to::closed, "Bad file descriptor"}}) {
    CAPTURE(why);
    emulator_process p({"--port", "0"}, where);
    CHECK(p.first_line() == std::string("wandura-emulator: cannot write the output to stdout: ") + why + "\n");
    if (p.first_line().find("cannot write") == std::string::npos) { // still serving: stop it, the check below fails
      p.terminate();
    }
    CHECK(p.wait_exit() == 1);
  }
}

TEST_CASE("command line: what the user typed is quoted with its control and non-ASCII bytes escaped") {
  // A terminal escape (retitle the window) and a byte that is not UTF-8, in an unknown option and in a value.
  emulator_process unknown({"--port", "0", "--x\x1b]0;title\x07\xff"});
  CHECK(unknown.first_line() == "wandura-emulator: unexpected argument: --x\\x1b]0;title\\x07\\xff\n");
  CHECK(unknown.wait_exit() == 2);
  emulator_process host({"--port", "0", "--host", "\x1b[2J\xff"});
  CHECK(host.first_line() == "wandura-emulator: host: \"\\x1b[2J\\xff\" is not an IP address\n");
  if (host.first_line().rfind("listening", 0) == 0) {
    host.terminate();
  }
  CHECK(host.wait_exit() == 2);
}

TEST_CASE("command line: a number out of its option's range exits with status 2, naming the range") {
  for (auto const* seed : {"18446744073709551616", "99999999999999999999999"}) {
    CAPTURE(seed);
    emulator_process p({"--port", "0", "--seed", seed});
    CHECK_THAT(p.first_line(), Catch::Contains("--seed: expected a whole number from 0 to 18446744073709551615"));
    if (p.first_line().rfind("listening", 0) == 0) { // accepted: stop it, and the status check below fails
      p.terminate();
    }
    CHECK(p.wait_exit() == 2);
  }
  emulator_process threads({"--port", "0", "--threads", "4294967297"});
  CHECK_THAT(threads.first_line(), Catch::Contains("--threads: expected a whole number from 1 to 256"));
  if (threads.first_line().rfind("listening", 0) == 0) {
    threads.terminate();
  }
  CHECK(threads.wait_exit() == 2);
}

TEST_CASE("server: a connection idle longer than idle_timeout is closed, others are unaffected") {
  config cfg;
  cfg.idle_timeout = 300ms;
  auto emu = server::start(cfg);
  http_test_client idle(emu->port());
  REQUIRE(idle.get("/v1/config").status == 200);
  REQUIRE(idle.connected());
  // Bounded wait for the server to close the idle connection (the watchdog checks every idle_timeout).
  auto start = std::chrono::steady_clock::now();
  auto closed = idle.read_response(); // blocks until the server closes (or the 10 s receive timeout)
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(closed.status == 0);
  CHECK(closed.closed_early);
  CHECK(waited >= 150ms);
  CHECK(waited < 5s);
  http_test_client fresh(emu->port());
  CHECK(fresh.get("/v1/config").status == 200);
}

TEST_CASE("server: a request head dripped a byte at a time is closed idle_timeout after its first byte") {
  // Each byte is traffic, so the idle timer alone kept such a connection open for as long as the peer dripped.
  config cfg;
  cfg.idle_timeout = 300ms;
  auto emu = server::start(cfg);
  asio::io_context io;
  asio::ip::tcp::socket peer(io);
  peer.connect({asio::ip::make_address("127.0.0.1"), emu->port()});
  std::string const head = "GET /v1/config HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(200, 'a');
  auto const start = std::chrono::steady_clock::now();
  bool closed = false;
  for (std::size_t i = 0; i < head.size() && std::chrono::steady_clock::now() - start < 5s; ++i) {
    // The server sends nothing before a request is complete: readable means closed.
    pollfd pfd{peer.native_handle(), POLLIN, 0};
    if (::poll(&pfd, 1, 50) > 0) {
      closed = true;
      break;
    }
    std::error_code ec;
    asio::write(peer, asio::buffer(head.data() + i, 1), ec);
  }
  auto const lasted = std::chrono::steady_clock::now() - start;
  CHECK(closed);
  CHECK(lasted >= 250ms);
  CHECK(lasted < 3s);
  // A request that completes in time on a kept-alive connection is answered, the next one too.
  http_test_client c(emu->port());
  CHECK(c.get("/v1/config").status == 200);
  std::this_thread::sleep_for(200ms);
  CHECK(c.get("/v1/config").status == 200);
}

TEST_CASE("server: a peer that stops reading its reply is idle, and closed after idle_timeout") {
  // Only the service's work on a request keeps a connection open past the idle timeout; writing its reply does
  // not: a 512 MiB reply to a peer that reads nothing ends at the timeout, not when the peer goes away.
  config cfg;
  cfg.idle_timeout = 300ms;
  auto emu = server::start(cfg);
  emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"huge","bytes":536870912}]})");
  asio::io_context io;
  asio::ip::tcp::socket peer(io);
  peer.connect({asio::ip::make_address("127.0.0.1"), emu->port()});
  std::string const request = "GET /v1/config HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-key\r\n\r\n";
  asio::write(peer, asio::buffer(request));
  std::this_thread::sleep_for(1500ms); // reads nothing: the server's writes stall once the socket buffers are full
  std::size_t received = 0;
  std::array<char, 65536> buffer{};
  std::error_code ec;
  auto const until = std::chrono::steady_clock::now() + 20s;
  while (!ec && std::chrono::steady_clock::now() < until) {
    received += peer.read_some(asio::buffer(buffer), ec);
  }
  CHECK(ec == asio::error::eof);                   // the server closed it
  CHECK(received < std::size_t{64} * 1024 * 1024); // long before the whole reply
}

TEST_CASE("server: a request worked on for longer than idle_timeout (a delay fault) is answered, not dropped") {
  config cfg;
  cfg.idle_timeout = 300ms;
  auto emu = server::start(cfg);
  emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"delay","ms":1200}]})");
  http_test_client c(emu->port());
  auto r = c.get("/v1/config");
  CHECK(r.status == 200);
  CHECK(r.complete);
  CHECK(r.elapsed >= 1000ms);
  CHECK(emu->stats().responses[200] == 1);
  // Idle again once answered: closed after the timeout as before.
  auto closed = c.read_response();
  CHECK(closed.status == 0);
  CHECK(closed.closed_early);
}

TEST_CASE("server: a peer that closes while its request is delayed has its socket closed at once, not when the "
          "delay ends") {
  auto const open_descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{});
  };
  auto emu = server::start({});
  emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"delay","ms":600000}]})");
  asio::io_context io;
  { asio::ip::tcp::socket warm(io, asio::ip::tcp::v4()); } // the context's own descriptors, made with its first socket
  auto const before = open_descriptors();
  std::string const request = "GET /v1/config HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-key\r\n\r\n";
  for (int i = 0; i < 20; ++i) {
    asio::ip::tcp::socket peer(io);
    peer.connect({asio::ip::make_address("127.0.0.1"), emu->port()});
    asio::write(peer, asio::buffer(request));
  } // each closed here, its request still delayed
  auto const until = std::chrono::steady_clock::now() + 5s;
  // Every request read first: a connection not yet accepted holds no descriptor here, and would open one after.
  while (emu->stats().faults_injected < 20 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(emu->stats().faults_injected == 20);
  while (open_descriptors() > before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(open_descriptors() <= before); // the 600 s delay would have held 20 sockets

  // A peer that waits is answered when the delay ends, a request it pipelined meanwhile too: its bytes, unread in
  // the socket while the first is delayed, are what the watch's peek then sees, and the connection stays.
  emu->clear_faults();
  emu->install_faults(R"({"rules":[{"path":"/v1/config","kind":"delay","ms":900,"count":1}]})");
  http_test_client waiting(emu->port());
  waiting.write_only(request);
  std::this_thread::sleep_for(300ms); // the first is being delayed
  waiting.write_only(request);
  auto const first = waiting.read_response();
  auto const second = waiting.read_response();
  CHECK(first.status == 200);
  CHECK(first.complete);
  CHECK(second.status == 200);
  CHECK(second.complete);
}

TEST_CASE("command line: --help and --version to a stdout that cannot take them exit 1, the reason on stderr") {
  // README, exit statuses: 1 when the output could not be written, in every program of the project.
  for (auto const& flag : {"--help", "--version"}) {
    for (auto const& [where, why] : {std::pair{stdout_to::full_disk, "No space left on device"},
                                     std::pair{stdout_to::closed, "Bad file descriptor"}}) {
      CAPTURE(flag, why);
      emulator_process p({flag}, where);
      CHECK(p.first_line() == std::string("wandura-emulator: cannot write the output to stdout: ") + why + "\n");
      CHECK(p.wait_exit() == 1);
    }
  }
  emulator_process fine({"--version"});
  CHECK(fine.first_line().starts_with("wandura "));
  CHECK(fine.wait_exit() == 0);
}
