// libFuzzer target: the ticket batch reader (`response_parser::parse_ticket_batch`). Beyond what every reader must
// do (response_readers.hpp), a batch that reads must keep the item rules ticket_result.hpp states, and a result
// reused for a second body must read exactly as a fresh one (nothing of the first left in it).
#include "response_readers.hpp"
#include "wandura/playback/ticket_result.hpp"

namespace {

using wandura::fuzz::expect;

void check_items(wandura::ticket_batch_result const& r) {
  for (auto const& item : r.items) {
    expect(item.ticket.has_value() == (item.outcome == wandura::item_outcome::granted));
    bool const unreadable = item.error_code == wandura::unreadable_item_code && !item.detail.empty();
    expect(unreadable == !item.detail.empty());
    if (unreadable) {
      expect(item.outcome == wandura::item_outcome::failed);
      expect(item.error == wandura::errc::invalid_response);
    }
  }
}

/// A batch with one item of every kind, read first into the result that is then reused.
constexpr std::string_view full_batch =
    R"({"request_id":"r","items":[{"film_ref":"f","episode_no":1,"intent":"play","status":200,"reused":true,)"
    R"("ticket":{"ticket_id":"t","manifest_url":"m","license_url":"l","drm_payload":"d",)"
    R"("expires_at":"2026-11-30T11:00:00Z"}},{"film_ref":"f","episode_no":2,"intent":"x","status":429,)"
    R"("error_code":"rate_limited","reason":"prefetch_shed","retry_after":2},)"
    R"({"film_ref":"f","episode_no":3,"intent":"prefetch","status":"bad"}]})";

} // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  wandura::fuzz::check_reader<wandura::ticket_batch_result>(
      data, size, [](auto& parser, auto const& in, auto& out) { return parser.parse_ticket_batch(in, out); });

  std::string_view const text(reinterpret_cast<char const*>(data), size);
  wandura::detail::response_parser parser;
  wandura::ticket_batch_result fresh;
  if (parser.parse_ticket_batch(text, fresh)) {
    return 0;
  }
  check_items(fresh);
  wandura::ticket_batch_result reused;
  expect(!parser.parse_ticket_batch(full_batch, reused));
  expect(!parser.parse_ticket_batch(text, reused));
  expect(fresh == reused);
  return 0;
}
