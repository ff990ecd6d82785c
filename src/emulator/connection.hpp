// One keep-alive connection of the emulator: reads requests (request_reader), answers them one at a time (pipelined
// requests in order), serves the admin API of docs/protocol.md §4, and delivers replies intact or damaged as a fault
// rule says. Closes on error, on `Connection: close`, after `idle_timeout` without traffic while no request is
// being answered, when a request has not fully arrived `idle_timeout` after its first byte, and when its client
// closes its side while a request is being answered.
#pragma once

#include "emulator/clock.hpp"
#include "emulator/request_reader.hpp"
#include "emulator/service.hpp"

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace wandura::emulator::detail {

class connection {
public:
  connection(asio::ip::tcp::socket socket, service& svc, emulator_clock& clock);

  // Each takes the connection's owner as a parameter: coroutine parameters are copied into the frame when it is
  // created, so the connection lives as long as either coroutine, even before they first run.
  asio::awaitable<void> run(std::shared_ptr<connection> self);
  asio::awaitable<void> watch(std::shared_ptr<connection> self);
  [[nodiscard]] asio::ip::tcp::socket::executor_type executor() { return socket_.get_executor(); }

private:
  enum class outcome { keep_open, close };

  void touch() { last_activity_ = std::chrono::steady_clock::now(); }
  void close();
  void reset_connection();
  std::string const& date_header();
  /// 204 and 304 end at their headers (RFC 9110 §6.4.1): no Content-Length, no body.
  static bool has_no_content(int status) { return status == 204 || status == 304; }
  /// Status line and headers for a body of `content_length` bytes (none for a 204 or 304).
  void head(std::string& out, http_reply const& r, std::size_t content_length, bool keep_alive);

  asio::awaitable<bool> write(std::string_view bytes);
  asio::awaitable<outcome> send(http_reply const& r, bool keep_alive);
  /// Answers bytes that are not an acceptable request with `status` (400, 413, ...) and an `invalid_request` body.
  asio::awaitable<outcome> send_refusal(int status, std::string_view why);
  asio::awaitable<void> linger_close();
  asio::awaitable<outcome> handle_request();
  asio::awaitable<outcome> deliver(http_reply r, std::optional<fault_rule> const& fault, bool keep_alive);
  asio::awaitable<outcome> deliver_reset(http_reply const& r, bool keep_alive);
  asio::awaitable<outcome> deliver_huge(http_reply const& r, std::uint64_t padding, bool keep_alive);
  asio::awaitable<outcome> deliver_slow(http_reply const& r, std::uint64_t bytes_per_s, bool keep_alive);
  http_reply handle_admin();
  /// The peer closed or reset the connection (while nothing of it is being read).
  bool peer_gone();
  http_reply handle_clock();

  asio::ip::tcp::socket socket_;
  service& svc_;
  emulator_clock& clock_;
  asio::steady_timer watchdog_;
  std::chrono::steady_clock::time_point last_activity_;
  /// When the first byte of the request still arriving came (none is arriving when empty). A peer sending a byte
  /// now and then is never idle; this deadline ends it all the same (a "slowloris" client).
  std::optional<std::chrono::steady_clock::time_point> request_started_;
  bool peer_is_loopback_ = false;
  bool done_ = false;
  /// The service is working on a request (a delay fault, a play held for room): the watchdog leaves the connection
  /// open while its peer is there (`peer_gone`). Not while its reply is written: a peer that stops reading is idle.
  bool answering_ = false;
  /// The request being answered is a HEAD: its reply is sent without its body (RFC 9110 §9.3.2).
  bool head_only_ = false;

  request_reader reader_;
  simdjson::dom::parser json_;
  std::string out_;
  std::string date_;
  std::int64_t date_second_ = -1;
};

} // namespace wandura::emulator::detail
