#include "hiredis_asio.hpp"

#include <utility>

#include <asio/post.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

namespace wandura::detail {

std::shared_ptr<hiredis_asio_adapter> hiredis_asio_adapter::attach(redisAsyncContext* ac,
                                                                   asio::any_io_executor const& ex,
                                                                   std::function<void()> on_cleanup,
                                                                   std::function<void()> after_read) {
  auto adapter = std::make_shared<hiredis_asio_adapter>(ac, ex, std::move(on_cleanup), std::move(after_read));
  ac->ev.data = adapter.get();
  ac->ev.addRead = &add_read;
  ac->ev.delRead = &del_read;
  ac->ev.addWrite = &add_write;
  ac->ev.delWrite = &del_write;
  ac->ev.cleanup = &cleanup_hook;
  adapter->add(adapter->read_, asio::posix::stream_descriptor::wait_read);
  adapter->add(adapter->write_, asio::posix::stream_descriptor::wait_write);
  return adapter;
}

hiredis_asio_adapter::hiredis_asio_adapter(redisAsyncContext* ac, asio::any_io_executor const& ex,
                                           std::function<void()> on_cleanup, std::function<void()> after_read)
    : ac_(ac), descriptor_(ex, ac->c.fd), on_cleanup_(std::move(on_cleanup)), after_read_(std::move(after_read)) {}

void hiredis_asio_adapter::add(interest& which, asio::posix::stream_descriptor::wait_type type) {
  which.wanted = true;
  if (which.waiting || ac_ == nullptr) {
    return;
  }
  which.waiting = true;
  bool const reading = type == asio::posix::stream_descriptor::wait_read;
  descriptor_.async_wait(type, [self = shared_from_this(), reading](std::error_code ec) {
    interest& done = reading ? self->read_ : self->write_;
    done.waiting = false;
    if (ec || self->ac_ == nullptr || !done.wanted) {
      return; // released, or hiredis withdrew the interest meanwhile
    }
    done.wanted = false;
    // The context may be freed inside this call (a failed read); cleanup() then clears ac_.
    if (reading) {
      redisAsyncHandleRead(self->ac_);
      if (self->ac_ != nullptr && self->after_read_) {
        self->after_read_();
      }
    } else {
      redisAsyncHandleWrite(self->ac_);
    }
  });
}

void hiredis_asio_adapter::cleanup() {
  if (ac_ == nullptr) {
    return; // hiredis may call cleanup more than once (on disconnect and again on free)
  }
  ac_ = nullptr;
  read_.wanted = false;
  write_.wanted = false;
  std::error_code ignored;
  descriptor_.cancel(ignored);
  (void)descriptor_.release(); // hiredis closes the descriptor itself
  if (auto notify = std::exchange(on_cleanup_, nullptr)) {
    notify();
  }
}

void hiredis_asio_adapter::add_read(void* self) {
  auto* adapter = static_cast<hiredis_asio_adapter*>(self);
  adapter->add(adapter->read_, asio::posix::stream_descriptor::wait_read);
}

void hiredis_asio_adapter::del_read(void* self) {
  static_cast<hiredis_asio_adapter*>(self)->read_.wanted = false;
}

void hiredis_asio_adapter::add_write(void* self) {
  auto* adapter = static_cast<hiredis_asio_adapter*>(self);
  bool const connected = adapter->ac_ != nullptr && (adapter->ac_->c.flags & REDIS_CONNECTED) != 0;
  if (connected && !adapter->in_posted_write_ && !adapter->write_.waiting) {
    adapter->write_soon();
    return;
  }
  // Connecting (writability says the connect finished), or the socket's buffer is full: wait for it.
  adapter->add(adapter->write_, asio::posix::stream_descriptor::wait_write);
}

void hiredis_asio_adapter::write_soon() {
  write_.wanted = true;
  if (write_posted_) {
    return;
  }
  write_posted_ = true;
  asio::post(descriptor_.get_executor(), [self = shared_from_this()] {
    self->write_posted_ = false;
    if (self->ac_ == nullptr || !self->write_.wanted) {
      return;
    }
    self->write_.wanted = false;
    self->in_posted_write_ = true;
    redisAsyncHandleWrite(self->ac_); // may free the context; cleanup() then clears ac_
    self->in_posted_write_ = false;
  });
}

void hiredis_asio_adapter::del_write(void* self) {
  static_cast<hiredis_asio_adapter*>(self)->write_.wanted = false;
}

void hiredis_asio_adapter::cleanup_hook(void* self) {
  static_cast<hiredis_asio_adapter*>(self)->cleanup();
}

} // namespace wandura::detail
