// Testing against wandura::emulator started in-process on a free loopback port (docs/testing.md).
//
// The emulator behaves as the Wandura API does under load, with scripted faults: here the first ticket request is
// answered 503 with Retry-After: 1, the client waits and retries, and the server's own counters prove that the
// retry was executed once and counted three tickets (one play, two prefetches). Real sockets, real time (about a
// second). Exit status 0 when every check holds, 1 otherwise.
#include <cstdio>
#include <exception>
#include <optional>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <wandura/emulator/emulator.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/playback/viewer_ref.hpp>

namespace {

bool check(bool ok, char const* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

} // namespace

int main() {
  wandura::emulator::config cfg;
  cfg.seed = 7; // ticket ids and request ids are the same on every run
  auto emu = wandura::emulator::server::start(cfg);
  emu->install_faults(
      R"({"rules":[{"path":"/v1/playback/tickets","kind":"status","status":503,"retry_after":1,"count":1}]})");

  asio::io_context io;
  wandura::client_options options;
  options.base_url = emu->base_url();
  options.api_key = "test-key"; // the emulator's default organisation
  wandura::client api(io.get_executor(), std::move(options));
  wandura::viewer const who{wandura::make_viewer_ref("secret", "user-1", "install-1"), "device-1", "device-key"};
  std::optional<wandura::episode_start> start;
  asio::co_spawn(io, api.start_episode(who, "the-heiress-returns", 4, 12),
                 [&](std::exception_ptr e, wandura::episode_start s) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (std::exception const& error) {
                       std::printf("FAIL start_episode threw: %s\n", error.what());
                     }
                     return;
                   }
                   start = std::move(s);
                 });
  io.run();

  auto const stats = emu->stats();
  bool ok = check(start && start->play.outcome == wandura::item_outcome::granted, "the play ticket is granted");
  ok = check(start && start->attempts == 2, "two attempts: the 503, then the retry") && ok;
  ok = check(stats.faults_injected == 1, "the emulator injected the scripted 503 once") && ok;
  ok = check(stats.tickets_counted == 3, "the emulator counted three tickets, once") && ok;
  return ok ? 0 : 1;
}
