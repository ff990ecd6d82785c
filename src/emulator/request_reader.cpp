#include "emulator/request_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace wandura::emulator::detail {
namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
           return lower(x) == lower(y);
         });
}

/// RFC 9110 `tchar`: what a header name is made of.
bool tchar(char ch) noexcept {
  auto u = static_cast<unsigned char>(ch);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
}

bool control_byte(char ch) noexcept {
  auto u = static_cast<unsigned char>(ch);
  return (u < 0x20 && u != '\t') || u == 0x7F;
}

/// The origin form (`/v1/config?x`) of a request target: an absolute-form one (`http://host/v1/config?x`, which RFC
/// 9112 §3.2.2 has servers accept) loses its scheme and authority; any other form is kept as it is.
std::string origin_form(std::string target) {
  std::string_view const t = target;
  std::size_t skip = 0;
  if (t.size() >= 7 && iequals(t.substr(0, 7), "http://")) {
    skip = 7;
  } else if (t.size() >= 8 && iequals(t.substr(0, 8), "https://")) {
    skip = 8;
  } else {
    return target;
  }
  std::size_t const path = t.find_first_of("/?", skip);
  if (path == std::string_view::npos) {
    return "/";
  }
  std::string out = t[path] == '?' ? "/" : "";
  out.append(t.substr(path));
  return out;
}

} // namespace

request_reader::request_reader() {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
}

request_reader::result request_reader::feed(std::string_view bytes) {
  if (std::exchange(handed_out_, false)) {
    req_.target.clear();
  }
  std::size_t const consumed = http_parser_execute(&parser_, &settings(), bytes.data(), bytes.size());
  auto const err = HTTP_PARSER_ERRNO(&parser_);
  if (complete_) {
    complete_ = false;
    http_parser_pause(&parser_, 0);
    if (parser_.upgrade != 0 || req_.method == std::string_view("CONNECT")) {
      refusal_ = "protocol upgrades are not supported";
      refusal_status_ = 400;
      return {event::refused, consumed};
    }
    handed_out_ = true;
    return {event::request, consumed};
  }
  if (err != HPE_OK) {
    if (bad_request_.empty()) {
      // http_parser reports a chunk size past 2^64 - 1 as it does a bad Content-Length header.
      bool const chunk_overflow = err == HPE_INVALID_CONTENT_LENGTH && in_body_ && (parser_.flags & F_CHUNKED) != 0;
      refusal_ = chunk_overflow ? "chunk size too large" : http_errno_description(err);
      refusal_status_ = err == HPE_HEADER_OVERFLOW ? 431 : 400;
    } else {
      refusal_ = bad_request_;
      refusal_status_ = bad_request_status_;
    }
    return {event::refused, consumed};
  }
  if (parser_.upgrade != 0) {
    refusal_ = "protocol upgrades are not supported";
    refusal_status_ = 400;
    return {event::refused, consumed};
  }
  return {event::need_more, bytes.size()}; // everything was consumed; read more
}

bool request_reader::take_continue() noexcept {
  // Only once the header section was read and accepted: a 100 sent before its end would invite a body that the
  // rest of the headers may refuse (a Content-Length over the cap).
  if (!expect_continue_ || sent_continue_ || !in_body_) {
    return false;
  }
  sent_continue_ = true;
  return true;
}

http_parser_settings const& request_reader::settings() {
  static http_parser_settings const s = [] {
    http_parser_settings st{};
    st.on_message_begin = &request_reader::on_message_begin;
    st.on_url = &request_reader::on_url;
    st.on_header_field = &request_reader::on_header_field;
    st.on_header_value = &request_reader::on_header_value;
    st.on_headers_complete = &request_reader::on_headers_complete;
    st.on_body = &request_reader::on_body;
    st.on_message_complete = &request_reader::on_message_complete;
    return st;
  }();
  return s;
}

int request_reader::on_message_begin(http_parser* p) {
  auto& r = self(p);
  r.req_ = http_request{};
  r.field_.clear();
  r.value_.clear();
  r.in_value_ = false;
  r.bad_request_.clear();
  r.bad_request_status_ = 400;
  r.has_host_ = false;
  r.has_transfer_encoding_ = false;
  r.expect_continue_ = false;
  r.sent_continue_ = false;
  r.in_body_ = false;
  return 0;
}

bool request_reader::admin_call() const {
  constexpr std::string_view admin = "/_emulator/";
  // A complete request's target is in origin form already; a refused one's may still be in absolute form.
  return req_.target.starts_with('/') ? req_.target.starts_with(admin) : origin_form(req_.target).starts_with(admin);
}

int request_reader::on_url(http_parser* p, char const* at, std::size_t n) {
  auto& r = self(p);
  if (r.req_.target.size() + n > max_target_bytes) {
    return r.refuse(414, "request target longer than 8192 bytes");
  }
  r.req_.target.append(at, n);
  return 0;
}

