#include "emulator/connection.hpp"

#include "emulator/json_writer.hpp"
#include "emulator/wire_format.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace wandura::emulator::detail {
namespace {

using asio::ip::tcp;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
/// How often a connection whose request is being answered checks that its peer is still there.
constexpr std::chrono::milliseconds answering_check{250};

/// 127.0.0.0/8 and ::1, and an IPv4 loopback peer as a dual-stack socket bound to `::` sees it (::ffff:127.0.0.1).
bool is_loopback(asio::ip::address const& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  }
  return a.is_loopback();
}

} // namespace

connection::connection(tcp::socket socket, service& svc, emulator_clock& clock)
    : socket_(std::move(socket)), svc_(svc), clock_(clock), watchdog_(socket_.get_executor()) {
  std::error_code ec;
  auto peer = socket_.remote_endpoint(ec);
  peer_is_loopback_ = !ec && is_loopback(peer.address());
  socket_.set_option(tcp::no_delay(true), ec);
  touch();
}

void connection::close() {
  std::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  watchdog_.cancel();
}

void connection::reset_connection() {
  std::error_code ec;
  socket_.set_option(asio::socket_base::linger(true, 0), ec);
  socket_.close(ec);
  watchdog_.cancel();
}

std::string const& connection::date_header() {
  auto now = clock_.now();
  auto second = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (second != date_second_) {
    date_second_ = second;
    date_ = http_date(now);
  }
  return date_;
}

void connection::head(std::string& out, http_reply const& r, std::size_t content_length, bool keep_alive) {
  out.append("HTTP/1.1 ").append(std::to_string(r.status)).push_back(' ');
  out.append(reason_phrase(r.status)).append("\r\nDate: ").append(date_header());
  if (!has_no_content(r.status)) {
    out.append("\r\nContent-Type: application/json\r\nContent-Length: ").append(std::to_string(content_length));
  }
  out.append(keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n");
  out.append(r.headers).append("\r\n");
}

// Note for maintainers: GCC 12 miscompiles `if (!co_await f())` (the frame is resumed in a corrupt state); always
// bind the result first, as `if (bool const ok = co_await f(); !ok)`.
asio::awaitable<bool> connection::write(std::string_view bytes) {
  auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()), use_tuple);
  touch();
  co_return !ec;
}

asio::awaitable<connection::outcome> connection::send(http_reply const& r, bool keep_alive) {
  out_.clear();
  head(out_, r, r.body.size(), keep_alive);
  // A HEAD's reply says the Content-Length a GET's would have, and ends at its headers: bytes after them would be
  // read as the start of the next response.
  if (!has_no_content(r.status) && !head_only_) {
    out_.append(r.body);
  }
  if (bool const ok = co_await write(out_); !ok) {
    co_return outcome::close;
  }
  co_return keep_alive ? outcome::keep_open : outcome::close;
}

