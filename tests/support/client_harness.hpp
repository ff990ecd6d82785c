// A wandura::client on a fake transport and a hand-stepped clock, and helpers to write the server's batch bodies and
// read back what the client sent. Shared by the client's unit tests.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/playback/client.hpp"
#include "wandura/testing/fake_transport.hpp"
#include "wandura/testing/manual_clock.hpp"

namespace client_harness {

using wandura::testing::fake_step;

/// A batch of one episode as play: the-heiress-returns episode 4, device "dev-1", no viewer_ref.
inline wandura::ticket_batch single_play_batch() {
  wandura::ticket_batch batch;
  batch.union_info = "dev-1";
  batch.drm_kek = "kek";
  batch.episodes.push_back({"the-heiress-returns", 4, wandura::intent::play});
  return batch;
}

inline std::string granted_item(std::string_view film, int episode, std::string_view intent, std::string_view id,
                                bool reused = false, std::string_view expires_at = "2099-01-01T00:00:00Z") {
  return std::string(R"({"film_ref":")") + std::string(film) + R"(","episode_no":)" + std::to_string(episode) +
         R"(,"intent":")" + std::string(intent) + R"(","status":200,"reused":)" + (reused ? "true" : "false") +
         R"(,"ticket":{"ticket_id":")" + std::string(id) +
         R"(","manifest_url":"https://m/1","license_url":"https://l/1","expires_at":")" + std::string(expires_at) +
         R"(","drm_payload":"p"}})";
}

inline std::string refused_item(std::string_view film, int episode, std::string_view intent, int status,
                                std::string_view code, std::string_view reason = {}, int retry_after = -1) {
  std::string s = std::string(R"({"film_ref":")") + std::string(film) + R"(","episode_no":)" + std::to_string(episode) +
                  R"(,"intent":")" + std::string(intent) + R"(","status":)" + std::to_string(status) +
                  R"(,"error_code":")" + std::string(code) + '"';
  if (!reason.empty()) {
    s += R"(,"reason":")" + std::string(reason) + '"';
  }
  if (retry_after >= 0) {
    s += R"(,"retry_after":)" + std::to_string(retry_after);
  }
  return s + "}";
}

inline std::string batch_body(std::vector<std::string> const& items) {
  std::string s = R"({"request_id":"req_1","items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) {
    s += (i ? "," : "") + items[i];
  }
  return s + "]}";
}

/// Episodes in a recorded request body, as "film/episode/intent" strings.
inline std::vector<std::string> sent_episodes(std::string const& body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string json(body);
  std::vector<std::string> out;
  auto doc = parser.iterate(json);
  for (auto e : doc["episodes"].get_array()) {
    std::string_view film = e["film_ref"].get_string().value();
    std::int64_t no = e["episode_no"].get_int64().value();
    std::string_view in = e["intent"].get_string().value();
    out.push_back(std::string(film) + "/" + std::to_string(no) + "/" + std::string(in));
  }
  return out;
}

/// A client on a fake transport and a hand-stepped clock: every call runs in zero real time.
struct harness {
  asio::io_context io;
  std::shared_ptr<wandura::testing::manual_clock> clock = std::make_shared<wandura::testing::manual_clock>();
  std::shared_ptr<wandura::testing::fake_transport> fake =
      std::make_shared<wandura::testing::fake_transport>(io.get_executor(), *clock);
  std::vector<std::string> warn_lines;
  std::unique_ptr<wandura::client> api;

  explicit harness(wandura::client_options options = {}) {
    options.base_url = "http://127.0.0.1:1/";
    options.api_key = "test-key";
    options.retry.time_source = clock;
    options.retry.random = [] { return 0.5; };
    options.retry.log = [this](wandura::log_level, std::string_view line) { warn_lines.emplace_back(line); };
    api = std::make_unique<wandura::client>(fake, std::move(options));
  }

  template <typename T> T run(asio::awaitable<T> op) {
    std::optional<T> out;
    std::exception_ptr failure;
    bool done = false;
    asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T r) {
      failure = e;
      if (!e) {
        out = std::move(r);
      }
      done = true;
    });
    for (int i = 0; i < 1000 && !done; ++i) {
      io.restart();
      io.poll();
      if (!done) {
        clock->advance_to_next_wakeup();
      }
    }
    REQUIRE(done);
    if (failure) {
      std::rethrow_exception(failure);
    }
    return std::move(*out);
  }

  /// Runs `ops` at once (each spawned before any runs) until all are done; their results in completion order.
  template <typename T> std::vector<T> run_together(std::vector<asio::awaitable<T>> ops) {
    std::vector<T> done;
    for (auto& op : ops) {
      asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T r) {
        REQUIRE_FALSE(e);
        done.push_back(std::move(r));
      });
    }
    for (int i = 0; i < 1000 && done.size() < ops.size(); ++i) {
      io.restart();
      io.poll();
      if (done.size() < ops.size()) {
        clock->advance_to_next_wakeup();
      }
    }
    REQUIRE(done.size() == ops.size());
    return done;
  }

  /// The viewer `start` uses, on `device`.
  static wandura::viewer viewer_on(std::string device = "dev-1") {
    return {"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a", std::move(device), "kek"};
  }

  wandura::episode_start start(int episode, int unlocked_through, std::string device = "dev-1",
                               wandura::call_options options = {}) {
    return run(api->start_episode(viewer_on(std::move(device)), "the-heiress-returns", episode, unlocked_through,
                                  std::move(options)));
  }
};

} // namespace client_harness
