#include "worker_report.hpp"

#include "json_text.hpp"

#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <simdjson.h>

namespace demo {
namespace {

std::string counts_object(std::map<std::string, std::uint64_t> const& counts) {
  std::string out = "{";
  for (auto const& [key, n] : counts) {
    out += (out.size() > 1 ? "," : "") + json_quoted(key) + ":" + std::to_string(n);
  }
  return out + "}";
}

std::string numbers(std::vector<double> const& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += (i > 0 ? "," : "") + json_number(values[i]);
  }
  return out + "]";
}

// Reading: each getter names the field it failed on.
simdjson::dom::element at(simdjson::dom::object o, char const* name) {
  simdjson::dom::element e;
  if (o[name].get(e) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: no \"") + name + "\"");
  }
  return e;
}

std::uint64_t count(simdjson::dom::object o, char const* name) {
  std::uint64_t v = 0;
  if (at(o, name).get_uint64().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: \"") + name + "\" is not a count");
  }
  return v;
}

double real(simdjson::dom::element e, char const* name) {
  double v = 0; // whole numbers too: simdjson's DOM converts them
  if (e.get_double().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: \"") + name + "\" is not a number");
  }
  return v;
}

double real(simdjson::dom::object o, char const* name) {
  return real(at(o, name), name);
}

std::string text(simdjson::dom::object o, char const* name) {
  std::string_view v;
  if (at(o, name).get_string().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: \"") + name + "\" is not a string");
  }
  return std::string(v);
}

simdjson::dom::object object(simdjson::dom::element e, char const* name) {
  simdjson::dom::object v;
  if (e.get_object().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: \"") + name + "\" is not an object");
  }
  return v;
}

simdjson::dom::array array(simdjson::dom::object o, char const* name) {
  simdjson::dom::array v;
  if (at(o, name).get_array().get(v) != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: \"") + name + "\" is not an array");
  }
  return v;
}

std::map<std::string, std::uint64_t> counts_of(simdjson::dom::object o, char const* name) {
  std::map<std::string, std::uint64_t> out;
  for (auto field : object(at(o, name), name)) {
    std::uint64_t n = 0;
    if (field.value.get_uint64().get(n) != simdjson::SUCCESS) {
      throw std::runtime_error(std::string("worker report: a count of \"") + name + "\" is not a count");
    }
    out[std::string(field.key)] = n;
  }
  return out;
}

std::vector<double> numbers_of(simdjson::dom::object o, char const* name) {
  std::vector<double> out;
  for (auto e : array(o, name)) {
    out.push_back(real(e, name));
  }
  return out;
}

} // namespace

std::string worker_report_json(client_run const& run) {
  auto const& s = run.sim.totals;
  std::ostringstream o;
  o << "{\"viewers\":" << s.viewers << ",\"play_requests\":" << s.play_requests
    << ",\"play_failures\":" << s.play_failures << ",\"play_success_rate\":" << json_number(s.play_success_rate)
    << ",\"p50_ms\":" << json_number(s.p50_ms) << ",\"p95_ms\":" << json_number(s.p95_ms)
    << ",\"p99_ms\":" << json_number(s.p99_ms) << ",\"max_ms\":" << json_number(s.max_ms)
    << ",\"tickets_granted\":" << s.tickets_granted << ",\"tickets_fresh\":" << s.tickets_fresh
    << ",\"tickets_reused\":" << s.tickets_reused << ",\"cache_hits\":" << s.cache_hits
    << ",\"coalesced\":" << s.coalesced << ",\"prefetch_requested\":" << s.prefetch_requested
    << ",\"prefetch_shed\":" << s.prefetch_shed << ",\"retries\":" << s.retries
    << ",\"budget_denied\":" << s.budget_denied << ",\"requests\":" << s.requests
    << ",\"play_items_sent\":" << s.play_items_sent << ",\"play_429\":" << s.play_429
    << ",\"duration_s\":" << json_number(s.duration_s)
    << ",\"failures_by_reason\":" << counts_object(s.failures_by_reason)
    << ",\"outcomes_by_kind\":" << counts_object(run.sim.outcomes_by_kind) << ",\"starts\":" << run.sim.starts
    << ",\"calls\":" << run.calls << ",\"held_off\":" << run.held_off << ",\"warn_lines\":" << run.warn_lines
    << ",\"cross_process_reuse\":" << run.cross_process_reuse
    << ",\"shared_state_fallbacks\":" << run.shared_state_fallbacks
    << ",\"play_latencies_ms\":" << numbers(run.sim.play_latencies_ms)
    << ",\"play_done_s\":" << numbers(run.sim.play_done_s) << ",\"failures\":[";
  for (std::size_t i = 0; i < run.sim.failures.size(); ++i) {
    auto const& f = run.sim.failures[i];
    o << (i > 0 ? "," : "") << "{\"viewer\":" << f.viewer << ",\"film_ref\":" << json_quoted(f.film_ref)
      << ",\"episode_no\":" << f.episode_no << ",\"what\":" << json_quoted(f.what) << "}";
  }
  o << "],\"samples\":[";
  for (std::size_t i = 0; i < run.sim.samples.size(); ++i) {
    auto const& p = run.sim.samples[i];
    o << (i > 0 ? "," : "") << "[" << json_number(p.t_s) << "," << json_number(p.tickets_per_s) << ","
      << json_number(p.demand_per_s) << "," << json_number(p.play_p50_ms) << "," << json_number(p.play_p95_ms) << ","
      << json_number(p.play_sent_per_s) << "," << json_number(p.prefetch_sent_per_s) << ","
      << json_number(p.play_429_per_s) << "," << json_number(p.prefetch_429_per_s) << "]";
  }
  o << "]}";
  return o.str();
}

