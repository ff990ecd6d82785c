#include "playback/response_parser.hpp"

#include "playback/json_scan.hpp"

namespace wandura::detail {

simdjson::padded_string_view response_parser::padded(std::string_view body) {
  scratch_.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  scratch_.assign(body.data(), body.size());
  return simdjson::padded_string_view(scratch_.data(), scratch_.size(), scratch_.capacity());
}

simdjson::padded_string_view response_parser::padded(response_body const& body) noexcept {
  return simdjson::padded_string_view(body.data(), body.size(), body.capacity());
}

// The public overloads: a response_body is read in place, a string_view through the padded scratch copy.
std::error_code response_parser::parse_ticket_batch(response_body const& body, ticket_batch_result& out) {
  return read_ticket_batch(padded(body), out);
}
std::error_code response_parser::parse_ticket_batch(std::string_view body, ticket_batch_result& out) {
  return read_ticket_batch(padded(body), out);
}
std::error_code response_parser::parse_org_config(response_body const& body, org_config& out) {
  return read_org_config(padded(body), out);
}
std::error_code response_parser::parse_org_config(std::string_view body, org_config& out) {
  return read_org_config(padded(body), out);
}
std::error_code response_parser::parse_film(response_body const& body, film& out) {
  return read_film(padded(body), out);
}
std::error_code response_parser::parse_film(std::string_view body, film& out) {
  return read_film(padded(body), out);
}
std::error_code response_parser::parse_videos(response_body const& body, std::vector<video>& out) {
  return read_videos(padded(body), out);
}
std::error_code response_parser::parse_videos(std::string_view body, std::vector<video>& out) {
  return read_videos(padded(body), out);
}
std::error_code response_parser::parse_video(response_body const& body, video& out) {
  return read_video(padded(body), out);
}
std::error_code response_parser::parse_video(std::string_view body, video& out) {
  return read_video(padded(body), out);
}
std::error_code response_parser::parse_creatives(response_body const& body, std::vector<creative>& out) {
  return read_creatives(padded(body), out);
}
std::error_code response_parser::parse_creatives(std::string_view body, std::vector<creative>& out) {
  return read_creatives(padded(body), out);
}

} // namespace wandura::detail
