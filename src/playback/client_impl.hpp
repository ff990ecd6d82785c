// What a `wandura::client` is made of, shared by its operations through `std::shared_ptr<client::impl>`: every
// operation keeps it alive until the operation ends, so that destroying the client never frees what a call in
// flight still uses.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "call_registry.hpp"
#include "metrics_recorder.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/http_client_metrics.hpp"

namespace wandura {

struct client::impl {
  impl(std::shared_ptr<http_sender> s, client_options o);

  /// A request to `url` with the client's header lines (and `Content-Type` for a POST).
  [[nodiscard]] http_request make_request(http_method method, std::string url, std::string body) const;

  client_options options;
  /// The one time source of the client: retry engine, ticket store, viewer limiter, latency (from
  /// `options.retry.time_source`, or a `real_clock`).
  std::shared_ptr<wandura::clock> time;
  /// Per-attempt and per-call telemetry (OpenTelemetry HTTP client conventions); the engine's attempt observer,
  /// passing every event on to `options.retry.observer` when the user set one.
  std::shared_ptr<http_client_metrics> http_metrics;
  std::shared_ptr<http_sender> sender;
  retry_engine engine;
  /// `options.tickets`, or a `memory_ticket_store` on `time`.
  std::shared_ptr<ticket_store> store;
  /// `options.viewer_limit`, or a `detail::viewer_limiter` at `options.viewer_tickets_per_minute`, or null.
  std::shared_ptr<wandura::viewer_limit> limit;
  detail::playback_metrics metrics;
  detail::call_registry calls;
  std::string base_url;
  std::string tickets_url;
  /// The header lines of every request, made once: a request copies them (no length scan, no moves).
  http_header authorization{"Authorization", {}};
  http_header accept{"Accept", "application/json"};
  http_header content_type{"Content-Type", "application/json"};
};

namespace detail {
class response_parser;
/// The response parser of this thread. It keeps simdjson buffers for reuse; each use runs to completion without
/// suspending, so one per thread is safe even though coroutines move between threads.
[[nodiscard]] response_parser& thread_parser();
} // namespace detail

} // namespace wandura
