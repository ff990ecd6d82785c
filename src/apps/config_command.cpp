// `wandura config`: the organisation's limits, as the API reports them (GET /v1/config).
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"

namespace wandura::cli {

namespace {

struct config_args {
  connection conn;
  bool json = false;
  std::string policy = "interactive";
};

int run_config(config_args const& a) {
  call_options per_call;
  per_call.policy = policy_from_name(a.policy);
  asio::io_context io;
  client api(io.get_executor(), a.conn.to_client_options());
  std::exception_ptr failure;
  org_config cfg;
  asio::co_spawn(io, api.get_config(std::move(per_call)), [&](std::exception_ptr e, org_config c) {
    failure = std::move(e);
    cfg = std::move(c);
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (wandura::error const& e) {
      print_error("config", e, a.json, a.conn.tls_hint(e));
      return exit_failed;
    }
  }
  if (a.json) {
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
    // The server's names go through `detail::printable`: one row each, no control byte reaches the terminal.
    std::printf("organisation: %s\n%-12s %12s\n", cfg.org_id.empty() ? "-" : detail::printable(cfg.org_id).c_str(),
                "COUNTER", "PER MINUTE");
    for (auto const& l : cfg.limits) {
      std::printf("%-12s %12lld\n", detail::printable(l.counter).c_str(), static_cast<long long>(l.per_minute));
    }
  }
  return exit_ok;
}

} // namespace

command add_config_command(CLI::App& wandura) {
  auto* app = add_command(wandura, "config",
                          "print the organisation's rate limits (GET /v1/config): per counter, units per minute\n"
                          "(tickets for playback, requests for the others)",
                          "Exit status: 0 on success, 1 when the call failed, 2 for a usage error.");
  auto a = std::make_shared<config_args>();
  app->add_flag("--json", a->json, R"(print {"org_id":"...","limits":{"playback":N,...}} instead of a table)");
  app->add_option("--policy", a->policy, "retry policy: interactive (default), background, standard")
      ->type_name("P")
      ->check(CLI::IsMember({"interactive", "background", "standard"}));
  a->conn.add_options(*app);
  return {app, [a] { return run_config(*a); }};
}

} // namespace wandura::cli
