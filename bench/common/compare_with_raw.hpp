// What both loopback benchmarks do: for each protocol and concurrency, our side and the raw libcurl loop measured
// alternately, the load generator's ceiling measured between their rounds, the protocol each side spoke checked,
// one line printed per row. Header-only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "load_ceiling.hpp"
#include "loopback_bench.hpp"
#include "protocol.hpp"
#include "raw_curl_loop.hpp"

namespace wandura::bench {

/// One side of a comparison at one protocol: `run_result(int concurrency, std::chrono::duration<double>)`. It
/// fills `run_result::wire` with what it saw (versions of its answers, connections it opened).
using side_runner = std::function<run_result(int, std::chrono::duration<double>)>;

/// Medians over the rounds of one row; `seen` sums warm-up and rounds.
struct side_medians {
  double rate = 0;
  double cpu_us = 0; ///< client CPU microseconds per good answer
  wire_seen seen;
};

struct row_result {
  side_medians ours;
  side_medians raw;
  ceiling_result ceiling; ///< medians of the load generator's runs
  std::uint64_t failures = 0;
  std::uint64_t stream_resets = 0; ///< both sides' `run_result::stream_resets`
  std::uint64_t requests = 0;      ///< both sides' good answers
  std::string first_failure;       ///< what the first failed request of either side said
  [[nodiscard]] double ratio() const { return raw.rate > 0 ? ours.rate / raw.rate : 0; }
};

/// Medians of `args.rounds` runs of two sides measured alternately (which goes first alternates too, so that drift
/// on a shared machine hits both alike), after one short warm-up run of each; `measure_ceiling` (returning a
/// `ceiling_result`) runs `args.ceiling_runs` times, before the rounds it is spread over.
template <class MeasureCeiling>
row_result measure_row(bench_args const& args, int concurrency, side_runner const& ours, side_runner const& raw,
                       MeasureCeiling measure_ceiling) {
  std::chrono::duration<double> const duration(args.seconds);
  row_result out;
  auto const warm_ours = ours(concurrency, std::chrono::duration<double>(0.2)); // warm connections
  auto const warm_raw = raw(concurrency, std::chrono::duration<double>(0.2));
  out.ours.seen += warm_ours.wire;
  out.raw.seen += warm_raw.wire;
  out.failures += warm_ours.failed + warm_raw.failed;
  out.stream_resets += warm_ours.stream_resets + warm_raw.stream_resets;
  out.requests += warm_ours.ok + warm_raw.ok;
  for (auto const* r : {&warm_ours, &warm_raw}) {
    if (out.first_failure.empty() && !r->first_failure.empty()) {
      out.first_failure = r->first_failure;
    }
  }
  std::vector<double> rates[2];
  std::vector<double> cpus[2];
  std::vector<double> ceiling_rates;
  std::vector<double> ceiling_cpus;
  int const ceiling_every = std::max(1, (args.rounds + args.ceiling_runs - 1) / std::max(1, args.ceiling_runs));
  for (int r = 0; r < args.rounds; ++r) {
    if (r % ceiling_every == 0 && static_cast<int>(ceiling_rates.size()) < args.ceiling_runs) {
      auto const c = measure_ceiling();
      ceiling_rates.push_back(c.rate);
      ceiling_cpus.push_back(c.cpu_us_per_request);
    }
    for (int side : r % 2 == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0}) {
      auto const result = (side == 0 ? ours : raw)(concurrency, duration);
      rates[side].push_back(result.rate());
      cpus[side].push_back(result.cpu_us_per_request());
      (side == 0 ? out.ours : out.raw).seen += result.wire;
      out.failures += result.failed;
      out.stream_resets += result.stream_resets;
      out.requests += result.ok;
      if (out.first_failure.empty() && !result.first_failure.empty()) {
        out.first_failure = (side == 0 ? "ours: " : "raw: ") + result.first_failure;
      }
    }
  }
  out.ours.rate = median(rates[0]);
  out.ours.cpu_us = median(cpus[0]);
  out.raw.rate = median(rates[1]);
  out.raw.cpu_us = median(cpus[1]);
  out.ceiling = {median(ceiling_rates), median(ceiling_cpus)};
  return out;
}

/// What a benchmark compares.
struct comparison {
  char const* name;           ///< e.g. "transport_vs_raw_curl"
  char const* ours_label;     ///< our side's name in lines and in `--only`, e.g. "transport"
  char const* ours_rate_unit; ///< e.g. "req/s", "calls/s"
  /// Header lines the raw loop and the load generator send besides `Authorization` and `Content-Type` (whole
  /// lines, "Name: value"): those our side sends, so that every side puts the same bytes on the wire.
  std::vector<std::string> header_lines;
};

/// The rows: plain HTTP/1.1 at concurrency 1, 16 and 64 (the rows measured before TLS, names unchanged), then
/// HTTP/1.1 over TLS and HTTP/2 over TLS at 16 and 64.
[[nodiscard]] inline std::vector<std::pair<protocol, std::vector<int>>> comparison_rows() {
  return {{protocol::plain, {1, 16, 64}}, {protocol::tls_h1, {16, 64}}, {protocol::tls_h2, {16, 64}}};
}

