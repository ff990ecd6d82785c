// parse_vs_nlohmann: reads the same ticket batch responses into the same `wandura::ticket_batch_result` with the
// SDK's simdjson On Demand parser and with nlohmann::json (what most users would pick), side by side in one run,
// and prints the ratio of their median throughputs.
//
// Bodies: a 3-item batch with three tickets, a partial batch (granted + shed + not_ready) and an all-refused
// batch with the flat error fields. Short slices of both parsers alternate; the medians of the slices' throughputs
// are compared. Both results are checked equal first, so
// the two parsers do the same work.
//
// Usage: bench_parse [--quick]
//        bench_parse --only wandura|nlohmann [--seconds S]   one parser alone for S seconds (default 5), for
//                                                            profiling; prints its throughput and time per body
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "playback/response_parser.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/ticket_result.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

std::string base64ish(std::size_t n, unsigned seed) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s(n, 'A');
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    s[i] = alphabet[(seed >> 16) % 64];
  }
  return s;
}

std::string granted_item(int episode, char const* intent, bool reused, unsigned seed) {
  std::string const id = "tkt_" + base64ish(24, seed);
  return R"({"film_ref":"the-heiress-returns","episode_no":)" + std::to_string(episode) + R"(,"intent":")" + intent +
         R"(","status":200,"reused":)" + (reused ? "true" : "false") + R"(,"ticket":{"ticket_id":")" + id +
         R"(","manifest_url":"https://cdn.wandura.example/v1/manifests/the-heiress-returns/)" +
         std::to_string(episode) + "/" + id + R"(/master.mpd?sig=)" + base64ish(43, seed + 1) +
         R"(","license_url":"https://license.wandura.example/v1/widevine/)" + id +
         R"(","expires_at":"2026-11-30T11:00:00Z","drm_payload":")" + base64ish(512, seed + 2) + R"("}})";
}

std::vector<std::string> bodies() {
  std::vector<std::string> out;
  out.push_back(R"({"request_id":"req_01HZX3K9","items":[)" + granted_item(4, "play", false, 1) + "," +
                granted_item(5, "prefetch", false, 2) + "," + granted_item(6, "prefetch", true, 3) + "]}");
  out.push_back(R"({"request_id":"req_01HZX3KA","items":[)" + granted_item(7, "play", false, 4) +
                R"(,{"film_ref":"the-heiress-returns","episode_no":8,"intent":"prefetch","status":429,)"
                R"("error_code":"rate_limited","reason":"prefetch_shed","retry_after":2},)"
                R"({"film_ref":"the-heiress-returns","episode_no":13,"intent":"prefetch","status":404,)"
                R"("error_code":"not_ready"}]})");
  out.push_back(
      R"({"request_id":"req_01HZX3KB","error":"Prefetch requests are paused while your playback traffic is close )"
      R"(to its ceiling.","error_code":"rate_limited","reason":"prefetch_shed","items":[)"
      R"({"film_ref":"the-heiress-returns","episode_no":9,"intent":"prefetch","status":429,"error_code":"rate_limited",)"
      R"("reason":"prefetch_shed","retry_after":2},)"
      R"({"film_ref":"the-heiress-returns","episode_no":10,"intent":"prefetch","status":429,)"
      R"("error_code":"rate_limited","reason":"prefetch_shed","retry_after":1},)"
      R"({"film_ref":"another-film","episode_no":1,"intent":"play","status":429,"error_code":"rate_limited",)"
      R"("retry_after":1}]})");
  return out;
}

