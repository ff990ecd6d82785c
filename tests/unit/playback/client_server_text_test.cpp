// Text the server chooses (an error body's `error_code`, a key of a 2xx body) on its way into the client's WARN
// lines and error messages: those stay one bounded line, while the typed data the caller gets keeps it unchanged.
#include "wandura/playback/client.hpp"

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"
#include "wandura/testing/fake_transport.hpp"

#include "client_harness.hpp"

using wandura::testing::fake_step;
using namespace client_harness;

namespace {

bool one_line(std::string_view text) {
  return text.find('\n') == std::string_view::npos && text.find('\r') == std::string_view::npos;
}

} // namespace

TEST_CASE("client: a server error_code with a line break and 100 kB stays one bounded line in WARN lines and what()") {
  harness h;
  std::string const code = "50200\nWARN retry 9/9 in 0 ms: HTTP 200 code=forged\r" + std::string(100'000, 'z');
  std::string body = R"({"error":"down","error_code":")";
  body += "50200\\nWARN retry 9/9 in 0 ms: HTTP 200 code=forged\\r" + std::string(100'000, 'z') + R"("})";
  h.fake->set_default(fake_step::respond(503, body));
  try {
    (void)h.run(h.api->get_config());
    FAIL("get_config succeeded");
  } catch (wandura::error const& e) {
    std::string_view const what = e.what();
    CHECK(one_line(what));
    CHECK(what.size() < 2'000);
    CHECK(what.find("code=50200\\x0aWARN retry 9/9") != std::string_view::npos);
    CHECK(what.find("...") != std::string_view::npos);
    CHECK(e.server_error_code() == code); // the typed value keeps what the server sent
  }
  REQUIRE_FALSE(h.warn_lines.empty());
  for (auto const& line : h.warn_lines) {
    CHECK(one_line(line));
    CHECK(line.size() < 1'000);
    CHECK(line.starts_with("retry "));
  }
}

TEST_CASE("client: a long key in an unreadable 2xx body is quoted bounded in what()") {
  harness h;
  std::string const key(100'000, 'k');
  h.fake->set_default(fake_step::respond(200, R"({"org_id":"o","limits":{")" + key + R"(":"many"}})"));
  try {
    (void)h.run(h.api->get_config());
    FAIL("get_config succeeded");
  } catch (wandura::error const& e) {
    std::string_view const what = e.what();
    CHECK(e.code() == wandura::errc::invalid_response);
    CHECK(one_line(what));
    CHECK(what.size() < 2'000);
    CHECK(what.find("limits.kkkk") != std::string_view::npos);
  }
}

TEST_CASE("client: a key with control and non-ASCII bytes in an unreadable 2xx body is quoted escaped, once") {
  harness h;
  h.fake->set_default(fake_step::respond(200, "{\"org_id\":\"o\",\"limits\":{\"caf\xc3\xa9\x7f\":\"many\"}}"));
  try {
    (void)h.run(h.api->get_config());
    FAIL("get_config succeeded");
  } catch (wandura::error const& e) {
    std::string_view const what = e.what();
    CHECK(e.code() == wandura::errc::invalid_response);
    CHECK(what.find("limits.caf\\xc3\\xa9\\x7f") != std::string_view::npos);
    CHECK(what.find("\\x5c") == std::string_view::npos);
  }
}

namespace {

/// A sender of one's own whose every attempt fails with words it did not escape: a client must not trust them.
class raw_words_sender final : public wandura::http_sender {
public:
  raw_words_sender(asio::any_io_executor ex, std::string words) : ex_(std::move(ex)), words_(std::move(words)) {}
  asio::awaitable<wandura::attempt_result> send_attempt(wandura::http_request const&,
                                                        wandura::attempt_options const&) override {
    wandura::attempt_result out;
    out.error = wandura::errc::transport_failed;
    out.detail = words_;
    co_return out;
  }
  [[nodiscard]] asio::any_io_executor get_executor() const override { return ex_; }

private:
  asio::any_io_executor ex_;
  std::string words_;
};

} // namespace

TEST_CASE("client: a sender of one's own that fails with raw words still gives one bounded line in what()") {
  asio::io_context io;
  std::string const words = "reset\nWARN retry 9/9 forged\x01" + std::string(100'000, 'w');
  wandura::client_options options;
  options.base_url = "http://127.0.0.1:1/";
  options.api_key = "test-key";
  auto sender = std::make_shared<raw_words_sender>(io.get_executor(), words);
  wandura::client api(sender, std::move(options));
  std::exception_ptr failure;
  asio::co_spawn(io, api.get_config(), [&](std::exception_ptr e, wandura::org_config) { failure = e; });
  io.run_for(std::chrono::seconds(5));
  REQUIRE(failure);
  try {
    std::rethrow_exception(failure);
  } catch (wandura::error const& e) {
    std::string_view const what = e.what();
    CHECK(e.code() == wandura::errc::transport_failed);
    CHECK(one_line(what));
    CHECK(what.find("reset\\x0aWARN retry 9/9 forged\\x01") != std::string_view::npos);
    CHECK(what.size() < 10'000);
  }
}