/// Runs the rows of `what` against `nginx` and prints one line each:
/// `NAME[ tls-h1|tls-h2] c=C: ratio=R (OURS N UNIT at X us CPU each, raw N req/s at Y us CPU each, wrk|h2load
/// ceiling N req/s at Z us CPU each; HTTP/V on A and B connections; medians of ...)`, A and B being the
/// connections each side opened since its protocol's first row. A row whose sides did not both speak its protocol
/// (protocol_mismatch), or that saw failures, says so on its line and on stderr. With `args.only` set
/// ("raw", "ceiling" or `what.ours_label`) runs that side alone once, at `args.only_concurrency` and
/// `args.only_protocol` (default plain), and prints its rate and CPU per request, for profiling.
/// @param make_ours `side_runner(protocol)`: our side talking to `nginx.url(p)`; called once per protocol, before
///        that protocol's rows.
/// @returns the exit status: 1 if any request failed or any row spoke the wrong protocol.
template <class MakeOurs>
int compare_with_raw(comparison const& what, bench_args const& args, nginx_server const& nginx, MakeOurs make_ours) {
  load_ceiling const ceiling(WANDURA_BENCH_WORK_DIR, what.header_lines);
  if (!args.only.empty()) {
    if (args.only != "raw" && args.only != "ceiling" && args.only != what.ours_label) {
      std::fprintf(stderr, "--only takes %s, raw or ceiling\n", what.ours_label);
      return 2;
    }
    auto const p = args.only_protocol.value_or(protocol::plain);
    int const c = args.only_concurrency;
    std::chrono::duration<double> const duration(args.seconds);
    if (args.only == "ceiling") {
      auto const r = ceiling.measure(p, nginx.url(p), c, std::max(1, static_cast<int>(args.seconds + 0.5)));
      std::printf("%s c=%d: %.0f req/s, %.2f us CPU per request\n", load_ceiling::tool(p), c, r.rate,
                  r.cpu_us_per_request);
      return 0;
    }
    auto const r = args.only == "raw" ? raw_curl_loop(nginx.url(p), nginx.ca_file(), what.header_lines).run(c, duration)
                                      : make_ours(p)(c, duration);
    std::printf(
        "%s c=%d: %.0f req/s, %.2f us CPU per request (%llu failed%s%s, %llu HTTP/2 stream errors; %s)\n",
        args.only.c_str(), c, r.rate(), r.cpu_us_per_request(), static_cast<unsigned long long>(r.failed),
        r.failed != 0 ? ", the first: " : "", r.first_failure.c_str(), static_cast<unsigned long long>(r.stream_resets),
        protocol_mismatch(p, r.wire, c).empty() ? "protocol as named" : protocol_mismatch(p, r.wire, c).c_str());
    return 0;
  }
  int status = 0;
  for (auto const& [p, concurrencies] : comparison_rows()) {
    if (args.only_protocol && *args.only_protocol != p) {
      continue;
    }
    side_runner const ours = make_ours(p);
    raw_curl_loop raw_loop(nginx.url(p), nginx.ca_file(), what.header_lines);
    side_runner const raw = [&raw_loop](int c, auto d) { return raw_loop.run(c, d); };
    // Connections opened since this protocol's sides were made: at each row, the connections the side holds
    // (the rows go up in concurrency and neither side closes one), which the protocol check bounds.
    std::uint64_t ours_connections = 0;
    std::uint64_t raw_connections = 0;
    for (int c : concurrencies) {
      auto const row = measure_row(args, c, ours, raw, [&] { return ceiling.measure(p, nginx.url(p), c, 1); });
      wire_seen ours_seen = row.ours.seen;
      wire_seen raw_seen = row.raw.seen;
      ours_seen.connections_opened = ours_connections += ours_seen.connections_opened;
      raw_seen.connections_opened = raw_connections += raw_seen.connections_opened;
      std::string const word = row_word(p).empty() ? "" : " " + std::string(row_word(p));
      std::string problems;
      std::string problems_tolerated;
      if (auto why = protocol_mismatch(p, ours_seen, c); !why.empty()) {
        problems += std::string(", PROTOCOL MISMATCH: ") + what.ours_label + " saw " + why;
      }
      if (auto why = protocol_mismatch(p, raw_seen, c); !why.empty()) {
        problems += ", PROTOCOL MISMATCH: raw saw " + why;
      }
      if (row.stream_resets > tolerated_stream_resets(row.requests)) {
        problems += ", " + std::to_string(row.stream_resets) + " HTTP/2 STREAM ERRORS, more than libcurl 7.x explains";
      } else if (row.stream_resets != 0) {
        problems_tolerated = "; " + std::to_string(row.stream_resets) + " HTTP/2 stream errors of libcurl 7.x";
      }
      if (row.failures != 0) {
        problems += ", " + std::to_string(row.failures) + " REQUESTS FAILED, the first: " + row.first_failure;
      }
      std::printf("%s%s c=%d: ratio=%.2f (%s %.0f %s at %.1f us CPU each, raw %.0f req/s at %.1f us CPU each, %s "
                  "ceiling %.0f req/s at %.1f us CPU each; %s on %llu and %llu connections; medians of %d "
                  "alternating %.1f s runs, ceiling of %d 1 s runs%s%s)\n",
                  what.name, word.c_str(), c, row.ratio(), what.ours_label, row.ours.rate, what.ours_rate_unit,
                  row.ours.cpu_us, row.raw.rate, row.raw.cpu_us, load_ceiling::tool(p), row.ceiling.rate,
                  row.ceiling.cpu_us_per_request, p == protocol::tls_h2 ? "HTTP/2" : "HTTP/1.1",
                  static_cast<unsigned long long>(ours_connections), static_cast<unsigned long long>(raw_connections),
                  args.rounds, args.seconds, args.ceiling_runs, problems_tolerated.c_str(), problems.c_str());
      std::fflush(stdout);
      if (!problems.empty()) {
        std::fprintf(stderr, "%s%s c=%d: FAILED%s\n", what.name, word.c_str(), c, problems.c_str());
        status = 1;
      }
    }
  }
  return status;
}

} // namespace wandura::bench
