// A small blocking HTTP/1.1 client for the emulator's black-box tests: keep-alive requests, raw bytes, and the
// response exactly as it came off the socket (so that damaged responses can be asserted on). Deliberately not the
// SDK's transport: the emulator must be testable on its own (ADR 0001). Every read waits at most the client's
// timeout (poll before read), so a test can never hang on a silent server.
#pragma once

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <http_parser.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wandura::testing {

struct http_result {
  /// 0 when no status line arrived (connection closed or reset first).
  int status = 0;
  /// The status line's reason phrase, e.g. "OK".
  std::string reason;
  /// Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
  /// True when the whole message (per Content-Length) arrived.
  bool complete = false;
  /// True when the server closed (or reset) the connection before a complete message.
  bool closed_early = false;
  /// True when nothing arrived within the client's timeout.
  bool timed_out = false;
  std::chrono::steady_clock::duration elapsed{};

  [[nodiscard]] std::string header(std::string const& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  [[nodiscard]] bool has_header(std::string const& name) const { return headers.count(name) != 0; }
  [[nodiscard]] nlohmann::json json() const { return nlohmann::json::parse(body); }
  [[nodiscard]] bool is_json() const { return nlohmann::json::accept(body); }
};

class http_test_client {
public:
  explicit http_test_client(std::uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : port_(port), timeout_(timeout) {}

  /// Sends one request on the kept-alive connection (reconnecting when needed) and reads the response.
  http_result request(std::string_view method, std::string_view target, std::string_view body = {},
                      std::vector<std::pair<std::string, std::string>> const& headers = {}) {
    std::string raw;
    raw.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (auto const& [k, v] : headers) {
      raw.append(k).append(": ").append(v).append("\r\n");
    }
    if (!body.empty() || method == "POST") {
      raw.append("Content-Type: application/json\r\nContent-Length: ").append(std::to_string(body.size()));
      raw.append("\r\n");
    }
    raw.append("\r\n").append(body);
    // A response to HEAD has a Content-Length but no body (RFC 9110 §9.3.2): the parser must not wait for one.
    head_ = method == "HEAD";
    auto result = send_raw(raw);
    head_ = false;
    return result;
  }

  /// `POST /v1/playback/tickets` with the bearer key and, when given, an idempotency key.
  http_result tickets(std::string_view body, std::string const& key = "test-key",
                      std::string const& idempotency_key = {}) {
    std::vector<std::pair<std::string, std::string>> h;
    if (!key.empty()) {
      h.emplace_back("Authorization", "Bearer " + key);
    }
    if (!idempotency_key.empty()) {
      h.emplace_back("Idempotency-Key", idempotency_key);
    }
    return request("POST", "/v1/playback/tickets", body, h);
  }

  http_result get(std::string_view target, std::string const& key = "test-key") {
    std::vector<std::pair<std::string, std::string>> h;
    if (!key.empty()) {
      h.emplace_back("Authorization", "Bearer " + key);
    }
    return request("GET", target, {}, h);
  }

  /// Writes `raw` as is and reads one response (or until the server closes).
  http_result send_raw(std::string_view raw) {
    auto start = std::chrono::steady_clock::now();
    http_result result;
    ensure_connected();
    write_all(raw);
    // Even when the write failed (the server may refuse early and close), read what the server sent.
    result = read_response();
    result.elapsed = std::chrono::steady_clock::now() - start;
    return result;
  }

  /// Writes bytes without reading (for requests sent in pieces); errors are ignored.
  void write_only(std::string_view raw) {
    ensure_connected();
    write_all(raw);
  }

  /// Reads one response on the current connection.
  http_result read_response() {
    http_result r;
    parse_state st{&r, {}, {}, false, head_};
    http_parser parser;
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = &st;
    http_parser_settings s{};
    s.on_status = [](http_parser* p, char const* at, std::size_t n) {
      static_cast<parse_state*>(p->data)->r->reason.append(at, n);
      return 0;
    };
    s.on_header_field = [](http_parser* p, char const* at, std::size_t n) {
      auto& ps = *static_cast<parse_state*>(p->data);
      if (ps.in_value) {
        ps.commit();
      }
      ps.field.append(at, n);
      return 0;
    };
    s.on_header_value = [](http_parser* p, char const* at, std::size_t n) {
      auto& ps = *static_cast<parse_state*>(p->data);
      ps.in_value = true;
      ps.value.append(at, n);
      return 0;
    };
    s.on_headers_complete = [](http_parser* p) {
      auto& ps = *static_cast<parse_state*>(p->data);
      if (ps.in_value) {
        ps.commit();
      }
      ps.r->status = static_cast<int>(p->status_code);
      return ps.no_body ? 1 : 0; // 1: the message ends at its headers
    };
    s.on_body = [](http_parser* p, char const* at, std::size_t n) {
      static_cast<parse_state*>(p->data)->r->body.append(at, n);
      return 0;
    };
    s.on_message_complete = [](http_parser* p) {
      static_cast<parse_state*>(p->data)->r->complete = true;
      http_parser_pause(p, 1);
      return 0;
    };
    // Bytes of a previous read beyond the message it completed (pipelined responses) come first.
    std::string data = std::move(pending_);
    pending_.clear();
    char buf[16384];
    for (;;) {
      if (!data.empty()) {
        auto used = http_parser_execute(&parser, &s, data.data(), data.size());
        if (r.complete) {
          pending_ = data.substr(used);
          if (r.header("connection") == "close") {
            socket_.reset();
          }
          return r;
        }
        if (HTTP_PARSER_ERRNO(&parser) != HPE_OK) {
          r.closed_early = true;
          socket_.reset();
          return r;
        }
        data.clear();
      }
      // Bounded wait: Asio's blocking reads ignore SO_RCVTIMEO, so poll first.
      pollfd pfd{socket_->native_handle(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(timeout_.count())) <= 0) {
        r.timed_out = true;
        r.closed_early = !r.complete;
        socket_.reset();
        return r;
      }
      std::error_code ec;
      auto n = socket_->read_some(asio::buffer(buf), ec);
      if (ec || n == 0) {
        http_parser_execute(&parser, &s, buf, 0); // EOF: ends a close-delimited body
        r.closed_early = !r.complete;
        socket_.reset();
        return r;
      }
      data.assign(buf, n);
    }
  }

  /// Closes the connection.
  void disconnect() {
    socket_.reset();
    pending_.clear();
  }
  [[nodiscard]] bool connected() const { return socket_ != nullptr; }

private:
  struct parse_state {
    http_result* r;
    std::string field;
    std::string value;
    bool in_value = false;
    bool no_body = false;
    void commit() {
      for (auto& c : field) {
        c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
      r->headers[field] = value;
      field.clear();
      value.clear();
      in_value = false;
    }
  };

  /// Writes as much of `raw` as the server takes, waiting at most the timeout for each step; returns whether all
  /// of it was written. Asio's blocking writes would ignore SO_SNDTIMEO, hence the poll.
  bool write_all(std::string_view raw) {
    (void)socket_->non_blocking(true);
    std::size_t off = 0;
    while (off < raw.size()) {
      pollfd pfd{socket_->native_handle(), POLLOUT, 0};
      if (::poll(&pfd, 1, static_cast<int>(timeout_.count())) <= 0) {
        break;
      }
      std::error_code ec;
      auto n = socket_->write_some(asio::buffer(raw.data() + off, raw.size() - off), ec);
      if (ec == asio::error::would_block) {
        continue;
      }
      if (ec) {
        break;
      }
      off += n;
    }
    (void)socket_->non_blocking(false);
    return off == raw.size();
  }

  void ensure_connected() {
    if (socket_) {
      return;
    }
    pending_.clear();
    socket_ = std::make_unique<asio::ip::tcp::socket>(io_);
    socket_->connect({asio::ip::make_address("127.0.0.1"), port_});
  }

  asio::io_context io_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::string pending_;
  bool head_ = false;
};

/// A ticket batch body. `items` are (film_ref, episode_no, intent).
inline std::string batch_body(std::vector<std::tuple<std::string, int, std::string>> const& items,
                              std::string const& union_info = "device-1", std::string const& viewer_ref = {}) {
  nlohmann::json j;
  j["episodes"] = nlohmann::json::array();
  for (auto const& [film, ep, intent] : items) {
    j["episodes"].push_back({{"film_ref", film}, {"episode_no", ep}, {"intent", intent}});
  }
  j["union_info"] = union_info;
  j["drm_kek"] = "kek-" + union_info;
  if (!viewer_ref.empty()) {
    j["viewer_ref"] = viewer_ref;
  }
  return j.dump();
}

/// One play item for `the-heiress-returns` episode `ep`.
inline std::string play(int ep = 1, std::string const& union_info = "device-1", std::string const& viewer_ref = {}) {
  return batch_body({{"the-heiress-returns", ep, "play"}}, union_info, viewer_ref);
}

} // namespace wandura::testing