bool connection::peer_gone() {
  // Nothing is read while a request is answered: a peek tells an end of stream or an error from bytes of a request
  // pipelined behind it, or none.
  char byte = 0;
  ssize_t const n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

asio::awaitable<void> connection::watch(std::shared_ptr<connection> /*self*/) {
  auto const idle = svc_.cfg().idle_timeout;
  while (!done_) {
    // A request being answered (a delay fault, a held play) is not idleness: its reply is still to come, unless
    // the peer closed or reset the connection meanwhile (it gave up waiting): then no one can read the reply, and
    // the socket is closed within `answering_check` (a delay fault wakes this loop as it starts) rather than when
    // the work ends (a delay fault may last ten minutes).
    if (answering_) {
      if (peer_gone()) {
        close();
        break;
      }
      watchdog_.expires_after(std::min(idle, answering_check));
    } else {
      auto due = last_activity_ + idle;
      if (request_started_) {
        due = std::min(due, *request_started_ + idle);
      }
      if (std::chrono::steady_clock::now() >= due) {
        close();
        break;
      }
      watchdog_.expires_at(due);
    }
    co_await watchdog_.async_wait(use_tuple);
  }
}

asio::awaitable<void> connection::run(std::shared_ptr<connection> /*self*/) {
  std::vector<char> buf(std::size_t{16} * 1024);
  std::size_t pos = 0;
  std::size_t end = 0;
  for (;;) {
    if (pos == end) {
      auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buf), use_tuple);
      if (ec || n == 0) {
        break;
      }
      touch();
      pos = 0;
      end = n;
    }
    if (!request_started_) {
      request_started_ = std::chrono::steady_clock::now();
    }
    auto const [what, consumed] = reader_.feed(std::string_view(buf.data() + pos, end - pos));
    pos += consumed;
    if (what == request_reader::event::request) {
      request_started_.reset();
      http_request& req = reader_.request();
      req.peer_is_loopback = peer_is_loopback_;
      req.json = &json_;
      auto const next = co_await handle_request();
      if (next == outcome::close) {
        break;
      }
      continue;
    }
    if (what == request_reader::event::refused) {
      co_await send_refusal(reader_.refusal_status(), reader_.refusal());
      co_await linger_close();
      break;
    }
    if (reader_.take_continue()) {
      if (bool const ok = co_await write("HTTP/1.1 100 Continue\r\n\r\n"); !ok) {
        break;
      }
    }
  }
  done_ = true;
  close();
}

asio::awaitable<connection::outcome> connection::send_refusal(int status, std::string_view why) {
  head_only_ = false; // no request was read: whatever the bytes said, the refusal has a body
  http_reply r = svc_.error_reply(status, "invalid_request", "Malformed HTTP request: " + std::string(why) + ".");
  if (!reader_.admin_call()) {
    svc_.note_response(status);
  }
  co_return co_await send(r, false);
}

/// After refusing a request, stop sending but keep reading (and discarding) for a while: closing with unread data
/// would reset the connection and could destroy the 400 before the client reads it (nginx's "lingering close").
asio::awaitable<void> connection::linger_close() {
  std::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  asio::steady_timer deadline(socket_.get_executor());
  deadline.expires_after(std::chrono::seconds(2));
  deadline.async_wait([this](std::error_code wait_ec) {
    if (!wait_ec) {
      std::error_code ignored;
      socket_.close(ignored);
    }
  });
  std::vector<char> sink(64 * 1024);
  std::size_t discarded = 0;
  while (discarded < std::size_t{32} * 1024 * 1024) {
    auto [read_ec, n] = co_await socket_.async_read_some(asio::buffer(sink), use_tuple);
    if (read_ec || n == 0) {
      break;
    }
    discarded += n;
  }
  deadline.cancel();
}

http_reply connection::handle_admin() {
  auto json = [](std::string&& body) {
    http_reply r;
    r.body = std::move(body);
    return r;
  };
  if (!peer_is_loopback_) {
    return svc_.error_reply(403, "forbidden", "The admin API answers loopback clients only.");
  }
  http_request const& req = reader_.request();
  std::string_view const path = req.path();
  std::string_view const method = req.method;
  bool const get = method == "GET" || method == "HEAD"; // a HEAD is answered as a GET, without the body
  if (path == "/_emulator/stats" && get) {
    return json(svc_.stats_json());
  }
  if (path == "/_emulator/faults" && method == "POST") {
    try {
      auto rules = parse_fault_rules(req.body);
      auto n = rules.size();
      svc_.install_faults(std::move(rules));
      return json("{\"installed\":" + std::to_string(n) + "}");
    } catch (config_error const& e) {
      return svc_.error_reply(400, "invalid_request", e.what());
    }
  }
  if (path == "/_emulator/faults" && method == "DELETE") {
    return json("{\"cleared\":" + std::to_string(svc_.clear_faults()) + "}");
  }
  if (path == "/_emulator/clock" && (method == "POST" || get)) {
    return handle_clock();
  }
  // An endpoint asked with a method it does not take: 405 with the methods it does (RFC 9110 §15.5.6), as the API's.
  std::string_view allow;
  if (path == "/_emulator/stats") {
    allow = "GET, HEAD";
  } else if (path == "/_emulator/faults") {
    allow = "POST, DELETE";
  } else if (path == "/_emulator/clock") {
    allow = "GET, HEAD, POST";
  }
  if (!allow.empty()) {
    return svc_.error_reply(405, "invalid_request", "Method not allowed on this endpoint.", {},
                            "Allow: " + std::string(allow) + "\r\n");
  }
  return svc_.error_reply(404, "not_found", "No such admin endpoint.");
}

