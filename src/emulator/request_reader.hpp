// The emulator's HTTP/1.1 request reader: libhttp-parser plus the checks it leaves out (RFC 9110 header-name
// tokens, control bytes in values, repeated Authorization/Idempotency-Key, HTTP/1.x only, size limits, no
// upgrades). It owns no socket: the connection feeds it the bytes it reads, so it can be tested and fuzzed alone.
//
// Thread safety: one reader per connection; not for concurrent use.
#pragma once

#include "emulator/service.hpp"

#include <http_parser.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace wandura::emulator::detail {

/// Request bodies above 64 KiB are refused with 413, targets above 8 KiB with 414, header names above 256 bytes and
/// header values above 8 KiB with 431.
inline constexpr std::size_t max_body_bytes = std::size_t{64} * 1024;
inline constexpr std::size_t max_target_bytes = std::size_t{8} * 1024;
inline constexpr std::size_t max_header_name_bytes = 256;
inline constexpr std::size_t max_header_value_bytes = std::size_t{8} * 1024;

class request_reader {
public:
  /// What one `feed` call found.
  enum class event {
    need_more, ///< Every byte was consumed; no request is complete yet.
    request,   ///< A request is complete (`request()`); bytes after it (pipelining) were not consumed.
    refused,   ///< The bytes are not an acceptable request (`refusal()` says why); the connection must end.
  };
  struct result {
    event what = event::need_more;
    std::size_t consumed = 0; ///< Bytes of the input used; feed the rest again after handling a request.
  };

  request_reader();
  request_reader(request_reader const&) = delete;
  request_reader& operator=(request_reader const&) = delete;

  /// Parses `bytes`, stopping after the first complete request.
  result feed(std::string_view bytes);

  /// The complete request after `event::request`; valid until the next `feed`.
  [[nodiscard]] http_request& request() noexcept { return req_; }
  /// Whether the request read so far is one to the admin API (under `/_emulator/`): the complete request's, or as
  /// much of a refused one's target as was read (docs/protocol.md §4: admin calls are not counted, malformed ones
  /// included).
  [[nodiscard]] bool admin_call() const;
  /// Why the bytes were refused, after `event::refused` (for the error body).
  [[nodiscard]] std::string const& refusal() const noexcept { return refusal_; }
  /// The status that refusal is answered with, after `event::refused`: 413 (body too large), 414 (target too
  /// long), 431 (a header too large), 501 (a transfer coding other than chunked), 505 (not HTTP/1.x), else 400.
  [[nodiscard]] int refusal_status() const noexcept { return refusal_status_; }
  /// True once per HTTP/1.1 request that sent `Expect: 100-continue`, when the interim `100 Continue` is due: its
  /// header section read and accepted, its body not yet complete. An HTTP/1.0 request's expectation is ignored.
  [[nodiscard]] bool take_continue() noexcept;

private:
  static http_parser_settings const& settings();
  static request_reader& self(http_parser* p) { return *static_cast<request_reader*>(p->data); }
  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, char const* at, std::size_t n);
  static int on_header_field(http_parser* p, char const* at, std::size_t n);
  static int on_header_value(http_parser* p, char const* at, std::size_t n);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, char const* at, std::size_t n);
  static int on_message_complete(http_parser* p);

  bool commit_header();
  /// Records why the request is refused (and with which status); returns -1, http_parser's "stop".
  int refuse(int status, std::string why);

  http_parser parser_{};
  http_request req_;
  std::string field_;
  std::string value_;
  bool in_value_ = false;
  bool complete_ = false;
  /// A complete request was handed out: the next `feed` forgets its target (a malformed next request may never
  /// begin a message, and must not be taken for the last one: `admin_call`).
  bool handed_out_ = false;
  bool expect_continue_ = false;
  bool sent_continue_ = false;
  bool has_host_ = false;
  bool has_transfer_encoding_ = false;
  bool in_body_ = false; ///< the request's headers were accepted: its body (if any) is being read
  std::string bad_request_;
  int bad_request_status_ = 400;
  std::string refusal_;
  int refusal_status_ = 400;
};

} // namespace wandura::emulator::detail
