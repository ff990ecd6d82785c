// The Asio event-library adapter for a hiredis 0.14 async context.
//
// hiredis asks for read and write interest through the `ev.addRead/delRead/addWrite/delWrite` hooks and says
// goodbye through `ev.cleanup` (the contract of hiredis's own adapters, e.g. adapters/libevent.h). Interest is
// one-shot, as there: when the descriptor is ready the adapter drops the interest and calls
// `redisAsyncHandleRead/Write`, which ask again for what they still need. The descriptor is only waited on for
// readiness (`async_wait`); hiredis does the reading and writing, and closes the descriptor itself.
//
// Writes are tried first without waiting: on a connected socket with room in its send buffer (nearly always), a
// wait for writability would only cost a reactor round (in Asio 1.22, an epoll_ctl per wait). So the first
// write interest after a command is served by a posted `redisAsyncHandleWrite`, which also lets every command
// initiated in the same handler go out in one write; only when that attempt leaves bytes behind (the buffer is
// full) does the adapter wait for writability.
#pragma once

#include <functional>
#include <memory>

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>

struct redisAsyncContext;

namespace wandura::detail {

class hiredis_asio_adapter : public std::enable_shared_from_this<hiredis_asio_adapter> {
public:
  /// Installs the hooks on `ac` and asks for read and write interest (write readiness completes the
  /// non-blocking connect). `on_cleanup` runs once, inside hiredis, when the context goes away; after it the
  /// adapter never touches the context again. `after_read` runs after each `redisAsyncHandleRead` that left the
  /// context alive, outside hiredis's callbacks (it may free the context). The adapter must outlive the context:
  /// keep the returned pointer.
  static std::shared_ptr<hiredis_asio_adapter> attach(redisAsyncContext* ac, asio::any_io_executor const& ex,
                                                      std::function<void()> on_cleanup,
                                                      std::function<void()> after_read);

  hiredis_asio_adapter(redisAsyncContext* ac, asio::any_io_executor const& ex, std::function<void()> on_cleanup,
                       std::function<void()> after_read);

private:
  struct interest {
    bool wanted = false;  ///< hiredis asked for it and has not been called back yet
    bool waiting = false; ///< an async_wait is outstanding
  };

  void add(interest& which, asio::posix::stream_descriptor::wait_type type);
  void write_soon();
  void cleanup();

  static void add_read(void* self);
  static void del_read(void* self);
  static void add_write(void* self);
  static void del_write(void* self);
  static void cleanup_hook(void* self);

  redisAsyncContext* ac_;
  asio::posix::stream_descriptor descriptor_;
  std::function<void()> on_cleanup_;
  std::function<void()> after_read_;
  interest read_;
  interest write_;
  bool write_posted_ = false;    ///< a posted write attempt is pending
  bool in_posted_write_ = false; ///< inside that attempt: a new write interest means the buffer is full
};

} // namespace wandura::detail
