#include "emulator/wire_format.hpp"

#include "emulator/json_writer.hpp"
#include "emulator/service.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <utility>
#include <vector>

namespace wandura::emulator::detail {
namespace {

std::tm utc_tm(time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return tm;
}

} // namespace

std::string_view error_code_for(int status) noexcept {
  switch (status) {
  case 400: return "invalid_request";
  case 401: return "unauthorized";
  case 403: return "not_entitled";
  case 404: return "not_found";
  case 409: return "idempotency_conflict";
  case 429: return "rate_limited";
  case 503: return "service_unavailable";
  default: return status >= 500 ? "internal" : "invalid_request";
  }
}

std::string_view message_for(std::string_view error_code) noexcept {
  if (error_code == "rate_limited") {
    return "Too many requests for this account. This is an abuse ceiling, not a quota.";
  }
  if (error_code == "service_unavailable") {
    return "The ticket could not be issued in time. Retry after Retry-After.";
  }
  if (error_code == "not_ready") {
    return "The episode is past the film's last episode.";
  }
  if (error_code == "not_entitled") {
    return "This organisation is not entitled to the film.";
  }
  if (error_code == "not_found") {
    return "Not found.";
  }
  if (error_code == "unauthorized") {
    return "Missing or unknown API key.";
  }
  if (error_code == "idempotency_conflict") {
    return "The idempotency key was already used with a different request body.";
  }
  if (error_code == "internal") {
    return "Internal error.";
  }
  return "The request was not accepted.";
}

void append_header(std::string& headers, std::string_view name, std::uint64_t value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  headers.append(name).append(": ").append(buf, r.ptr).append("\r\n");
}

void append_header(std::string& headers, std::string_view name, std::string_view value) {
  headers.append(name).append(": ").append(value).append("\r\n");
}

void canonical_json(simdjson::dom::element e, std::string& out) {
  using simdjson::dom::element_type;
  switch (e.type()) {
  case element_type::OBJECT: {
    std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
    simdjson::dom::object object = e.get_object().value_unsafe();
    for (auto [k, v] : object) {
      fields.emplace_back(k, v);
    }
    std::stable_sort(fields.begin(), fields.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    out.push_back('{');
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i != 0) {
        out.push_back(',');
      }
      json_writer::append_string(out, fields[i].first);
      out.push_back(':');
      canonical_json(fields[i].second, out);
    }
    out.push_back('}');
    break;
  }
  case element_type::ARRAY: {
    out.push_back('[');
    bool first = true;
    simdjson::dom::array array = e.get_array().value_unsafe();
    for (auto v : array) {
      if (!first) {
        out.push_back(',');
      }
      first = false;
      canonical_json(v, out);
    }
    out.push_back(']');
    break;
  }
  case element_type::STRING: json_writer::append_string(out, e.get_string().value_unsafe()); break;
  case element_type::INT64: out.append(std::to_string(e.get_int64().value_unsafe())); break;
  case element_type::UINT64: out.append(std::to_string(e.get_uint64().value_unsafe())); break;
  case element_type::DOUBLE: {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, e.get_double().value_unsafe());
    out.append(buf, r.ptr);
    break;
  }
  case element_type::BOOL: out.append(e.get_bool().value_unsafe() ? "true" : "false"); break;
  case element_type::NULL_VALUE: out.append("null"); break;
  }
}

std::array<unsigned char, 32> sha256(std::string_view data) {
  // Fetched once: OpenSSL 3's one-shot SHA256() fetches the algorithm (under a lock) on every call.
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  std::array<unsigned char, 32> digest{};
  if (md == nullptr || EVP_Digest(data.data(), data.size(), digest.data(), nullptr, md, nullptr) != 1) {
    SHA256(reinterpret_cast<unsigned char const*>(data.data()), data.size(), digest.data());
  }
  return digest;
}

std::string base64(unsigned char const* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  auto written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xF]);
    }
  }
  return out;
}

std::optional<std::string> percent_decode(std::string_view segment) {
  auto const hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    return -1;
  };
  std::string out;
  out.reserve(segment.size());
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.push_back(segment[i]);
      continue;
    }
    int const high = i + 2 < segment.size() ? hex_value(segment[i + 1]) : -1;
    int const low = high < 0 ? -1 : hex_value(segment[i + 2]);
    if (low < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

bool visible_ascii(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x21 && c <= 0x7E; });
}

bool make_item_unreadable(std::string& body, std::size_t index) {
  constexpr std::string_view items_key = R"("items":[)";
  constexpr std::string_view status_key = R"("status":)";
  auto at = body.find(items_key);
  if (at == std::string::npos) {
    return false;
  }
  for (std::size_t i = 0;; ++i) {
    at = body.find(status_key, at);
    if (at == std::string::npos) {
      return false;
    }
    at += status_key.size();
    if (i == index) {
      break;
    }
  }
  auto const end = body.find_first_not_of("0123456789", at);
  if (end == at || end == std::string::npos) {
    return false;
  }
  body.insert(end, 1, '"');
  body.insert(at, 1, '"');
  return true;
}

std::string rfc3339(time_point t) {
  std::tm tm = utc_tm(t);
  char buf[32];
  auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {buf, n};
}

std::string http_date(time_point t) {
  std::tm tm = utc_tm(t);
  char buf[40];
  auto n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return {buf, n};
}

std::string_view reason_phrase(int status) noexcept {
  // The registered phrases (RFC 9110 section 15, and RFC 6585's 428, 429 and 431, RFC 7725's 451, RFC 8470's 425);
  // none for a status without one (RFC 9112 section 4: the phrase may be empty, and a client ignores it).
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 203: return "Non-Authoritative Information";
  case 204: return "No Content";
  case 205: return "Reset Content";
  case 206: return "Partial Content";
  case 300: return "Multiple Choices";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 305: return "Use Proxy";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 402: return "Payment Required";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 407: return "Proxy Authentication Required";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 416: return "Range Not Satisfiable";
  case 417: return "Expectation Failed";
  case 421: return "Misdirected Request";
  case 422: return "Unprocessable Content";
  case 425: return "Too Early";
  case 426: return "Upgrade Required";
  case 428: return "Precondition Required";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 451: return "Unavailable For Legal Reasons";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  default: return "";
  }
}

} // namespace wandura::emulator::detail
