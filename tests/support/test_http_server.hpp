// wandura::testing::test_http_server: a tiny HTTP/1.1 server on loopback for fault behaviours real servers do not
// produce on demand: reset mid-body, stall, slow bodies, garbage, closing without a response.
//
// Runs its own io_context on its own thread (real time), so that the client under test shares nothing with it.
// Loopback only: it binds 127.0.0.1 or ::1 on a free port chosen by the kernel.
//
// Thread safety: `set_behaviour` and the counters may be used from any thread while the server runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace wandura::testing {

/// What the server does with each request it reads.
enum class server_behaviour {
  respond,            ///< `status` (200 unless set) with `body`, keep-alive.
  reset_mid_body,     ///< Headers announcing the full body, half the body, then a TCP RST.
  close_before_reply, ///< Reads the request and closes cleanly without a byte (libcurl: "empty reply").
  /// As `close_before_reply` for one request, then `respond` again: a keep-alive connection the server closed as
  /// idle just as a request arrived on it.
  close_once_before_reply,
  /// As `respond` for each connection's first request; reads the next and closes without a byte: every reuse of a
  /// connection dies as in `close_once_before_reply`, on every connection.
  close_on_reuse,
  stall,              ///< Reads the request and never answers (the connection stays open).
  never_read,         ///< Accepts and never reads: a large request body fills the socket buffers and stalls.
  slow_body,          ///< Headers at once, then the body 10 bytes every `chunk_delay`.
  garbage,            ///< A reply that is not HTTP.
  oversized,          ///< Chunked body (no Content-Length) of `oversized_bytes` bytes.
  status_line_only,   ///< "HTTP/1.1 200 OK" and its line end, then a clean close.
  short_body,         ///< Headers announcing the full body, half the body, then a clean close (FIN, not RST).
  missing_last_chunk, ///< A chunked body whose terminating zero-size chunk never comes: a clean close instead.
  long_header_line,   ///< One header line of `oversized_bytes` bytes, then an ordinary response.
  large_header_block, ///< Header lines of 1,000 bytes each, `oversized_bytes` in all, then an ordinary response.
  raw,                ///< The bytes of `set_body` as the whole reply, verbatim (a crafted response), then a close.
  raw_then_stall,     ///< The bytes of `set_body`, verbatim, then nothing more (the connection stays open).
  /// As `respond`, then at once a second, unasked-for response (body `stray`) on the idle keep-alive connection,
  /// which stays open: a server (or a proxy) out of step with its client.
  stray_after_reply,
};

class test_http_server {
public:
  /// @param ipv6 bind ::1 instead of 127.0.0.1.
  explicit test_http_server(server_behaviour behaviour = server_behaviour::respond, bool ipv6 = false)
      : acceptor_(io_, asio::ip::tcp::endpoint(
                           ipv6 ? asio::ip::make_address("::1") : asio::ip::make_address("127.0.0.1"), 0)),
        behaviour_(behaviour), ipv6_(ipv6) {
    body_ = R"({"ok":true,"items":[1,2,3],"pad":")" + std::string(200, 'x') + "\"}";
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }

  test_http_server(test_http_server const&) = delete;
  test_http_server& operator=(test_http_server const&) = delete;

  ~test_http_server() {
    io_.stop();
    thread_.join();
  }

  [[nodiscard]] unsigned short port() const { return acceptor_.local_endpoint().port(); }
  /// "http://127.0.0.1:<port><path>" (or the bracketed ::1 form).
  [[nodiscard]] std::string url(std::string const& path = "/") const {
    return std::string("http://") + (ipv6_ ? "[::1]" : "127.0.0.1") + ":" + std::to_string(port()) + path;
  }

  void set_behaviour(server_behaviour b) { behaviour_.store(b); }
  /// The status code `respond` answers with (a redirect with its `Location` in `set_extra_headers`, say).
  void set_status(int code) { status_.store(code); }
  /// The body `respond` sends, as bytes (a gzip stream with `Content-Encoding: gzip`, say). The other behaviours
  /// read it unlocked: change it only while no request is being answered.
  void set_body(std::string bytes) {
    std::lock_guard lock(mutex_);
    body_ = std::move(bytes);
  }
  /// Extra response header lines (each "Name: value") sent with `respond`.
  void set_extra_headers(std::vector<std::string> lines) {
    std::lock_guard lock(mutex_);
    extra_headers_ = std::move(lines);
  }
  void set_chunk_delay(std::chrono::milliseconds d) { chunk_delay_ms_.store(static_cast<int>(d.count())); }
  void set_oversized_bytes(std::size_t n) { oversized_bytes_.store(n); }
  /// With `respond`: close each connection `d` after its response, without `Connection: close`, as servers close
  /// idle keep-alive connections. Negative: never (the default).
  void set_close_after_response(std::chrono::milliseconds d) { close_after_ms_.store(static_cast<int>(d.count())); }
  /// With `respond` or `close_on_reuse`: the `n`th connection accepted (from 1) sends a stray answer after each of
  /// its responses, as `stray_after_reply` has every connection do. 0: none (the default).
  void set_stray_on_connection(std::size_t n) { stray_on_connection_.store(n); }

  [[nodiscard]] std::size_t connections_accepted() const { return accepted_.load(); }
  [[nodiscard]] std::size_t requests_read() const { return requests_.load(); }
  /// Stray answers written (`stray_after_reply`, `set_stray_on_connection`).
  [[nodiscard]] std::size_t strays_sent() const { return strays_.load(); }
  [[nodiscard]] std::string body() const {
    std::lock_guard lock(mutex_);
    return body_;
  }
  /// The last request's raw header block, for assertions on what the client sent.
  [[nodiscard]] std::string last_request_head() const {
    std::lock_guard lock(mutex_);
    return last_head_;
  }

