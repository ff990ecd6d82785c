// A scripted `http_sender` for tests of anything above the transport (Beast `test::stream` + `fail_count`):
// it answers from a script of steps, can inject a failure at attempt N, and records every request it saw with its
// headers, body and attempt options. No sockets.
//
//     wandura::testing::fake_transport fake(io.get_executor(), clock);
//     fake.push(fake_step::respond(503, R"({"error_code":50200})", {{"Retry-After", "1"}}));
//     fake.push(fake_step::respond(200, R"({"ok":true})"));
//     fake.fail_at(1, wandura::errc::connection_reset);   // attempt 1 fails instead of answering 503
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "wandura/resilience/clock.hpp"
#include "wandura/transport/http_sender.hpp"

namespace wandura::testing {

/// One scripted answer.
struct fake_step {
  enum class kind {
    respond, ///< Answer with `response`.
    fail,    ///< Complete with the transport error `error`.
    stall,   ///< Never answer: the attempt ends with `errc::attempt_timeout` when its timeout passes on the clock
             ///< (or only by cancellation when the timeout is 0). A timeout too long for the clock to add
             ///< (`milliseconds::max()`) passes at its `time_point::max()`.
  };
  kind what = kind::respond;
  http_response response;
  std::error_code error;
  /// For `respond` and `fail`: time the attempt takes on the clock before completing (0: answers at once).
  std::chrono::milliseconds latency{0};

  /// An HTTP answer; `headers` as {name, value} pairs.
  [[nodiscard]] static fake_step respond(int status, std::string_view body = {},
                                         std::vector<http_header> const& headers = {});
  [[nodiscard]] static fake_step fail(std::error_code error);
  [[nodiscard]] static fake_step stall();
};

/// What the fake saw for one attempt.
struct recorded_attempt {
  http_request request; ///< A copy: method, URL, every header, body.
  attempt_options options;
  /// The header value by name (case-insensitive), or empty.
  [[nodiscard]] std::string header(std::string_view name) const;
};

/// A scripted, recording `http_sender`.
///
/// Steps are consumed in order, one per attempt; when the script is exhausted the default step answers (200 with
/// body `{}` unless `set_default` changed it). `fail_at(n, ec)` makes attempt `n` (1-based, counted over the
/// fake's lifetime) fail with `ec` in place of its scripted step (which is consumed, as the server's answer to that
/// attempt is lost).
///
/// @par Thread safety
/// All member functions may be called from any thread; attempts may run concurrently. Latencies and stalls sleep on
/// the given clock, so with `manual_clock` they complete only when the test advances it.
class fake_transport final : public http_sender {
public:
  /// @param executor returned by `get_executor`; a client over the fake runs there the work of calls made from other
  ///        contexts (http_sender.hpp), so a test that makes such calls runs it too.
  /// @param time_source used for latencies and stalls; not owned, must outlive the fake.
  fake_transport(asio::any_io_executor executor, wandura::clock& time_source);

  /// Appends a step to the script.
  void push(fake_step step);
  /// The answer once the script is exhausted.
  void set_default(fake_step step);
  /// Attempt number `attempt` (1-based) fails with `error` in place of its scripted step.
  void fail_at(std::size_t attempt, std::error_code error);

  [[nodiscard]] asio::awaitable<attempt_result> send_attempt(http_request const& request,
                                                             attempt_options const& options) override;
  [[nodiscard]] asio::any_io_executor get_executor() const override { return executor_; }

  /// Every attempt seen so far, in arrival order (a copy).
  [[nodiscard]] std::vector<recorded_attempt> attempts() const;
  [[nodiscard]] std::size_t attempt_count() const;
  /// Steps of the script not yet consumed.
  [[nodiscard]] std::size_t steps_left() const;

private:
  asio::any_io_executor executor_;
  wandura::clock& clock_;
  mutable std::mutex mutex_;
  std::deque<fake_step> script_;
  fake_step default_;
  std::map<std::size_t, std::error_code> failures_;
  std::vector<recorded_attempt> seen_;
};

} // namespace wandura::testing
