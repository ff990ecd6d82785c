// The HTTP/1.1 side of the emulator: accept loop, keep-alive connections parsed with http_parser (libhttp-parser),
// the admin API of SPEC §4 and the delivery of scripted faults. What the API decides lives in service.cpp.
#include "wandura/emulator/emulator.hpp"

#include "emulator/json_writer.hpp"
#include "emulator/service.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <http_parser.h>

#include <algorithm>
#include <thread>

namespace wandura::emulator {

namespace {

using asio::ip::tcp;
using detail::http_reply;
using detail::http_request;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

/// SPEC/issue: request bodies above 64 KiB are refused with 400.
constexpr std::size_t max_body_bytes = std::size_t{64} * 1024;
constexpr std::size_t max_target_bytes = std::size_t{8} * 1024;
constexpr std::size_t max_header_value_bytes = std::size_t{8} * 1024;

} // namespace

struct server::impl {
  explicit impl(config c) : clock(c.manual_clock), svc(std::move(c), clock) {}

  asio::awaitable<void> accept_loop();

  detail::emulator_clock clock;
  detail::service svc;
  std::optional<asio::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::uint16_t port = 0;
  std::string host;
  bool single_threaded = true;
  std::mutex stop_mutex;
  bool stopped = false;
};

namespace {

/// One keep-alive connection: reads requests through http_parser, answers them one at a time (pipelined requests
/// are answered in order), closes on error, on `Connection: close` or after `idle_timeout` without traffic.
class connection {
public:
  connection(tcp::socket socket, server::impl& srv)
      : socket_(std::move(socket)), srv_(srv), watchdog_(socket_.get_executor()) {
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
    std::error_code ec;
    auto peer = socket_.remote_endpoint(ec);
    peer_is_loopback_ = !ec && peer.address().is_loopback();
    socket_.set_option(tcp::no_delay(true), ec);
    touch();
  }

  // Each takes the connection's owner as a parameter: coroutine parameters are copied into the frame when it is
  // created, so the connection lives as long as either coroutine, even before they first run.
  asio::awaitable<void> run(std::shared_ptr<connection> self);
  asio::awaitable<void> watch(std::shared_ptr<connection> self);
  [[nodiscard]] tcp::socket::executor_type executor() { return socket_.get_executor(); }

private:
  enum class outcome { keep_open, close };

  static http_parser_settings const& settings();
  static connection& self(http_parser* p) { return *static_cast<connection*>(p->data); }

  static int on_message_begin(http_parser* p) {
    auto& c = self(p);
    c.req_ = http_request{};
    c.field_.clear();
    c.value_.clear();
    c.in_value_ = false;
    c.bad_request_.clear();
    c.expect_continue_ = false;
    c.sent_continue_ = false;
    return 0;
  }
  static int on_url(http_parser* p, char const* at, std::size_t n) {
    auto& c = self(p);
    if (c.req_.target.size() + n > max_target_bytes) {
      c.bad_request_ = "request target longer than 8192 bytes";
      return -1;
    }
    c.req_.target.append(at, n);
    return 0;
  }
  static int on_header_field(http_parser* p, char const* at, std::size_t n) {
    auto& c = self(p);
    if (c.in_value_ && !c.commit_header()) {
      return -1;
    }
    c.field_.append(at, std::min<std::size_t>(n, 256));
    return 0;
  }
  static int on_header_value(http_parser* p, char const* at, std::size_t n) {
    auto& c = self(p);
    c.in_value_ = true;
    if (c.value_.size() + n > max_header_value_bytes) {
      c.bad_request_ = "header value longer than 8192 bytes";
      return -1;
    }
    c.value_.append(at, n);
    return 0;
  }
  static int on_headers_complete(http_parser* p) {
    auto& c = self(p);
    if (c.in_value_ && !c.commit_header()) {
      return -1;
    }
    if (p->http_major != 1) {
      c.bad_request_ = "HTTP version not supported";
      return -1;
    }
    if ((p->flags & F_CONTENTLENGTH) != 0 && p->content_length > max_body_bytes) {
      c.bad_request_ = "request body larger than 65536 bytes";
      return -1;
    }
    c.req_.method = http_method_str(static_cast<http_method>(p->method));
    c.req_.keep_alive = http_should_keep_alive(p) != 0;
    c.req_.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(p->content_length, max_body_bytes)) +
                        simdjson::SIMDJSON_PADDING);
    return 0;
  }
  static int on_body(http_parser* p, char const* at, std::size_t n) {
    auto& c = self(p);
    if (c.req_.body.size() + n > max_body_bytes) {
      c.bad_request_ = "request body larger than 65536 bytes";
      return -1;
    }
    c.req_.body.append(at, n);
    return 0;
  }
  static int on_message_complete(http_parser* p) {
    self(p).complete_ = true;
    http_parser_pause(p, 1);
    return 0;
  }

