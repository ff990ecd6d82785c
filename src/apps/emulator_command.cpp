// `wandura emulator`: the Wandura API emulator as a server, with the flags of the `wandura-emulator` binary
// (SPEC §4). Prints `listening on http://HOST:PORT` once it accepts connections, then serves until SIGINT/SIGTERM.
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "wandura/emulator/emulator.hpp"

namespace wandura::cli {

namespace {

constexpr char const* emulator_usage =
    R"(usage: wandura emulator --port PORT [--host ADDRESS] [--config FILE.json] [--seed N] [--manual-clock]
                        [--threads N]

Runs the Wandura API emulator (SPEC section 4): the playback API with rate limits, prefetch shedding, play holds,
ticket reuse, idempotency and scripted faults, plus the admin API under /_emulator/.

  --port PORT      port to listen on; 0 picks a free one (printed)
  --host ADDRESS   address to listen on (default 127.0.0.1)
  --config FILE    JSON configuration: orgs, films, ticket_ttl_s, faults (SPEC section 4)
  --seed N         seed every random choice (ticket ids, fault probabilities)
  --manual-clock   the clock moves only on POST /_emulator/clock {"advance_ms":N}
  --threads N      io threads (default 1)

Prints "listening on http://HOST:PORT" once ready and serves until SIGINT or SIGTERM. Default key: test-key.
Exit status: 0 after a stop signal, 1 when the server cannot start, 2 for a usage or configuration error.
)";

} // namespace

int run_emulator(std::span<char* const> args) {
  using namespace wandura::emulator;
  config cfg;
  std::optional<std::string> host;
  std::optional<std::uint16_t> port;
  std::optional<std::uint64_t> seed;
  std::optional<unsigned> threads;
  bool manual_clock = false;
  arg_reader r(args);
  while (r.next()) {
    auto const& f = r.flag();
    if (f == "--help") {
      std::fputs(emulator_usage, stdout);
      return exit_ok;
    } else if (f == "--port") {
      port = static_cast<std::uint16_t>(r.integer(0, 65535));
    } else if (f == "--host") {
      host = r.value();
    } else if (f == "--config") {
      auto path = r.value();
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        throw usage_error("--config: cannot read " + path);
      }
      std::stringstream text;
      text << in.rdbuf();
      try {
        cfg = parse_config(text.str());
      } catch (config_error const& e) {
        throw usage_error("--config: " + path + ": " + e.what());
      }
    } else if (f == "--seed") {
      seed = static_cast<std::uint64_t>(r.integer(0, INT64_MAX));
    } else if (f == "--manual-clock") {
      manual_clock = true;
    } else if (f == "--threads") {
      threads = static_cast<unsigned>(r.integer(1, 256));
    } else {
      r.unknown();
    }
  }
  if (!port) {
    throw usage_error("--port is required (0 picks a free port)");
  }
  // Command-line flags win over the configuration file.
  cfg.port = *port;
  if (host) {
    cfg.host = *host;
  }
  if (seed) {
    cfg.seed = seed;
  }
  if (threads) {
    cfg.threads = std::max(1u, *threads);
  }
  cfg.manual_clock = cfg.manual_clock || manual_clock;

  // Block the stop signals before the server's threads start, so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<server> emu;
  try {
    emu = server::start(cfg);
  } catch (config_error const& e) {
    throw usage_error(e.what());
  }
  std::printf("listening on %s\n", emu->base_url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  emu->stop();
  return exit_ok;
}

} // namespace wandura::cli