/// `GET /_emulator/clock` reads the emulator clock; `POST {"advance_ms":N}` moves a manual one first.
http_reply connection::handle_clock() {
  http_request const& req = reader_.request();
  if (req.method == std::string_view("POST")) {
    if (!clock_.manual()) {
      return svc_.error_reply(409, "invalid_request", "The emulator was not started with --manual-clock.");
    }
    std::int64_t ms = 0;
    if (json_.parse(req.body.data(), req.body.size(), true)["advance_ms"].get_int64().get(ms) != simdjson::SUCCESS ||
        ms < 0) {
      return svc_.error_reply(400, "invalid_request", "Expected {\"advance_ms\": N} with N >= 0.");
    }
    if (!clock_.advance(std::chrono::milliseconds(ms))) {
      return svc_.error_reply(400, "invalid_request",
                              "advance_ms would move the clock past 2200-01-01T00:00:00Z, the last time it reaches.");
    }
  }
  auto now = clock_.now();
  http_reply r;
  json_writer w(r.body);
  w.begin_object()
      .field("now", rfc3339(now))
      .field("now_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count())
      .field("manual", clock_.manual())
      .end_object();
  return r;
}

asio::awaitable<connection::outcome> connection::handle_request() {
  bool keep_alive = reader_.request().keep_alive;
  head_only_ = reader_.request().method == "HEAD";
  if (reader_.admin_call()) {
    // Named: temporaries inside co_await expressions are where GCC 12's coroutine bugs live.
    auto reply = handle_admin();
    co_return co_await send(reply, keep_alive);
  }
  service& svc = svc_;
  // docs/protocol.md §4: a scripted fault answers before authentication and idempotency are looked at.
  auto fault = svc.take_fault(reader_.request().path());
  bool stale_db = false;
  std::chrono::milliseconds delay{0};
  if (fault) {
    switch (fault->kind) {
    case fault_kind::status: {
      auto r = svc.fault_reply(*fault, reader_.request());
      svc.note_response(r.status);
      co_return co_await send(r, keep_alive);
    }
    case fault_kind::drop_after_read: co_return outcome::close;
    case fault_kind::delay: delay = std::chrono::milliseconds(fault->ms); break;
    case fault_kind::stale_db: stale_db = true; break;
    default: break;
    }
  }
  http_reply r;
  // While the service works on the request (a delay fault, a play held for room) the connection is not idle; its
  // writes are not covered: a peer that stops reading is idle, and the watchdog closes it.
  answering_ = true;
  if (delay.count() > 0) {
    // The watch looks at the peer from now on, not at the idle deadline it was armed for. Only for a delay fault,
    // which may last minutes: a held play ends within `hold_window`, and every other request at once, so the
    // common path keeps its one timer wait per idle period.
    watchdog_.cancel();
  }
  try {
    r = co_await svc.handle(reader_.request(), stale_db, delay);
  } catch (std::exception const& e) {
    r = svc.error_reply(500, "internal", e.what());
  }
  answering_ = false;
  touch();
  svc.note_response(r.status);
  co_return co_await deliver(std::move(r), fault, keep_alive);
}

/// Writes a reply, damaged as the fault rule says (reset, truncate, garbage, huge, slow_body, unreadable_item) or
/// intact.
asio::awaitable<connection::outcome> connection::deliver(http_reply r, std::optional<fault_rule> const& fault,
                                                         bool keep_alive) {
  fault_kind kind = fault ? fault->kind : fault_kind::status;
  if (head_only_) {
    co_return co_await send(r, keep_alive); // the faults that damage a body have none to damage
  }
  switch (kind) {
  case fault_kind::reset: co_return co_await deliver_reset(r, keep_alive);
  case fault_kind::truncate: r.body.resize(r.body.size() / 2); co_return co_await send(r, keep_alive);
  case fault_kind::garbage:
    r.body = "<html><body>upstream sent garbage \x01\x02\xff }{ ,,, not JSON</body></html>";
    co_return co_await send(r, keep_alive);
  case fault_kind::huge: co_return co_await deliver_huge(r, fault->bytes, keep_alive);
  case fault_kind::unreadable_item: make_item_unreadable(r.body, fault->item); co_return co_await send(r, keep_alive);
  case fault_kind::slow_body: co_return co_await deliver_slow(r, fault->bytes_per_s, keep_alive);
  default: co_return co_await send(r, keep_alive);
  }
}

/// Headers and half the body, then a TCP reset.
asio::awaitable<connection::outcome> connection::deliver_reset(http_reply const& r, bool keep_alive) {
  out_.clear();
  head(out_, r, r.body.size(), keep_alive);
  out_.append(r.body, 0, r.body.size() / 2);
  co_await write(out_);
  reset_connection();
  co_return outcome::close;
}

/// The real body with an extra field of `padding` bytes of filler: valid JSON, larger than a client's cap.
asio::awaitable<connection::outcome> connection::deliver_huge(http_reply const& r, std::uint64_t padding,
                                                              bool keep_alive) {
  std::string_view body = r.body;
  bool object = !body.empty() && body.back() == '}';
  std::string_view prefix = object ? body.substr(0, body.size() - 1) : body;
  std::string_view open = object ? std::string_view(R"(,"padding":")") : std::string_view();
  std::string_view close_str = object ? std::string_view("\"}") : std::string_view();
  out_.clear();
  head(out_, r, prefix.size() + open.size() + padding + close_str.size(), keep_alive);
  out_.append(prefix).append(open);
  if (bool const ok = co_await write(out_); !ok) {
    co_return outcome::close;
  }
  std::string chunk(64 * 1024, 'x');
  while (padding > 0) {
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(padding, chunk.size()));
    if (bool const ok = co_await write(std::string_view(chunk).substr(0, n)); !ok) {
      co_return outcome::close;
    }
    padding -= n;
  }
  if (bool const ok = co_await write(close_str); !ok) {
    co_return outcome::close;
  }
  co_return keep_alive ? outcome::keep_open : outcome::close;
}

/// The headers at once, then the body dripped at `bytes_per_s`.
asio::awaitable<connection::outcome> connection::deliver_slow(http_reply const& r, std::uint64_t bytes_per_s,
                                                              bool keep_alive) {
  out_.clear();
  head(out_, r, r.body.size(), keep_alive);
  if (bool const ok = co_await write(out_); !ok) {
    co_return outcome::close;
  }
  // Drip in 10 steps a second (or one byte per step below 10 bytes/s).
  auto bps = std::max<std::uint64_t>(bytes_per_s, 1);
  std::size_t step = static_cast<std::size_t>(std::max<std::uint64_t>(bps / 10, 1));
  auto interval = std::chrono::microseconds(1000000 * step / bps);
  asio::steady_timer t(socket_.get_executor());
  for (std::size_t off = 0; off < r.body.size(); off += step) {
    t.expires_after(interval);
    co_await t.async_wait(use_tuple);
    if (bool const ok = co_await write(std::string_view(r.body).substr(off, step)); !ok) {
      co_return outcome::close;
    }
  }
  co_return keep_alive ? outcome::keep_open : outcome::close;
}

} // namespace wandura::emulator::detail