  bool commit_header() {
    in_value_ = false;
    while (!value_.empty() && (value_.back() == ' ' || value_.back() == '\t')) {
      value_.pop_back();
    }
    auto set_once = [&](bool& has, std::string& slot, std::string_view name) {
      if (has) {
        bad_request_ = "repeated " + std::string(name) + " header";
        return false;
      }
      has = true;
      slot = value_;
      return true;
    };
    // http_parser (non-strict build) tolerates some bad header bytes; RFC 9110 does not.
    auto tchar = [](char ch) {
      auto u = static_cast<unsigned char>(ch);
      return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
             std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
    };
    if (field_.empty() || !std::all_of(field_.begin(), field_.end(), tchar)) {
      bad_request_ = "invalid header name";
      return false;
    }
    if (std::any_of(value_.begin(), value_.end(), [](char ch) {
          auto u = static_cast<unsigned char>(ch);
          return (u < 0x20 && u != '\t') || u == 0x7F;
        })) {
      bad_request_ = "invalid header value";
      return false;
    }
    bool ok = true;
    if (detail_iequals(field_, "authorization")) {
      ok = set_once(req_.has_authorization, req_.authorization, "Authorization");
    } else if (detail_iequals(field_, "idempotency-key")) {
      ok = set_once(req_.has_idempotency_key, req_.idempotency_key, "Idempotency-Key");
    } else if (detail_iequals(field_, "expect")) {
      expect_continue_ = detail_iequals(value_, "100-continue");
    }
    field_.clear();
    value_.clear();
    return ok;
  }

  static bool detail_iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
             return lower(x) == lower(y);
           });
  }

  void touch() { last_activity_ = std::chrono::steady_clock::now(); }

  void close() {
    std::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    watchdog_.cancel();
  }

  void reset_connection() {
    std::error_code ec;
    socket_.set_option(asio::socket_base::linger(true, 0), ec);
    socket_.close(ec);
    watchdog_.cancel();
  }

  std::string const& date_header() {
    auto now = srv_.clock.now();
    auto second = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    if (second != date_second_) {
      date_second_ = second;
      date_ = detail::http_date(now);
    }
    return date_;
  }

  /// Status line and headers for a body of `content_length` bytes.
  void head(std::string& out, http_reply const& r, std::size_t content_length, bool keep_alive) {
    out.append("HTTP/1.1 ").append(std::to_string(r.status)).push_back(' ');
    out.append(detail::reason_phrase(r.status)).append("\r\nDate: ").append(date_header());
    out.append("\r\nContent-Type: application/json\r\nContent-Length: ").append(std::to_string(content_length));
    out.append(keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n");
    out.append(r.headers).append("\r\n");
  }

  asio::awaitable<bool> write(std::string_view bytes);
  asio::awaitable<outcome> send(http_reply const& r, bool keep_alive);
  asio::awaitable<outcome> send_bad_request(std::string_view why);
  asio::awaitable<void> linger_close();
  asio::awaitable<outcome> handle_request();
  asio::awaitable<outcome> deliver(http_reply r, std::optional<fault_rule> const& fault, bool keep_alive);
  http_reply handle_admin();

  tcp::socket socket_;
  server::impl& srv_;
  asio::steady_timer watchdog_;
  std::chrono::steady_clock::time_point last_activity_;
  bool peer_is_loopback_ = false;
  bool done_ = false;

  http_parser parser_{};
  http_request req_;
  simdjson::dom::parser json_;
  std::string field_;
  std::string value_;
  bool in_value_ = false;
  bool complete_ = false;
  bool expect_continue_ = false;
  bool sent_continue_ = false;
  std::string bad_request_;
  std::string out_;
  std::string date_;
  std::int64_t date_second_ = -1;
};

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
  out_.append(r.body);
  if (bool const ok = co_await write(out_); !ok) {
    co_return outcome::close;
  }
  co_return keep_alive ? outcome::keep_open : outcome::close;
}

