// Links against the installed package's `prometheus` component (wandura::prometheus, with prometheus-cpp): a client
// records into `http_client_metrics` while it gets a ticket from the in-process emulator, and prometheus-cpp's own
// serializer renders the collector's scrape.
#include <wandura/emulator/emulator.hpp>
#include <wandura/playback/client.hpp>
#include <wandura/playback/http_client_metrics.hpp>
#include <wandura/playback/viewer_ref.hpp>
#include <wandura/prometheus/collector.hpp>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <prometheus/text_serializer.h>

#include <cstdio>
#include <memory>
#include <string>

int main() {
  auto emu = wandura::emulator::server::start({});
  auto metrics = std::make_shared<wandura::http_client_metrics>();
  auto collector = std::make_shared<wandura::prometheus_collector>(metrics);

  asio::io_context io;
  wandura::client_options options{.base_url = emu->base_url(), .api_key = "test-key"};
  options.retry.observer = metrics;
  wandura::client api(io.get_executor(), std::move(options));
  wandura::viewer who{wandura::make_viewer_ref("secret", "user-1", "install-1"), "device-1", "device-key"};
  auto started = asio::co_spawn(io, api.start_episode(who, "the-heiress-returns", 1, 1), asio::use_future);
  io.run();
  if (started.get().play.outcome != wandura::item_outcome::granted) {
    std::puts("unexpected ticket outcome");
    return 1;
  }

  prometheus::TextSerializer serializer;
  auto const scraped = serializer.Serialize(collector->Collect());
  auto const series =
      std::string(R"(wandura_call_duration_seconds_count{operation="start_episode",outcome="success"} 1)");
  if (scraped.find(series) == std::string::npos) {
    std::printf("the scrape lacks %s:\n%s", series.c_str(), scraped.c_str());
    return 1;
  }
  std::printf("wandura consumer (prometheus): %s\n", series.c_str());
  return 0;
}
