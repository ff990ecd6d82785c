#include "wandura/emulator/command_line.hpp"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "wandura/emulator/emulator.hpp"

namespace wandura::emulator {
namespace {

std::uint64_t parse_number(std::string const& flag, std::string const& text, std::uint64_t min, std::uint64_t max) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used, 10);
  } catch (std::exception const&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-' || v < min || v > max) {
    throw config_error(flag + ": expected a number from " + std::to_string(min) + " to " + std::to_string(max) +
                       ", got \"" + text + "\"");
  }
  return v;
}

} // namespace

std::string usage(std::string_view program) {
  std::string const name(program);
  std::string const pad(name.size(), ' ');
  return "usage: " + name + " --port PORT [--host ADDRESS] [--config FILE.json] [--seed N] [--manual-clock]\n" +
         "       " + pad + " [--threads N]\n\n" +
         "Runs the Wandura API emulator (SPEC section 4): the playback API with rate limits, prefetch shedding, play\n"
         "holds, ticket reuse, idempotency and scripted faults, plus the admin API under /_emulator/.\n\n"
         "  --port PORT      port to listen on; 0 picks a free one (printed)\n"
         "  --host ADDRESS   address to listen on (default 127.0.0.1)\n"
         "  --config FILE    JSON configuration: orgs, films, ticket_ttl_s, faults (SPEC section 4)\n"
         "  --seed N         seed every random choice (ticket ids, fault probabilities)\n"
         "  --manual-clock   the clock moves only on POST /_emulator/clock {\"advance_ms\":N}\n"
         "  --threads N      io threads (default 1)\n\n"
         "Prints \"listening on http://HOST:PORT\" once ready and serves until SIGINT or SIGTERM. Default key: "
         "test-key.\nExit status: 0 after a stop signal, 1 when the server cannot start, 2 for a usage or "
         "configuration error.\n";
}

int run_command_line(std::span<char* const> args, std::string_view program) {
  std::string const name(program);
  try {
    config cfg;
    std::optional<std::string> host;
    std::optional<std::uint16_t> port;
    std::optional<std::uint64_t> seed;
    std::optional<unsigned> threads;
    bool manual_clock = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string arg = args[i];
      std::optional<std::string> inline_value;
      if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
      auto value = [&]() -> std::string {
        if (inline_value) {
          return *inline_value;
        }
        if (i + 1 >= args.size()) {
          throw config_error(arg + ": missing value");
        }
        return args[++i];
      };
      if (arg == "--help" || arg == "-h") {
        std::fputs(usage(program).c_str(), stdout);
        return 0;
      }
      if (arg == "--port") {
        port = static_cast<std::uint16_t>(parse_number(arg, value(), 0, 65535));
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
        try {
          cfg = parse_config(text.str());
        } catch (config_error const& e) {
          throw config_error("--config: " + path + ": " + e.what());
        }
      } else if (arg == "--seed") {
        seed = parse_number(arg, value(), 0, UINT64_MAX);
      } else if (arg == "--manual-clock") {
        manual_clock = true;
      } else if (arg == "--threads") {
        threads = static_cast<unsigned>(parse_number(arg, value(), 1, 256));
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
    std::fprintf(stderr, "%s: %s\n%s", name.c_str(), e.what(), usage(program).c_str());
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return 1;
  }
}

} // namespace wandura::emulator
