// Links against the installed package's `emulator` component (wandura::emulator, with libhttp-parser): a client of
// the core gets a play ticket and two prefetch tickets from the emulator started in-process, as a user's tests do.
#include <wandura/emulator/emulator.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/playback/viewer_ref.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <cstdio>

int main() {
  auto emu = wandura::emulator::server::start({});
  wandura::viewer who{wandura::make_viewer_ref("secret", "user-1", "install-1"), "device-1", "device-key"};

  asio::io_context io;
  wandura::client api(io.get_executor(), {.base_url = emu->base_url(), .api_key = "test-key"});
  auto started = asio::co_spawn(io, api.start_episode(who, "the-heiress-returns", 1, 3), asio::use_future);
  io.run();
  auto const start = started.get();
  if (start.play.outcome != wandura::item_outcome::granted || start.prefetch.size() != 2 ||
      emu->stats().tickets_counted != 3) {
    std::puts("unexpected ticket outcome");
    return 1;
  }
  std::printf("wandura consumer: play ticket %s\n", start.play.ticket->ticket_id.c_str());
  return 0;
}