/// The same typed result, the way a user would write it with nlohmann::json: parse to a DOM, then `at()` and
/// `get<>()` with the same required fields, ranges and outcome mapping as the SDK's parser.
std::error_code parse_with_nlohmann(std::string_view body, wandura::ticket_batch_result& out) {
  try {
    auto const j = nlohmann::json::parse(body);
    if (!j.is_object()) {
      return wandura::errc::invalid_response;
    }
    out.request_id = j.value("request_id", std::string());
    out.items.clear();
    for (auto const& it : j.at("items")) {
      auto& item = out.items.emplace_back();
      item.film_ref = it.at("film_ref").get<std::string>();
      auto const episode = it.at("episode_no").get<std::int64_t>();
      if (episode < 1 || episode > 2147483647) {
        return wandura::errc::invalid_response;
      }
      item.episode_no = static_cast<std::int32_t>(episode);
      item.intent_text = it.at("intent").get<std::string>();
      item.intent = wandura::intent_from_string(item.intent_text);
      if (item.intent != wandura::intent::other) {
        item.intent_text.clear();
      }
      auto const status = it.at("status").get<std::int64_t>();
      if (status < 100 || status > 599) {
        return wandura::errc::invalid_response;
      }
      item.status = static_cast<int>(status);
      item.reused = it.value("reused", false);
      if (auto code = it.find("error_code"); code != it.end()) {
        item.error_code = code->is_string() ? code->get<std::string>() : std::to_string(code->get<std::int64_t>());
      }
      item.reason = it.value("reason", std::string());
      if (auto ra = it.find("retry_after"); ra != it.end() && !ra->is_null()) {
        item.retry_after = std::chrono::seconds(static_cast<std::int64_t>(std::ceil(ra->get<double>())));
      }
      auto const c = wandura::classify_item(item.status, item.error_code, item.reason, item.intent);
      item.outcome = c.outcome;
      item.error = c.error;
      if (item.outcome == wandura::item_outcome::granted) {
        auto const& t = it.at("ticket");
        auto& ticket = item.ticket.emplace();
        ticket.ticket_id = t.at("ticket_id").get<std::string>();
        ticket.manifest_url = t.value("manifest_url", std::string());
        ticket.license_url = t.value("license_url", std::string());
        ticket.drm_payload = t.value("drm_payload", std::string());
        ticket.expires_at_text = t.at("expires_at").get<std::string>();
        auto when = wandura::parse_rfc3339(ticket.expires_at_text);
        if (!when) {
          return wandura::errc::invalid_response;
        }
        ticket.expires_at = *when;
      }
    }
    return {};
  } catch (nlohmann::json::exception const&) {
    return wandura::errc::invalid_response;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  double only_seconds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--seconds" && i + 1 < argc) {
      only_seconds = std::strtod(argv[++i], nullptr);
    } else {
      std::fprintf(stderr, "usage: bench_parse [--quick] [--only wandura|nlohmann [--seconds S]]\n");
      return 2;
    }
  }
  if (!only.empty() && only != "wandura" && only != "nlohmann") {
    std::fprintf(stderr, "bench_parse: --only takes wandura or nlohmann\n");
    return 2;
  }
  int const runs = quick ? 5 : 11;

  auto const texts = bodies();
  std::vector<wandura::response_body> padded(texts.size());
  std::size_t bytes_per_round = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    padded[i].assign(texts[i]);
    bytes_per_round += texts[i].size();
  }

  wandura::detail::response_parser parser;
  wandura::ticket_batch_result ours;
  wandura::ticket_batch_result theirs;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (parser.parse_ticket_batch(padded[i], ours) || parse_with_nlohmann(texts[i], theirs) || ours != theirs) {
      std::fprintf(stderr, "bench_parse: the two parsers disagree on body %zu (%s)\n", i, parser.message().c_str());
      return 1;
    }
  }

  // Short slices of both parsers alternate (about the same wall time each), so that load from other processes on
  // a shared machine falls on both alike.
  int const ours_per_slice = 200;  // rounds of all bodies
  int const theirs_per_slice = 12; // nlohmann is ~15-20x slower: comparable slice lengths
  int const slices = quick ? 10 : 40;
  auto time_ours = [&](int rounds) {
    auto const start = clock_type::now();
    for (int n = 0; n < rounds; ++n) {
      for (auto const& body : padded) {
        if (parser.parse_ticket_batch(body, ours)) {
          throw std::runtime_error("parse failed");
        }
      }
    }
    return std::chrono::duration<double>(clock_type::now() - start).count();
  };
  auto time_theirs = [&](int rounds) {
    auto const start = clock_type::now();
    for (int n = 0; n < rounds; ++n) {
      for (auto const& body : texts) {
        if (parse_with_nlohmann(body, theirs)) {
          throw std::runtime_error("parse failed");
        }
      }
    }
    return std::chrono::duration<double>(clock_type::now() - start).count();
  };

  if (!only.empty()) {
    // One side alone, in slices until the time is up: for `perf record`, which then sees no other parser.
    bool const wandura_side = only == "wandura";
    int const per_slice = wandura_side ? ours_per_slice : theirs_per_slice;
    double elapsed = 0;
    long rounds = 0;
    while (elapsed < only_seconds) {
      elapsed += wandura_side ? time_ours(per_slice) : time_theirs(per_slice);
      rounds += per_slice;
    }
    double const bodies_parsed = static_cast<double>(rounds) * static_cast<double>(texts.size());
    std::printf("parse %s alone: %.0f MB/s, %.0f ns per body (%zu bodies of %zu bytes in all, %ld rounds)\n",
                only.c_str(), static_cast<double>(bytes_per_round) * static_cast<double>(rounds) / elapsed / 1e6,
                elapsed / bodies_parsed * 1e9, texts.size(), bytes_per_round, rounds);
    return 0;
  }

  (void)time_ours(ours_per_slice); // warm up caches and the parsers' buffers
  (void)time_theirs(theirs_per_slice);
  // Every slice gives one throughput sample per parser; medians over all slices drop the slices in which the
  // process was descheduled (2 shared cores), which a sum would smear over the whole run.
  std::vector<double> ours_mbps;
  std::vector<double> theirs_mbps;
  double const round_mb = static_cast<double>(bytes_per_round) / 1e6;
  for (int slice = 0; slice < runs * slices; ++slice) {
    if (slice % 2 == 0) {
      ours_mbps.push_back(round_mb * ours_per_slice / time_ours(ours_per_slice));
      theirs_mbps.push_back(round_mb * theirs_per_slice / time_theirs(theirs_per_slice));
    } else {
      theirs_mbps.push_back(round_mb * theirs_per_slice / time_theirs(theirs_per_slice));
      ours_mbps.push_back(round_mb * ours_per_slice / time_ours(ours_per_slice));
    }
  }
  double const a = median(ours_mbps);
  double const b = median(theirs_mbps);
  // The SIMD half of simdjson (stage 1, the structural index) is chosen by libsimdjson at run time for this CPU;
  // the On Demand walk over it is header-only (bench/README.md, "The parser and simdjson's kernels").
  std::string const kernel = simdjson::get_active_implementation()->name();
  std::printf("parse_vs_nlohmann: ratio=%.1f kernel=%s (wandura %.0f MB/s, nlohmann %.0f MB/s; medians of %d "
              "interleaved slices each, %zu bodies of %zu bytes in all)\n",
              a / b, kernel.c_str(), a, b, runs * slices, texts.size(), bytes_per_round);
  return 0;
}
