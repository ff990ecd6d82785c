// The loopback ceiling beside each comparison: what a dedicated load generator gets from the same nginx with the
// same request, `wrk` (HTTP/1.1, plain or TLS) or `h2load` (HTTP/2 over TLS, Debian's nghttp2-client). Neither
// verifies the server's certificate; both do TLS once per connection, which kept-alive runs amortise. Header-only.
#pragma once

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "loopback_bench.hpp"
#include "protocol.hpp"

namespace wandura::bench {

struct ceiling_result {
  double rate = 0;               ///< requests a second the generator completed with a 2xx answer
  double cpu_us_per_request = 0; ///< the generator's CPU (user + system) per request, microseconds
};

/// Runs `wrk` or `h2load` with one thread against nginx, posting `request_body` with the same header lines as the
/// libcurl sides (`Authorization`, `Content-Type`, libcurl's default `Accept: */*` unless the lines set their own,
/// and the given lines). `wrk` keeps `concurrency` connections; `h2load` opens one connection with `concurrency`
/// streams, as the HTTP/2 sides do. `h2load` also sends `accept-encoding: gzip, deflate`, which nginx here
/// ignores (gzip is off). Throws `std::runtime_error` when the tool cannot run, any request failed, or h2load did
/// not negotiate h2.
class load_ceiling {
public:
  /// Writes the wrk Lua script and the h2load body file into `work_dir` (which must exist).
  load_ceiling(std::string const& work_dir, std::vector<std::string> const& header_lines)
      : lua_path_(work_dir + "/ceiling_post.lua"), body_path_(work_dir + "/ceiling_body.json") {
    std::vector<std::string> lines = {"Authorization: Bearer bench-key", "Content-Type: application/json"};
    bool accept = false;
    for (auto const& line : header_lines) {
      accept = accept || line.rfind("Accept:", 0) == 0;
      lines.push_back(line);
    }
    if (!accept) {
      lines.emplace_back("Accept: */*");
    }
    std::ofstream lua(lua_path_);
    lua << "wrk.method = \"POST\"\nwrk.body = " << lua_quoted(request_body) << "\n";
    for (auto const& line : lines) {
      auto const colon = line.find(':');
      auto const value = line.substr(line.find_first_not_of(' ', colon + 1));
      lua << "wrk.headers[" << lua_quoted(line.substr(0, colon)) << "] = " << lua_quoted(value) << "\n";
      h2load_headers_ += " -H " + shell_quoted(line);
    }
    std::ofstream body(body_path_);
    body << request_body;
    if (!lua.flush() || !body.flush()) {
      throw std::runtime_error("cannot write the load generator's files in " + work_dir);
    }
  }

  /// One run of `seconds` (whole seconds: wrk counts no finer) against `url`, which speaks `p`.
  [[nodiscard]] ceiling_result measure(protocol p, std::string const& url, int concurrency, int seconds) const {
    std::string const c = std::to_string(concurrency);
    std::string const d = std::to_string(seconds);
    if (p == protocol::tls_h2) {
      return parse_h2load(run("h2load -t1 -c1 -m" + c + " -D" + d + " -d " + shell_quoted(body_path_) +
                              h2load_headers_ + " " + shell_quoted(url) + " 2>&1"));
    }
    return parse_wrk(
        run("wrk -t1 -c" + c + " -d" + d + "s -s " + shell_quoted(lua_path_) + " " + shell_quoted(url) + " 2>&1"));
  }

  /// "wrk" or "h2load".
  [[nodiscard]] static char const* tool(protocol p) { return p == protocol::tls_h2 ? "h2load" : "wrk"; }

private:
  struct output {
    std::string text;
    double cpu_seconds = 0; ///< the command's CPU, user + system, its children included
  };

  static double children_cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_CHILDREN, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  }

  static output run(std::string const& command) {
    output out;
    auto const cpu_before = children_cpu_seconds();
    FILE* p = popen(command.c_str(), "r");
    if (p == nullptr) {
      throw std::runtime_error("cannot run: " + command);
    }
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) {
      out.text += buf.data();
    }
    int const status = pclose(p);
    out.cpu_seconds = children_cpu_seconds() - cpu_before;
    if (status != 0) {
      throw std::runtime_error("failed (status " + std::to_string(status) + "): " + command + "\n" + out.text);
    }
    return out;
  }

  static double number_after(std::string const& text, char const* pattern) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(pattern))) {
      return -1;
    }
    return std::stod(m[1].str());
  }

  static ceiling_result parse_wrk(output const& out) {
    // "  123456 requests in 1.00s, ..." and "Requests/sec:  61234.56"; failures on lines of their own.
    double const requests = number_after(out.text, R"((\d+) requests in)");
    double const rate = number_after(out.text, R"(Requests/sec:\s*([0-9.]+))");
    if (requests <= 0 || rate <= 0 || out.text.find("Non-2xx") != std::string::npos ||
        out.text.find("Socket errors") != std::string::npos) {
      throw std::runtime_error("wrk: no rate, or failed requests:\n" + out.text);
    }
    return {rate, out.cpu_seconds * 1e6 / requests};
  }

  static ceiling_result parse_h2load(output const& out) {
    // "finished in 1.00s, 61234.50 req/s, ...", "requests: N total, N started, N done, N succeeded, N failed,
    // N errored, N timeout", "Application protocol: h2".
    double const rate = number_after(out.text, R"(finished in [0-9.]+m?s, ([0-9.]+) req/s)");
    double const succeeded = number_after(out.text, R"((\d+) succeeded)");
    double const failed = number_after(out.text, R"((\d+) failed)");
    double const errored = number_after(out.text, R"((\d+) errored)");
    if (rate <= 0 || succeeded <= 0 || failed != 0 || errored != 0 ||
        out.text.find("Application protocol: h2") == std::string::npos) {
      throw std::runtime_error("h2load: no rate, failed requests, or not h2:\n" + out.text);
    }
    return {rate, out.cpu_seconds * 1e6 / succeeded};
  }

  static std::string lua_quoted(std::string const& s) {
    std::string out = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
      }
      out += ch;
    }
    return out + "\"";
  }

  static std::string shell_quoted(std::string const& s) {
    std::string out = "'";
    for (char ch : s) {
      out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    }
    return out + "'";
  }

  std::string lua_path_;
  std::string body_path_;
  std::string h2load_headers_;
};

} // namespace wandura::bench
