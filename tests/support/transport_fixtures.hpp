// What the transport's tests share: the JSON POST they send, requests sent together, and the nginx fixture's ports
// and certificate.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "run_awaitable.hpp"
#include "wandura/transport/http_request.hpp"
#include "wandura/transport/transport.hpp"

namespace test_support {

/// A POST of `body` as JSON to `url`, with a bearer key, as the client's calls send.
inline wandura::http_request post(std::string url, std::string body = R"({"items":[{"film_ref":"f1","episode":1}]})") {
  wandura::http_request r;
  r.method = wandura::http_method::post;
  r.url = std::move(url);
  r.headers = {{"Authorization", "Bearer test-key"}, {"Content-Type", "application/json"}};
  r.body = std::move(body);
  return r;
}

/// Sends `n` copies of `request` at once on `io`; their results in the order sent, each empty when it had none
/// within `limit`.
inline std::vector<std::optional<wandura::attempt_result>>
send_together(asio::io_context& io, wandura::transport& tr, wandura::http_request const& request, std::size_t n,
              std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  std::vector<std::optional<wandura::attempt_result>> results(n);
  auto const all_done = [&] {
    return std::all_of(results.begin(), results.end(), [](auto const& r) { return r.has_value(); });
  };
  run(io, [&]() -> asio::awaitable<int> {
    auto const ex = co_await asio::this_coro::executor;
    for (auto& slot : results) {
      asio::co_spawn(ex, tr.send_attempt(request, {}),
                     [&slot](std::exception_ptr, wandura::attempt_result r) { slot = std::move(r); });
    }
    asio::steady_timer t(ex);
    for (auto waited = std::chrono::milliseconds(0); waited < limit && !all_done();
         waited += std::chrono::milliseconds(5)) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(asio::use_awaitable);
    }
    co_return 0;
  }());
  return results;
}

/// The nginx fixture's settings (`wandura_nginx`, tests/support/nginx/nginx.sh): its nginx.env in WANDURA_NGINX_DIR,
/// read once; empty when the variable is not set.
inline std::map<std::string, std::string> const& nginx_env() {
  static std::map<std::string, std::string> const env = [] {
    std::map<std::string, std::string> out;
    char const* dir = std::getenv("WANDURA_NGINX_DIR");
    if (dir == nullptr) {
      return out;
    }
    std::ifstream in(std::string(dir) + "/nginx.env");
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq != std::string::npos) {
        out[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    return out;
  }();
  return env;
}

/// One of the fixture's settings (WANDURA_NGINX_HTTPS_PORT, WANDURA_NGINX_CA, ...); fails the test without it.
inline std::string nginx(std::string const& key) {
  auto const& env = nginx_env();
  auto it = env.find(key);
  if (it == env.end()) {
    FAIL("nginx is not running: run through ctest (fixture wandura_nginx) or set WANDURA_NGINX_DIR; missing " + key);
  }
  return it->second;
}

} // namespace test_support