private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
      if (ec) {
        co_return;
      }
      std::size_t const index = ++accepted_;
      asio::co_spawn(io_, session(std::move(socket), index), asio::detached);
    }
  }

  asio::awaitable<void> session(asio::ip::tcp::socket socket, std::size_t index) {
    using asio::use_awaitable;
    auto tuple = asio::experimental::as_tuple(use_awaitable);
    std::string buffer;
    std::size_t on_connection = 0; // requests read on this connection
    for (;;) {
      if (behaviour_.load() == server_behaviour::never_read) {
        asio::steady_timer t(io_, std::chrono::hours(1));
        co_await t.async_wait(tuple);
        co_return;
      }
      auto [ec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n", tuple);
      if (ec) {
        co_return;
      }
      std::string head = buffer.substr(0, n);
      buffer.erase(0, n);
      std::size_t content_length = 0;
      if (auto p = lower(head).find("content-length:"); p != std::string::npos) {
        content_length = std::stoul(head.substr(p + 15));
      }
      if (buffer.size() < content_length) {
        auto [ec2, m] = co_await asio::async_read(socket, asio::dynamic_buffer(buffer),
                                                  asio::transfer_exactly(content_length - buffer.size()), tuple);
        if (ec2) {
          co_return;
        }
      }
      buffer.erase(0, content_length);
      {
        std::lock_guard lock(mutex_);
        last_head_ = head;
      }
      ++requests_;
      if (++on_connection > 1 && behaviour_.load() == server_behaviour::close_on_reuse) {
        std::error_code ignored;
        socket.shutdown(asio::socket_base::shutdown_both, ignored);
        socket.close(ignored);
        co_return;
      }
      if (!co_await reply(socket, index == stray_on_connection_.load())) {
        co_return;
      }
      if (int const close_after = close_after_ms_.load(); close_after >= 0) {
        asio::steady_timer t(io_, std::chrono::milliseconds(close_after));
        co_await t.async_wait(tuple);
        std::error_code ignored;
        socket.shutdown(asio::socket_base::shutdown_both, ignored);
        socket.close(ignored);
        co_return;
      }
    }
  }

  /// Returns false when the connection is finished. `stray_after`: a stray answer follows a response (`respond`).
  asio::awaitable<bool> reply(asio::ip::tcp::socket& socket, bool stray_after) {
    auto tuple = asio::experimental::as_tuple(asio::use_awaitable);
    auto const b = behaviour_.load();
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
    switch (b) {
    case server_behaviour::stray_after_reply:
    case server_behaviour::close_on_reuse:
    case server_behaviour::respond: {
      if (int const status = status_.load(); status != 200) {
        // The reason phrase is free text: clients read the code only.
        head.replace(0, head.find("\r\n"), "HTTP/1.1 " + std::to_string(status) + " Status");
      }
      {
        std::lock_guard lock(mutex_);
        for (auto const& h : extra_headers_) {
          head += h + "\r\n";
        }
        head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_;
      }
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(head), tuple);
      if (!ec && (stray_after || b == server_behaviour::stray_after_reply)) {
        // Later, not in the same segment: libcurl gives up a connection whose answer came with excess bytes.
        asio::steady_timer t(io_, std::chrono::milliseconds(20));
        co_await t.async_wait(tuple);
        std::string const stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray";
        auto [stray_ec, written] = co_await asio::async_write(socket, asio::buffer(stray), tuple);
        if (!stray_ec) {
          ++strays_;
        }
      }
      co_return !ec;
    }
    case server_behaviour::reset_mid_body: {
      head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_.substr(0, body_.size() / 2);
      co_await asio::async_write(socket, asio::buffer(head), tuple);
      std::error_code ignored;
      socket.set_option(asio::socket_base::linger(true, 0), ignored); // close() now sends RST
      socket.close(ignored);
      co_return false;
    }
    case server_behaviour::close_once_before_reply: behaviour_.store(server_behaviour::respond); [[fallthrough]];
    case server_behaviour::close_before_reply: {
      std::error_code ignored;
      socket.shutdown(asio::socket_base::shutdown_both, ignored);
      socket.close(ignored);
      co_return false;
    }
    case server_behaviour::stall:
    case server_behaviour::never_read: {
      asio::steady_timer t(io_, std::chrono::hours(1));
      co_await t.async_wait(tuple);
      co_return false;
    }
    case server_behaviour::slow_body: {
      head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n";
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(head), tuple);
      for (std::size_t off = 0; !ec && off < body_.size(); off += 10) {
        asio::steady_timer t(io_, std::chrono::milliseconds(chunk_delay_ms_.load()));
        co_await t.async_wait(tuple);
        auto [ec2, m] = co_await asio::async_write(socket, asio::buffer(body_.substr(off, 10)), tuple);
        ec = ec2;
      }
      co_return !ec;
    }
    case server_behaviour::garbage: {
      std::string junk = "THIS IS NOT HTTP\r\n\r\n";
      co_await asio::async_write(socket, asio::buffer(junk), tuple);
      co_return false;
    }
    case server_behaviour::status_line_only: co_return co_await write_and_close(socket, "HTTP/1.1 200 OK\r\n");
    case server_behaviour::short_body:
      head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_.substr(0, body_.size() / 2);
      co_return co_await write_and_close(socket, head);
    case server_behaviour::missing_last_chunk:
      head += "Transfer-Encoding: chunked\r\n\r\n10\r\n" + std::string(16, 'a') + "\r\n";
      co_return co_await write_and_close(socket, head);
    case server_behaviour::long_header_line:
      head += "X-Long: " + std::string(oversized_bytes_.load(), 'h') + "\r\n";
      head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_;
      co_return co_await write_and_close(socket, head);
    case server_behaviour::large_header_block: {
      std::string const line = "X-Filler: " + std::string(988, 'h') + "\r\n"; // 1,000 bytes
      for (std::size_t n = 0; n < oversized_bytes_.load(); n += line.size()) {
        head += line;
      }
      head += "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_;
      co_return co_await write_and_close(socket, head);
    }
    case server_behaviour::raw: {
      std::string bytes;
      {
        std::lock_guard lock(mutex_);
        bytes = body_;
      }
      co_return co_await write_and_close(socket, bytes);
    }
    case server_behaviour::raw_then_stall: {
      std::string bytes;
      {
        std::lock_guard lock(mutex_);
        bytes = body_;
      }
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(bytes), tuple);
      if (ec) {
        co_return false;
      }
      asio::steady_timer t(io_, std::chrono::hours(1));
      co_await t.async_wait(tuple);
      co_return false;
    }
    case server_behaviour::oversized: {
      head += "Transfer-Encoding: chunked\r\n\r\n";
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(head), tuple);
      std::string chunk = "4000\r\n" + std::string(0x4000, 'a') + "\r\n";
      for (std::size_t sent = 0; !ec && sent < oversized_bytes_.load(); sent += 0x4000) {
        auto [ec2, m] = co_await asio::async_write(socket, asio::buffer(chunk), tuple);
        ec = ec2;
      }
      std::string last = "0\r\n\r\n";
      co_await asio::async_write(socket, asio::buffer(last), tuple);
      co_return !ec;
    }
    }
    co_return false;
  }

  /// Writes `bytes`, then closes cleanly (FIN after everything was sent). Returns false: the connection is done.
  /// `bytes` must stay alive until it completes (a string_view: a std::string temporary inside a co_await
  /// expression may be destroyed twice by GCC 12).
  static asio::awaitable<bool> write_and_close(asio::ip::tcp::socket& socket, std::string_view bytes) {
    co_await asio::async_write(socket, asio::buffer(bytes), asio::experimental::as_tuple(asio::use_awaitable));
    std::error_code ignored;
    socket.shutdown(asio::socket_base::shutdown_send, ignored);
    socket.close(ignored);
    co_return false;
  }

  static std::string lower(std::string s) {
    for (auto& c : s) {
      if (c >= 'A' && c <= 'Z') {
        c = static_cast<char>(c - 'A' + 'a');
      }
    }
    return s;
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<server_behaviour> behaviour_;
  bool ipv6_;
  std::string body_;
  mutable std::mutex mutex_;
  std::vector<std::string> extra_headers_;
  std::string last_head_;
  std::atomic<int> status_{200};
  std::atomic<int> chunk_delay_ms_{20};
  std::atomic<int> close_after_ms_{-1};
  std::atomic<std::size_t> oversized_bytes_{std::size_t{2} << 20U};
  std::atomic<std::size_t> accepted_{0};
  std::atomic<std::size_t> stray_on_connection_{0};
  std::atomic<std::size_t> strays_{0};
  std::atomic<std::size_t> requests_{0};
  std::thread thread_;
};

} // namespace wandura::testing
