// wandura-emulator: the Wandura API emulator as a command (SPEC §4).
//
//   wandura-emulator --port 8787 [--host 127.0.0.1] [--config FILE.json] [--seed N] [--manual-clock] [--threads N]
//
// Prints `listening on http://HOST:PORT` once it accepts connections, then serves until SIGINT or SIGTERM.
#include "wandura/emulator/emulator.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

constexpr char const* usage =
    "usage: wandura-emulator --port PORT [--host ADDRESS] [--config FILE.json] [--seed N] [--manual-clock]\n"
    "                        [--threads N]\n"
    "  --port PORT      port to listen on; 0 picks a free one (printed)\n"
    "  --host ADDRESS   address to listen on (default 127.0.0.1)\n"
    "  --config FILE    JSON configuration: orgs, films, ticket_ttl_s, faults (SPEC section 4)\n"
    "  --seed N         seed every random choice (ticket ids, fault probabilities)\n"
    "  --manual-clock   the clock moves only on POST /_emulator/clock {\"advance_ms\":N}\n"
    "  --threads N      io threads (default 1)\n";

std::uint64_t parse_number(std::string const& flag, std::string const& text, std::uint64_t max) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used, 10);
  } catch (std::exception const&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-' || v > max) {
    throw wandura::emulator::config_error(flag + ": expected a number from 0 to " + std::to_string(max) + ", got \"" +
                                          text + "\"");
  }
  return v;
}

} // namespace

int main(int argc, char** argv) {
  using namespace wandura::emulator;
  try {
    config cfg;
    std::optional<std::string> host;
    std::optional<std::uint16_t> port;
    std::optional<std::uint64_t> seed;
    std::optional<unsigned> threads;
    bool manual_clock = false;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) {
          throw config_error(arg + ": missing value");
        }
        return argv[++i];
      };
      if (arg == "--help" || arg == "-h") {
        std::cout << usage;
        return 0;
      } else if (arg == "--port") {
        port = static_cast<std::uint16_t>(parse_number(arg, value(), 65535));
      } else if (arg == "--host") {
        host = value();
      } else if (arg == "--config") {
        auto path = value();
        std::ifstream in(path, std::ios::binary);
        if (!in) {
          throw config_error("--config: cannot read " + path);
        }
        std::stringstream text;
        text << in.rdbuf();
        cfg = parse_config(text.str());
      } else if (arg == "--seed") {
        seed = parse_number(arg, value(), UINT64_MAX);
      } else if (arg == "--manual-clock") {
        manual_clock = true;
      } else if (arg == "--threads") {
        threads = static_cast<unsigned>(parse_number(arg, value(), 256));
      } else {
        throw config_error("unknown argument \"" + arg + "\"");
      }
    }
    if (!port) {
      throw config_error("--port is required (0 picks a free port)");
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

    auto emu = server::start(cfg);
    std::printf("listening on %s\n", emu->base_url().c_str());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    emu->stop();
    return 0;
  } catch (config_error const& e) {
    std::fprintf(stderr, "wandura-emulator: %s\n%s", e.what(), usage);
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "wandura-emulator: %s\n", e.what());
    return 1;
  }
}
