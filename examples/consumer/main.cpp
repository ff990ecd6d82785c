// Links against the installed package's core alone (wandura::wandura: client, retry engine, transport), with none of
// the components: a typed connect error against a closed port, with the attempts it made.
#include <wandura/error.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/playback/viewer_ref.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <cstdio>

int main() {
  wandura::viewer who{wandura::make_viewer_ref("secret", "user-1", "install-1"), "device-1", "device-key"};

  // Nothing listens on 127.0.0.1:1: one attempt (retries off), a typed connect error.
  asio::io_context io;
  wandura::client closed(io.get_executor(), {.base_url = "http://127.0.0.1:1", .api_key = "test-key"});
  wandura::call_options once;
  once.disable_retries = true;
  auto failed = asio::co_spawn(io, closed.start_episode(who, "the-heiress-returns", 1, 3, once), asio::use_future);
  io.run();
  try {
    failed.get();
  } catch (wandura::error const& e) {
    if (e.code() == wandura::errc::connect_failed && e.attempts() == 1) {
      std::printf("wandura consumer: %s\n", e.what());
      return 0;
    }
    std::printf("unexpected error: %s\n", e.what());
    return 1;
  }
  std::puts("unexpected success");
  return 1;
}
