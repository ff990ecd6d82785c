// Every block Asio allocates for a call (the coroutine frames of the client's layers, the handlers) fits the
// recycling cache Asio keeps per thread: Asio 1.22 recycles a block of at most 1,020 bytes (255 chunks of 4) and
// frees a larger one on every call, evicting a cached block to make room for it on the way in. A coroutine frame
// holds every local that lives across a suspension, and GCC keeps them all side by side: one more local in the
// retry loop or the ticket call once put both frames past the limit without anything else showing it.
//
// The blocks are seen through `aligned_alloc`, which Asio calls for each one it does not find in its cache (this
// program defines it and passes every call on to the C library's): only the calling thread's, only while a call
// runs on it. Against the embedded emulator over loopback sockets, with the client's defaults and without them.
#include "wandura/playback/client.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "wandura/emulator/emulator.hpp"
#include "wandura/playback/viewer_ref.hpp"

namespace {

thread_local bool watching = false; ///< Set on the thread running the client's calls, while they run.
std::size_t blocks = 0;             ///< Written only by a watching thread (one at a time).
std::size_t largest = 0;

/// The size Asio asks `aligned_alloc` for when it allocates a block it may recycle: at most 255 chunks of 4 bytes and
/// its one byte of bookkeeping, rounded up to its 16-byte alignment.
constexpr std::size_t largest_recyclable_request = (255 * 4 + 1 + 15) / 16 * 16;

} // namespace

extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  using function = void* (*)(std::size_t, std::size_t);
  static function const next = reinterpret_cast<function>(::dlsym(RTLD_NEXT, "aligned_alloc"));
  if (next == nullptr) {
    std::abort(); // no C library's aligned_alloc to pass the call to
  }
  if (watching) {
    ++blocks;
    largest = size > largest ? size : largest;
  }
  return next(alignment, size);
}

namespace {

struct watched {
  std::size_t blocks = 0;
  std::size_t largest = 0;
};

/// Runs the coroutine `call` makes to its end on `io` on this thread, watching the blocks allocated meanwhile. The
/// test's own frames (the coroutine, `co_spawn`'s) are made before the watch starts: they hold the call's result.
template <class Call> watched run_watched(asio::io_context& io, Call call) {
  blocks = 0;
  largest = 0;
  auto task = call();
  auto done = asio::co_spawn(io, std::move(task), asio::use_future);
  watching = true;
  io.run();
  watching = false;
  done.get(); // the call's own failure, if any, fails the test
  io.restart();
  return {blocks, largest};
}

wandura::viewer test_viewer() {
  wandura::viewer v;
  v.viewer_ref = wandura::make_viewer_ref("secret", "user-1", "install-1");
  v.union_info = "device-1";
  v.drm_kek = "kek-1";
  return v;
}

} // namespace

TEST_CASE("client calls: every block Asio allocates for a call fits the 1020 bytes its recycling cache takes") {
#if !defined(ASIO_HAS_STD_ALIGNED_ALLOC)
  WARN("Asio allocates its blocks with operator new in this build: not watched");
  return;
#endif
  auto const options_kind = GENERATE(as<std::string>{}, "defaults", "no reuse or coalescing");
  auto const call_kind = GENERATE(as<std::string>{}, "issue_tickets", "start_episode", "retried", "get_config",
                                  "get_film", "get_video", "list_videos", "list_creatives");
  CAPTURE(options_kind, call_kind);

  wandura::emulator::config cfg;
  cfg.seed = 7;
  auto emu = wandura::emulator::server::start(cfg);
  if (call_kind == "retried") {
    // The first request is answered 503 with no wait asked: the retry engine's backoff and turn in between.
    emu->install_faults(R"({"rules":[{"path":"/v1/playback/tickets","kind":"status","status":503,"count":1}]})");
  }
  asio::io_context io(1);
  wandura::client_options options;
  options.base_url = emu->base_url();
  options.api_key = "test-key";
  if (options_kind != "defaults") {
    options.reuse_tickets = false;
    options.coalesce = false;
  }
  wandura::client api(io.get_executor(), std::move(options));
  auto const batch = [] {
    wandura::ticket_batch b;
    auto const v = test_viewer();
    b.viewer_ref = v.viewer_ref;
    b.union_info = v.union_info;
    b.drm_kek = v.drm_kek;
    b.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
    b.episodes.push_back({"the-heiress-returns", 5, wandura::intent::prefetch});
    return b;
  };

  watched seen;
  if (call_kind == "issue_tickets" || call_kind == "retried") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> {
      auto const result = co_await api.issue_tickets(batch());
      CHECK(result.items.size() == 2);
      CHECK(result.attempts == (call_kind == "retried" ? 2 : 1));
    });
  } else if (call_kind == "start_episode") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> {
      auto const start = co_await api.start_episode(test_viewer(), "the-heiress-returns", 4, 12);
      CHECK(start.prefetch.size() == 2);
    });
  } else if (call_kind == "get_config") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> { (void)co_await api.get_config(); });
  } else if (call_kind == "get_film") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> { (void)co_await api.get_film("the-heiress-returns"); });
  } else if (call_kind == "get_video") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> { (void)co_await api.get_video("trailer-heiress"); });
  } else if (call_kind == "list_videos") {
    seen = run_watched(io, [&]() -> asio::awaitable<void> { (void)co_await api.list_videos(); });
  } else {
    seen = run_watched(io, [&]() -> asio::awaitable<void> { (void)co_await api.list_creatives(); });
  }
  CAPTURE(seen.blocks, seen.largest);
  CHECK(seen.blocks >= 3); // the call's own frames at least: the watch saw them
  CHECK(seen.largest <= largest_recyclable_request);
}