client_run read_worker_report(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string const body(json);
  simdjson::dom::element root;
  if (auto const error = parser.parse(body).get(root); error != simdjson::SUCCESS) {
    throw std::runtime_error(std::string("worker report: not JSON: ") + simdjson::error_message(error));
  }
  auto const o = object(root, "(the report)");
  client_run run;
  auto& s = run.sim.totals;
  s.viewers = count(o, "viewers");
  s.play_requests = count(o, "play_requests");
  s.play_failures = count(o, "play_failures");
  s.play_success_rate = real(o, "play_success_rate");
  s.p50_ms = real(o, "p50_ms");
  s.p95_ms = real(o, "p95_ms");
  s.p99_ms = real(o, "p99_ms");
  s.max_ms = real(o, "max_ms");
  s.tickets_granted = count(o, "tickets_granted");
  s.tickets_fresh = count(o, "tickets_fresh");
  s.tickets_reused = count(o, "tickets_reused");
  s.cache_hits = count(o, "cache_hits");
  s.coalesced = count(o, "coalesced");
  s.prefetch_requested = count(o, "prefetch_requested");
  s.prefetch_shed = count(o, "prefetch_shed");
  s.retries = count(o, "retries");
  s.budget_denied = count(o, "budget_denied");
  s.requests = count(o, "requests");
  s.play_items_sent = count(o, "play_items_sent");
  s.play_429 = count(o, "play_429");
  s.duration_s = real(o, "duration_s");
  s.failures_by_reason = counts_of(o, "failures_by_reason");
  run.sim.failures_by_reason = s.failures_by_reason;
  run.sim.outcomes_by_kind = counts_of(o, "outcomes_by_kind");
  run.sim.starts = count(o, "starts");
  run.calls = count(o, "calls");
  run.held_off = count(o, "held_off");
  run.warn_lines = count(o, "warn_lines");
  run.cross_process_reuse = count(o, "cross_process_reuse");
  run.shared_state_fallbacks = count(o, "shared_state_fallbacks");
  run.sim.play_latencies_ms = numbers_of(o, "play_latencies_ms");
  run.sim.play_done_s = numbers_of(o, "play_done_s");
  if (run.sim.play_done_s.size() != run.sim.play_latencies_ms.size()) {
    throw std::runtime_error("worker report: \"play_done_s\" and \"play_latencies_ms\" differ in length");
  }
  for (auto e : array(o, "failures")) {
    auto const f = object(e, "failures");
    run.sim.failures.push_back({static_cast<std::uint32_t>(count(f, "viewer")), text(f, "film_ref"),
                                static_cast<std::int32_t>(count(f, "episode_no")), text(f, "what")});
  }
  for (auto e : array(o, "samples")) {
    simdjson::dom::array a;
    if (e.get_array().get(a) != simdjson::SUCCESS || a.size() != 9) {
      throw std::runtime_error("worker report: a sample is not an array of 9 numbers");
    }
    double v[9];
    std::size_t i = 0;
    for (auto x : a) {
      v[i++] = real(x, "samples");
    }
    run.sim.samples.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]});
  }
  return run;
}

} // namespace demo
