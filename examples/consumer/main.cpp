// Links against the installed package and exercises every layer it exports: the client (playback), the retry
// engine (resilience) and libcurl (transport). Nothing listens on 127.0.0.1:1, so the call must fail with a typed
// connect error after exactly one attempt (retries are off for it).
#include <wandura/error.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/playback/viewer_ref.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <cstdio>

int main() {
  asio::io_context io;
  wandura::client api(io.get_executor(), {.base_url = "http://127.0.0.1:1", .api_key = "test-key"});
  wandura::viewer who{wandura::make_viewer_ref("secret", "user-1", "install-1"), "device-1", "device-key"};
  wandura::call_options once;
  once.disable_retries = true;
  auto done = asio::co_spawn(io, api.start_episode(who, "the-heiress-returns", 1, 3, once), asio::use_future);
  io.run();
  try {
    done.get();
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
