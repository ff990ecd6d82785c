// emulator_vs_nginx: how many ticket requests a second the emulator answers on one core, against nginx answering
// the same-sized static JSON on one worker. Same load generator (wrk, one thread, same Lua POST script, same
// connection count), runs alternated, medians compared. Target ratio >= 0.5 so the emulator never limits the SDK's
// own benchmarks and demo.
//
//   bench_emulator [--quick] [--rounds N] [--duration S] [--connections C]
#include "wandura/emulator/emulator.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <netinet/in.h>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

struct wrk_result {
  double requests_per_s = 0;
  long non_2xx = 0;
  long errors = 0;
};

/// Runs a command and returns its standard output.
std::string run_capture(std::string const& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    throw std::runtime_error("cannot run: " + command);
  }
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) {
    out += buf.data();
  }
  pclose(p);
  return out;
}

wrk_result run_wrk(std::string const& url, int connections, int seconds) {
  auto out = run_capture("wrk -t1 -c" + std::to_string(connections) + " -d" + std::to_string(seconds) + "s -s " +
                         WANDURA_BENCH_LUA + " " + url + " 2>&1");
  wrk_result r;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("Requests/sec:", 0) == 0) {
      r.requests_per_s = std::stod(line.substr(13));
    } else if (line.find("Non-2xx or 3xx responses:") != std::string::npos) {
      r.non_2xx = std::stol(line.substr(line.find(':') + 1));
    } else if (line.find("Socket errors:") != std::string::npos) {
      r.errors = 1;
    }
  }
  if (r.requests_per_s <= 0) {
    throw std::runtime_error("wrk printed no rate:\n" + out);
  }
  return r;
}

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// nginx with one worker on loopback, from a config written into the build tree; stopped by its destructor.
class nginx_process {
public:
  nginx_process(std::filesystem::path const& dir, std::string const& body, std::uint16_t port) {
    std::filesystem::create_directories(dir / "logs");
    std::filesystem::create_directories(dir / "tmp");
    auto conf = dir / "nginx.conf";
    std::ofstream f(conf);
    f << "worker_processes 1;\ndaemon off;\nmaster_process off;\nerror_log " << (dir / "logs/error.log").string()
      << " error;\npid " << (dir / "nginx.pid").string() << ";\nevents { worker_connections 1024; }\nhttp {\n"
      << "  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 65;\n"
      << "  client_body_temp_path " << (dir / "tmp").string() << ";\n  proxy_temp_path " << (dir / "tmp").string()
      << ";\n  fastcgi_temp_path " << (dir / "tmp").string() << ";\n  uwsgi_temp_path " << (dir / "tmp").string()
      << ";\n  scgi_temp_path " << (dir / "tmp").string() << ";\n"
      << "  server {\n    listen 127.0.0.1:" << port << ";\n    location / {\n"
      << "      default_type application/json;\n      return 200 '" << body << "';\n    }\n  }\n}\n";
    f.close();
    std::string conf_s = conf.string();
    std::string prefix = dir.string() + "/";
    std::vector<std::string> args = {"nginx", "-p", prefix, "-c", conf_s};
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "nginx", nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start nginx");
    }
    // Wait until it accepts connections (bounded).
    for (int i = 0; i < 100; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      if (ok) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("nginx did not start; see " + (dir / "logs/error.log").string());
  }
  ~nginx_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  nginx_process(nginx_process const&) = delete;
  nginx_process& operator=(nginx_process const&) = delete;

private:
  pid_t pid_ = -1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// One POST to the emulator, to get a real 3-item response body (nginx serves one of the same size).
std::string sample_body(std::uint16_t port) {
  // curl is part of the project's dependencies; it prints exactly the body.
  auto body = run_capture("curl -s -X POST -H 'Authorization: Bearer test-key' -H 'Content-Type: application/json' "
                          "--data '{\"episodes\":[{\"film_ref\":\"the-heiress-returns\",\"episode_no\":4,\"intent\":"
                          "\"play\"},{\"film_ref\":\"the-heiress-returns\",\"episode_no\":5,\"intent\":\"prefetch\"},"
                          "{\"film_ref\":\"the-heiress-returns\",\"episode_no\":6,\"intent\":\"prefetch\"}],"
                          "\"union_info\":\"bench-device\",\"drm_kek\":\"bench-kek\"}' http://127.0.0.1:" +
                          std::to_string(port) + "/v1/playback/tickets");
  if (body.find("\"ticket_id\"") == std::string::npos || body.find('\'') != std::string::npos) {
    throw std::runtime_error("unexpected ticket response: " + body);
  }
  return body;
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  int seconds = 3;
  int connections = 32;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--quick") {
      rounds = 3;
      seconds = 2;
    } else if (a == "--rounds") {
      rounds = std::max(1, next());
    } else if (a == "--duration") {
      seconds = std::max(1, next());
    } else if (a == "--connections") {
      connections = std::max(1, next());
    }
  }
  try {
    std::signal(SIGPIPE, SIG_IGN);
    wandura::emulator::config cfg;
    cfg.threads = 1; // one core
    cfg.seed = 1;
    cfg.orgs[0].limits.playback = 100000000; // the most a configuration takes: never the limit under test
    auto emu = wandura::emulator::server::start(cfg);
    auto body = sample_body(emu->port());
    auto port = free_port();
    nginx_process nginx(WANDURA_BENCH_WORK_DIR, body, port);
    std::string emu_url = emu->base_url() + "/v1/playback/tickets";
    std::string nginx_url = "http://127.0.0.1:" + std::to_string(port) + "/v1/playback/tickets";

    run_wrk(emu_url, connections, 1); // warm-up both
    run_wrk(nginx_url, connections, 1);
    std::vector<double> emu_rates;
    std::vector<double> nginx_rates;
    for (int r = 0; r < rounds; ++r) {
      auto e = run_wrk(emu_url, connections, seconds);
      auto n = run_wrk(nginx_url, connections, seconds);
      if (e.non_2xx != 0 || n.non_2xx != 0) {
        throw std::runtime_error("non-2xx responses during the run (emulator " + std::to_string(e.non_2xx) +
                                 ", nginx " + std::to_string(n.non_2xx) + ")");
      }
      emu_rates.push_back(e.requests_per_s);
      nginx_rates.push_back(n.requests_per_s);
    }
    auto e = median(emu_rates);
    auto n = median(nginx_rates);
    std::printf("emulator_vs_nginx: ratio=%.2f (emulator %.0f req/s, nginx %.0f req/s)\n", e / n, e, n);
    std::printf("  body %zu bytes, %d connections, wrk 1 thread, %d rounds of %d s alternated, medians; "
                "tickets issued %llu\n",
                body.size(), connections, rounds, seconds,
                static_cast<unsigned long long>(emu->stats().tickets_counted));
    return 0;
  } catch (std::exception const& ex) {
    std::fprintf(stderr, "bench_emulator: %s\n", ex.what());
    return 1;
  }
}
