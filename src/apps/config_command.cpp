// `wandura config`: the organisation's limits, as the API reports them (GET /v1/config).
#include <cstdio>
#include <exception>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"

namespace wandura::cli {

namespace {

constexpr char const* config_usage =
    R"(usage: wandura config [--json] [--policy interactive|background|standard] [--base-url URL] [--api-key KEY]

Prints the organisation's rate limits (GET /v1/config, counter "config"): per counter, units per minute
(tickets for playback, requests for the others; seed 001 "Cách đếm").

  --json           print {"org_id":"...","limits":{"playback":N,...}} instead of a table
  --policy P       retry policy: interactive (default), background, standard
  --base-url URL   the API (default $WANDURA_BASE_URL, else http://127.0.0.1:8787)
  --api-key KEY    the API key (default $WANDURA_API_KEY)

Exit status: 0 on success, 1 when the call failed, 2 for a usage error.
)";

} // namespace

int run_config(std::span<char* const> args) {
  connection conn;
  bool json = false;
  call_options per_call;
  arg_reader r(args);
  while (r.next()) {
    if (r.flag() == "--help") {
      std::fputs(config_usage, stdout);
      return exit_ok;
    } else if (conn.read(r)) {
    } else if (r.flag() == "--json") {
      json = true;
    } else if (r.flag() == "--policy") {
      per_call.policy = policy_from_name(r.value());
    } else {
      r.unknown();
    }
  }

  asio::io_context io;
  client api(io.get_executor(), conn.to_client_options());
  std::exception_ptr failure;
  org_config cfg;
  asio::co_spawn(io, api.get_config(std::move(per_call)), [&](std::exception_ptr e, org_config c) {
    failure = e;
    cfg = std::move(c);
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (wandura::error const& e) {
      print_error("config", e, json);
      return exit_failed;
    }
  }
  if (json) {
    std::string out = "{\"org_id\":" + json_string(cfg.org_id) + ",\"limits\":{";
    for (std::size_t i = 0; i < cfg.limits.size(); ++i) {
      // Appended piece by piece: GCC 12 reports a false -Wrestrict on `char const* + std::string` at -O3.
      if (i > 0) {
        out += ',';
      }
      out += json_string(cfg.limits[i].counter);
      out += ':';
      out += std::to_string(cfg.limits[i].per_minute);
    }
    out += "}}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::printf("organisation: %s\n%-12s %12s\n", cfg.org_id.empty() ? "-" : cfg.org_id.c_str(), "COUNTER",
                "PER MINUTE");
    for (auto const& l : cfg.limits) {
      std::printf("%-12s %12lld\n", l.counter.c_str(), static_cast<long long>(l.per_minute));
    }
  }
  return exit_ok;
}

} // namespace wandura::cli
