// The emulator's server: its io_context and threads, the accept loop, and the public `server` API. Each accepted
// socket becomes a `detail::connection` (connection.cpp: HTTP, admin API, fault delivery); what the API decides
// lives in service.cpp.
#include "wandura/emulator/emulator.hpp"

#include "emulator/connection.hpp"
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

#include <algorithm>
#include <system_error>
#include <thread>

namespace wandura::emulator {

namespace {

using asio::ip::tcp;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

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
    auto conn = std::make_shared<detail::connection>(std::move(socket), svc, clock);
    asio::co_spawn(conn->executor(), conn->run(conn), asio::detached);
    asio::co_spawn(conn->executor(), conn->watch(conn), asio::detached);
  }
}

server::server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

server::~server() {
  stop();
}

std::unique_ptr<server> server::start(config cfg) {
  detail::check_config(cfg);
  unsigned const threads = cfg.threads;
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
  try {
    p->acceptor->open(endpoint.protocol());
    p->acceptor->set_option(asio::socket_base::reuse_address(true));
    p->acceptor->bind(endpoint);
    p->acceptor->listen(asio::socket_base::max_listen_connections);
  } catch (std::system_error const& e) { // "bind: Address already in use" names neither
    throw std::system_error(e.code(), "cannot listen on " + (address.is_v6() ? "[" + host + "]" : host) + ":" +
                                          std::to_string(port));
  }
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
  if (!impl_->clock.advance(by)) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "advance_clock: the clock cannot move past 2200-01-01T00:00:00Z");
  }
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
