// What the transport's tests share: the JSON POST they send, and the nginx fixture's ports and certificate.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "wandura/transport/http_request.hpp"

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