http_parser_settings const& connection::settings() {
  static http_parser_settings const s = [] {
    http_parser_settings st{};
    st.on_message_begin = &connection::on_message_begin;
    st.on_url = &connection::on_url;
    st.on_header_field = &connection::on_header_field;
    st.on_header_value = &connection::on_header_value;
    st.on_headers_complete = &connection::on_headers_complete;
    st.on_body = &connection::on_body;
    st.on_message_complete = &connection::on_message_complete;
    return st;
  }();
  return s;
}

asio::awaitable<void> connection::watch(std::shared_ptr<connection> /*self*/) {
  auto idle = srv_.svc.cfg().idle_timeout;
  while (!done_) {
    watchdog_.expires_after(idle);
    auto [ec] = co_await watchdog_.async_wait(use_tuple);
    if (done_) {
      break;
    }
    if (!ec && std::chrono::steady_clock::now() - last_activity_ >= idle) {
      close();
      break;
    }
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
    auto parsed = http_parser_execute(&parser_, &settings(), buf.data() + pos, end - pos);
    pos += parsed;
    auto err = HTTP_PARSER_ERRNO(&parser_);
    if (complete_) {
      complete_ = false;
      http_parser_pause(&parser_, 0);
      req_.peer_is_loopback = peer_is_loopback_;
      req_.json = &json_;
      if (parser_.upgrade != 0 || req_.method == std::string_view("CONNECT")) {
        co_await send_bad_request("protocol upgrades are not supported");
        co_await linger_close();
        break;
      }
      if (co_await handle_request() == outcome::close) {
        break;
      }
      continue;
    }
    if (err != HPE_OK) {
      // Named first: GCC 12 destroys a temporary of a conditional inside a co_await expression twice.
      std::string why = bad_request_.empty() ? std::string(http_errno_description(err)) : bad_request_;
      co_await send_bad_request(why);
      co_await linger_close();
      break;
    }
    if (parser_.upgrade != 0) {
      co_await send_bad_request("protocol upgrades are not supported");
      co_await linger_close();
      break;
    }
    pos = end; // everything was consumed; read more
    if (expect_continue_ && !sent_continue_) {
      sent_continue_ = true;
      if (bool const ok = co_await write("HTTP/1.1 100 Continue\r\n\r\n"); !ok) {
        break;
      }
    }
  }
  done_ = true;
  close();
}

