#include "counting_sender.hpp"

#include <string_view>

#include <simdjson.h>

namespace demo {
namespace {

constexpr std::string_view tickets_path = "/v1/playback/tickets";

bool is_ticket_request(wandura::http_request const& r) {
  auto const path = std::string_view(r.url).substr(0, r.url.find('?'));
  return r.method == wandura::http_method::post && path.size() >= tickets_path.size() &&
         path.substr(path.size() - tickets_path.size()) == tickets_path;
}

/// Adds the play and prefetch items of `array` (the request's `episodes` or the response's `items`) to the counts;
/// with `only_status`, only the items whose `status` is that.
void count_items(simdjson::dom::element doc, char const* array, std::uint64_t& plays, std::uint64_t& prefetches,
                 std::int64_t only_status = 0) {
  simdjson::dom::array items;
  if (doc[array].get_array().get(items) != simdjson::SUCCESS) {
    return;
  }
  for (auto item : items) {
    std::string_view intent;
    if (item["intent"].get_string().get(intent) != simdjson::SUCCESS) {
      continue;
    }
    std::int64_t status = 0;
    if (only_status != 0 && (item["status"].get_int64().get(status) != simdjson::SUCCESS || status != only_status)) {
      continue;
    }
    if (intent == "play") {
      ++plays;
    } else if (intent == "prefetch") {
      ++prefetches;
    }
  }
}

} // namespace

counting_sender::counting_sender(std::shared_ptr<wandura::http_sender> inner) : inner_(std::move(inner)) {}

asio::awaitable<wandura::attempt_result> counting_sender::send_attempt(wandura::http_request const& request,
                                                                       wandura::attempt_options const& options) {
  bool const tickets = is_ticket_request(request);
  simdjson::dom::parser parser;
  if (tickets) {
    std::uint64_t plays = 0;
    std::uint64_t prefetches = 0;
    simdjson::dom::element doc;
    if (parser.parse(simdjson::padded_string(request.body)).get(doc) == simdjson::SUCCESS) {
      count_items(doc, "episodes", plays, prefetches);
    }
    play_sent_.fetch_add(plays, std::memory_order_relaxed);
    prefetch_sent_.fetch_add(prefetches, std::memory_order_relaxed);
  }
  auto result = co_await inner_->send_attempt(request, options);
  if (tickets && !result.error) {
    std::uint64_t plays = 0;
    std::uint64_t prefetches = 0;
    simdjson::dom::element doc;
    auto const body = simdjson::padded_string(result.response.body.view());
    if (parser.parse(body).get(doc) == simdjson::SUCCESS) {
      count_items(doc, "items", plays, prefetches, 429);
    }
    play_429_.fetch_add(plays, std::memory_order_relaxed);
    prefetch_429_.fetch_add(prefetches, std::memory_order_relaxed);
  }
  co_return result;
}

item_counts counting_sender::counts() const noexcept {
  return {play_sent_.load(std::memory_order_relaxed), prefetch_sent_.load(std::memory_order_relaxed),
          play_429_.load(std::memory_order_relaxed), prefetch_429_.load(std::memory_order_relaxed)};
}

} // namespace demo
