#include "wandura/emulator/command_line.hpp"

#include <pthread.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/standard_streams.hpp"
#include "cli/style.hpp"
#include "wandura/emulator/emulator.hpp"

#ifndef WANDURA_VERSION
#error "WANDURA_VERSION (the project's version) is set by src/emulator/CMakeLists.txt"
#endif

namespace wandura::emulator {
namespace {

/// The flags as given; a flag left out keeps what the configuration file (or its default) says.
struct flags {
  std::uint16_t port = 0;
  std::string host;
  std::string config_file;
  std::uint64_t seed = 0;
  unsigned threads = 1;
  bool manual_clock = false;
};

/// The command line of the emulator, parsed into `f`. `f` must outlive the returned application.
std::unique_ptr<CLI::App> make_app(std::string_view program, flags& f) {
  auto app = std::make_unique<CLI::App>(
      "Runs the Wandura API emulator: the playback API with rate limits, prefetch shedding, play holds, ticket\n"
      "reuse, idempotency and scripted faults, plus the admin API under /_emulator/ (docs/protocol.md).",
      std::string(program));
  cli::apply_style(*app, "Prints \"listening on http://HOST:PORT\" once ready and serves until SIGINT or SIGTERM. "
                         "Default key: test-key.\nExit status: 0 after a stop signal, 1 when the server cannot "
                         "start or stdout cannot take that line, 2 for a usage or configuration error.");
  app->add_option("--port", f.port, "port to listen on; 0 picks a free one (printed)")
      ->type_name("PORT")
      ->required()
      ->transform(cli::number_in<std::uint16_t>(0, 65535));
  app->add_option("--host", f.host, "address to listen on (default 127.0.0.1)")->type_name("ADDRESS");
  app->add_option("--config", f.config_file, "JSON configuration: orgs, films, ticket_ttl_s, faults")
      ->type_name("FILE.json");
  app->add_option("--seed", f.seed, "seed every random choice (ticket ids, fault probabilities)")
      ->type_name("N")
      ->transform(cli::number_in<std::uint64_t>(0, UINT64_MAX));
  app->add_flag("--manual-clock", f.manual_clock, "the clock moves only on POST /_emulator/clock {\"advance_ms\":N}");
  app->add_option("--threads", f.threads, "io threads (default 1)")
      ->type_name("N")
      ->transform(cli::number_in<unsigned>(1, 256));
  // The line `wandura --version` starts with: the emulator is built with the client, from the same version.
  app->set_version_flag("--version", std::string("wandura ") + WANDURA_VERSION, "print the version and exit");
  cli::refuse_options_as_values(*app);
  return app;
}

/// The configuration file, if any, with the flags applied over it: flags win.
config make_config(CLI::App const& app, flags const& f) {
  config cfg;
  if (app.count("--config") > 0) {
    try {
      cfg = load_config_file(f.config_file);
    } catch (config_error const& e) {
      throw cli::usage_error(std::string("--config: ") + e.what());
    }
  }
  cfg.port = f.port;
  if (app.count("--host") > 0) {
    cfg.host = f.host;
  }
  if (app.count("--seed") > 0) {
    cfg.seed = f.seed;
  }
  if (app.count("--threads") > 0) {
    cfg.threads = f.threads;
  }
  cfg.manual_clock = cfg.manual_clock || f.manual_clock;
  return cfg;
}

/// Starts the emulator, prints its address and serves until SIGINT or SIGTERM. Stops at once, with exit_failed, when
/// stdout cannot take the address: whoever started it would wait for a line that never comes.
int serve(config const& cfg, std::string_view program) {
  // Block the stop signals before the server's threads start, so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto emu = server::start(cfg);
  std::printf("listening on %s\n", emu->base_url().c_str());
  if (!cli::flush_stdout(program)) {
    emu->stop();
    return cli::exit_failed;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  emu->stop();
  return cli::exit_ok;
}

} // namespace

std::string usage(std::string_view program) {
  flags f;
  return make_app(program, f)->help();
}

int run_command_line(std::span<char* const> args, std::string_view program) {
  flags f;
  auto const app = make_app(program, f);
  if (auto const done = cli::parse(*app, args)) {
    return *done;
  }
  config cfg;
  try {
    cfg = make_config(*app, f);
  } catch (cli::usage_error const& e) {
    return cli::report_usage_error(program, e.what());
  }
  try {
    return serve(cfg, program);
  } catch (config_error const& e) { // refused by server::start: a usage error too
    return cli::report_usage_error(program, e.what());
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
                 detail::printable(e.what(), cli::whole_line).c_str()); // it may quote --host
    return cli::exit_failed;
  }
}

} // namespace wandura::emulator