asio::awaitable<connection::outcome> connection::send_bad_request(std::string_view why) {
  http_reply r = srv_.svc.error_reply(400, "invalid_request", "Malformed HTTP request: " + std::string(why) + ".");
  srv_.svc.note_response(400);
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
  auto& svc = srv_.svc;
  auto path = req_.path();
  auto json = [](std::string&& body) {
    http_reply r;
    r.body = std::move(body);
    return r;
  };
  if (!peer_is_loopback_) {
    return svc.error_reply(403, "forbidden", "The admin API answers loopback clients only.");
  }
  std::string_view method = req_.method;
  if (path == "/_emulator/stats" && method == "GET") {
    return json(svc.stats_json());
  }
  if (path == "/_emulator/faults" && method == "POST") {
    try {
      auto rules = parse_fault_rules(req_.body);
      auto n = rules.size();
      svc.install_faults(std::move(rules));
      return json("{\"installed\":" + std::to_string(n) + "}");
    } catch (config_error const& e) {
      return svc.error_reply(400, "invalid_request", e.what());
    }
  }
  if (path == "/_emulator/faults" && method == "DELETE") {
    return json("{\"cleared\":" + std::to_string(svc.clear_faults()) + "}");
  }
  if (path == "/_emulator/clock" && (method == "POST" || method == "GET")) {
    if (method == "POST") {
      if (!srv_.clock.manual()) {
        return svc.error_reply(409, "invalid_request", "The emulator was not started with --manual-clock.");
      }
      std::int64_t ms = 0;
      if (json_.parse(req_.body.data(), req_.body.size(), true)["advance_ms"].get_int64().get(ms) !=
              simdjson::SUCCESS ||
          ms < 0) {
        return svc.error_reply(400, "invalid_request", "Expected {\"advance_ms\": N} with N >= 0.");
      }
      srv_.clock.advance(std::chrono::milliseconds(ms));
    }
    auto now = srv_.clock.now();
    std::string body;
    detail::json_writer w(body);
    w.begin_object()
        .field("now", detail::rfc3339(now))
        .field("now_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count())
        .field("manual", srv_.clock.manual())
        .end_object();
    return json(std::move(body));
  }
  return svc.error_reply(404, "not_found", "No such admin endpoint.");
}

asio::awaitable<connection::outcome> connection::handle_request() {
  bool keep_alive = req_.keep_alive;
  if (req_.path().starts_with("/_emulator/")) {
    // Named: temporaries inside co_await expressions are where GCC 12's coroutine bugs live.
    auto reply = handle_admin();
    co_return co_await send(reply, keep_alive);
  }
  auto& svc = srv_.svc;
  // SPEC §4: a scripted fault answers before authentication and idempotency are looked at.
  auto fault = svc.take_fault(req_.path());
  bool stale_db = false;
  std::chrono::milliseconds delay{0};
  if (fault) {
    switch (fault->kind) {
    case fault_kind::status: {
      auto r = svc.fault_reply(*fault, req_);
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
  try {
    r = co_await svc.handle(req_, stale_db, delay);
  } catch (std::exception const& e) {
    r = svc.error_reply(500, "internal", e.what());
  }
  svc.note_response(r.status);
  co_return co_await deliver(std::move(r), fault, keep_alive);
}

/// Writes a reply, damaged as the fault rule says (reset, truncate, garbage, huge, slow_body) or intact.
asio::awaitable<connection::outcome> connection::deliver(http_reply r, std::optional<fault_rule> const& fault,
                                                         bool keep_alive) {
  fault_kind kind = fault ? fault->kind : fault_kind::status;
  switch (kind) {
  case fault_kind::reset: {
    out_.clear();
    head(out_, r, r.body.size(), keep_alive);
    out_.append(r.body, 0, r.body.size() / 2);
    co_await write(out_);
    reset_connection();
    co_return outcome::close;
  }
  case fault_kind::truncate: r.body.resize(r.body.size() / 2); co_return co_await send(r, keep_alive);
  case fault_kind::garbage:
    r.body = "<html><body>upstream sent garbage \x01\x02\xff }{ ,,, not JSON</body></html>";
    co_return co_await send(r, keep_alive);
  case fault_kind::huge: {
    // The real body with an extra field of `bytes` filler: valid JSON, larger than a client's cap.
    std::string_view body = r.body;
    bool object = !body.empty() && body.back() == '}';
    std::string_view prefix = object ? body.substr(0, body.size() - 1) : body;
    std::string_view open = object ? std::string_view(R"(,"padding":")") : std::string_view();
    std::string_view close_str = object ? std::string_view("\"}") : std::string_view();
    auto padding = fault->bytes;
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
  case fault_kind::slow_body: {
    out_.clear();
    head(out_, r, r.body.size(), keep_alive);
    if (bool const ok = co_await write(out_); !ok) {
      co_return outcome::close;
    }
    // Drip in 10 steps a second (or one byte per step below 10 bytes/s).
    auto bps = std::max<std::uint64_t>(fault->bytes_per_s, 1);
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
  default: co_return co_await send(r, keep_alive);
  }
}

} // namespace

asio::awaitable<void> server::impl::accept_loop() {
  for (;;) {
    // A connection's two coroutines (requests and idle watchdog) share its socket: with several threads they run
    // on a strand; with one thread the io_context itself serialises them and a strand would only cost time.
    asio::any_io_executor conn_ex =
        single_threaded ? asio::any_io_executor(ioc->get_executor()) : asio::any_io_executor(asio::make_strand(*ioc));
    auto [ec, socket] = co_await acceptor->async_accept(conn_ex, use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) {
        co_return;
      }
      // Out of descriptors or a transient accept error: back off briefly instead of spinning.
      asio::steady_timer t(*ioc, std::chrono::milliseconds(50));
      co_await t.async_wait(use_tuple);
      continue;
    }
    auto conn = std::make_shared<connection>(std::move(socket), *this);
    asio::co_spawn(conn->executor(), conn->run(conn), asio::detached);
    asio::co_spawn(conn->executor(), conn->watch(conn), asio::detached);
  }
}

server::server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

server::~server() {
  stop();
}

std::unique_ptr<server> server::start(config cfg) {
  unsigned threads = std::max(1u, cfg.threads);
  auto host = cfg.host;
  auto port = cfg.port;
  auto p = std::make_unique<impl>(std::move(cfg));
  p->ioc.emplace(static_cast<int>(threads));
  p->single_threaded = threads == 1;
  std::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) {
    throw config_error("host: \"" + host + "\" is not an IP address");
  }
  tcp::endpoint endpoint(address, port);
  p->acceptor.emplace(*p->ioc);
  p->acceptor->open(endpoint.protocol());
  p->acceptor->set_option(asio::socket_base::reuse_address(true));
  p->acceptor->bind(endpoint);
  p->acceptor->listen(asio::socket_base::max_listen_connections);
  p->port = p->acceptor->local_endpoint().port();
  p->host = host;
  asio::co_spawn(*p->ioc, p->accept_loop(), asio::detached);
  for (unsigned i = 0; i < threads; ++i) {
    p->threads.emplace_back([io = &*p->ioc] { io->run(); });
  }
  return std::unique_ptr<server>(new server(std::move(p)));
}

std::uint16_t server::port() const noexcept {
  return impl_->port;
}

std::string server::base_url() const {
  auto const& h = impl_->host;
  bool v6 = h.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

stats_snapshot server::stats() const {
  return impl_->svc.stats();
}

std::string server::stats_json() const {
  return impl_->svc.stats_json();
}

void server::install_faults(std::string_view json) {
  impl_->svc.install_faults(parse_fault_rules(json));
}

void server::install_faults(std::vector<fault_rule> rules) {
  impl_->svc.install_faults(std::move(rules));
}

void server::clear_faults() {
  impl_->svc.clear_faults();
}

void server::advance_clock(std::chrono::milliseconds by) {
  if (!impl_->clock.manual()) {
    throw std::logic_error("advance_clock: the emulator was not started with manual_clock");
  }
  impl_->clock.advance(by);
}

std::chrono::system_clock::time_point server::now() const {
  return impl_->clock.now();
}

void server::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  for (auto const& t : impl_->threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      throw std::logic_error("server::stop called from one of the emulator's own threads (it would join itself)");
    }
  }
  if (impl_->stopped) {
    return;
  }
  impl_->stopped = true;
  asio::post(*impl_->ioc, [this] {
    std::error_code ec;
    impl_->acceptor->close(ec);
  });
  impl_->ioc->stop();
  for (auto& t : impl_->threads) {
    t.join();
  }
  impl_->threads.clear();
  // Destroying the io_context destroys every suspended connection, closing its socket.
  impl_->acceptor.reset();
  impl_->ioc.reset();
}

} // namespace wandura::emulator