int request_reader::on_header_field(http_parser* p, char const* at, std::size_t n) {
  auto& r = self(p);
  if (r.in_value_ && !r.commit_header()) {
    return -1;
  }
  if (r.field_.size() + n > max_header_name_bytes) {
    return r.refuse(431, "header name longer than 256 bytes");
  }
  r.field_.append(at, n);
  return 0;
}

int request_reader::on_header_value(http_parser* p, char const* at, std::size_t n) {
  auto& r = self(p);
  r.in_value_ = true;
  if (r.value_.size() + n > max_header_value_bytes) {
    return r.refuse(431, "header value longer than 8192 bytes");
  }
  r.value_.append(at, n);
  return 0;
}

int request_reader::on_headers_complete(http_parser* p) {
  auto& r = self(p);
  if (r.in_value_ && !r.commit_header()) {
    return -1;
  }
  if (p->http_major != 1) {
    return r.refuse(505, "HTTP version not supported");
  }
  if (p->http_minor == 0 && r.has_transfer_encoding_) {
    return r.refuse(400, "Transfer-Encoding in an HTTP/1.0 request"); // RFC 9112 §6.1: faulty framing
  }
  if (p->http_minor >= 1 && !r.has_host_) {
    return r.refuse(400, "an HTTP/1.1 request without a Host header"); // RFC 9112 §3.2
  }
  if ((p->flags & F_CONTENTLENGTH) != 0 && p->content_length > max_body_bytes) {
    return r.refuse(413, "request body larger than 65536 bytes");
  }
  r.req_.target = origin_form(std::move(r.req_.target));
  r.req_.method = http_method_str(static_cast<http_method>(p->method));
  r.req_.keep_alive = http_should_keep_alive(p) != 0;
  if (p->http_minor == 0) {
    r.expect_continue_ = false; // RFC 9110 §10.1.1: ignored from HTTP/1.0, which has no 1xx (§15.2)
  }
  r.req_.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(p->content_length, max_body_bytes)) +
                      simdjson::SIMDJSON_PADDING);
  r.in_body_ = true;
  return 0;
}

int request_reader::on_body(http_parser* p, char const* at, std::size_t n) {
  auto& r = self(p);
  if (r.req_.body.size() + n > max_body_bytes) {
    return r.refuse(413, "request body larger than 65536 bytes");
  }
  r.req_.body.append(at, n);
  return 0;
}

int request_reader::on_message_complete(http_parser* p) {
  self(p).complete_ = true;
  self(p).expect_continue_ = false; // answered or not, the request is whole: no 100 for it any more
  http_parser_pause(p, 1);
  return 0;
}

int request_reader::refuse(int status, std::string why) {
  bad_request_ = std::move(why);
  bad_request_status_ = status;
  return -1;
}

bool request_reader::commit_header() {
  in_value_ = false;
  while (!value_.empty() && (value_.back() == ' ' || value_.back() == '\t')) {
    value_.pop_back();
  }
  auto set_once = [&](bool& has, std::string* slot, std::string_view name) {
    if (has) {
      refuse(400, "repeated " + std::string(name) + " header");
      return false;
    }
    has = true;
    if (slot != nullptr) {
      *slot = value_;
    }
    return true;
  };
  // http_parser (non-strict build) tolerates some bad header bytes; RFC 9110 does not.
  if (field_.empty() || !std::all_of(field_.begin(), field_.end(), tchar)) {
    refuse(400, "invalid header name");
    return false;
  }
  if (std::any_of(value_.begin(), value_.end(), control_byte)) {
    refuse(400, "invalid header value");
    return false;
  }
  bool ok = true;
  if (iequals(field_, "authorization")) {
    ok = set_once(req_.has_authorization, &req_.authorization, "Authorization");
  } else if (iequals(field_, "idempotency-key")) {
    ok = set_once(req_.has_idempotency_key, &req_.idempotency_key, "Idempotency-Key");
  } else if (iequals(field_, "host")) {
    // RFC 9112 §3.2: more than one, or one that is not `host[:port]`, is a 400 (an empty one is allowed).
    ok = set_once(has_host_, nullptr, "Host");
    if (ok && std::any_of(value_.begin(), value_.end(), [](char ch) {
          return std::string_view(" \t/?#@\\\"<>{}|^`").find(ch) != std::string_view::npos;
        })) {
      refuse(400, "invalid Host header");
      ok = false;
    }
  } else if (iequals(field_, "expect")) {
    expect_continue_ = iequals(value_, "100-continue");
  } else if (iequals(field_, "transfer-encoding")) {
    // http_parser reads `gzip, chunked` as chunked alone and would hand on a body still coded: only chunked, once,
    // is understood (RFC 9112 §6.1: 501 for a coding the server does not know; chunked twice is malformed).
    ok = set_once(has_transfer_encoding_, nullptr, "Transfer-Encoding");
    if (ok && value_.empty()) {
      refuse(400, "empty Transfer-Encoding header");
      ok = false;
    } else if (ok && !iequals(value_, "chunked")) {
      refuse(501, "transfer coding other than chunked");
      ok = false;
    }
  }
  field_.clear();
  value_.clear();
  return ok;
}

} // namespace wandura::emulator::detail
