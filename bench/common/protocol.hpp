// The three ways the loopback benchmarks reach nginx, and the check that a side really spoke the protocol its row
// names (counted from the responses and the connections the side opened, never assumed from its settings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <curl/curl.h>

namespace wandura::bench {

/// What a row measures on the wire.
enum class protocol {
  plain,  ///< HTTP/1.1 over TCP, keep-alive (`http://`)
  tls_h1, ///< HTTP/1.1 over TLS, keep-alive: nginx's TLS port that offers only `http/1.1` by ALPN
  tls_h2, ///< HTTP/2 over TLS by ALPN, streams multiplexed on few connections
};

/// The word a row's name carries after the benchmark's name: none for `plain` (those rows keep their old names),
/// "tls-h1", "tls-h2".
[[nodiscard]] inline std::string_view row_word(protocol p) {
  switch (p) {
  case protocol::plain: return "";
  case protocol::tls_h1: return "tls-h1";
  case protocol::tls_h2: return "tls-h2";
  }
  return "";
}

/// "plain", "tls-h1" or "tls-h2" (the command line's `--protocol` values); nullopt for anything else.
[[nodiscard]] inline std::optional<protocol> protocol_from_word(std::string_view word) {
  for (protocol p : {protocol::plain, protocol::tls_h1, protocol::tls_h2}) {
    if (word == (p == protocol::plain ? "plain" : row_word(p))) {
      return p;
    }
  }
  return std::nullopt;
}

/// What one side was seen doing on the wire: over a run, or over a row (its warm-up and all its runs).
struct wire_seen {
  std::uint64_t http1_responses = 0; ///< responses that came over HTTP/1.1
  std::uint64_t http2_responses = 0; ///< responses that came over HTTP/2
  std::uint64_t other_responses = 0; ///< responses over any other version (HTTP/1.0, HTTP/3)
  std::uint64_t connections_opened = 0;

  wire_seen& operator+=(wire_seen const& o) {
    http1_responses += o.http1_responses;
    http2_responses += o.http2_responses;
    other_responses += o.other_responses;
    connections_opened += o.connections_opened;
    return *this;
  }
  /// Counts one response by its version, as `http_response::http_version` spells it (11, 20).
  void count_version(int http_version) {
    ++(http_version == 11 ? http1_responses : http_version == 20 ? http2_responses : other_responses);
  }
};

/// Most connections an HTTP/2 row may open (both sides wait for a connection that may multiplex, so one is
/// expected: a second would be a race at start, more means the streams were not multiplexed).
inline constexpr std::uint64_t max_h2_connections = 2;

/// HTTP/2 stream errors a row accepts after `requests` requests: libcurl before 8.0 now and then fails one stream of
/// many parallel HTTP/2 streams with a stream error (curl#4642, fixed in 8.0; the transport reports it as
/// `connection_reset`, retryable, and its tests tolerate it the same way; the client retries it). One in 1,000
/// requests, plus one, on such a libcurl (seen: about one in 5,000 at c=64); none on 8.x. Rows print how many they
/// saw.
[[nodiscard]] inline std::uint64_t tolerated_stream_resets(std::uint64_t requests) {
  return curl_version_info(CURLVERSION_NOW)->version_num < 0x080000 ? requests / 1000 + 1 : 0;
}

/// Empty when `seen` shows the side spoke `p` at `concurrency`; otherwise what it did instead, in words. Every
/// response must have come in the row's HTTP version (and at least one must have come); over HTTP/1.1 a side may
/// have opened at most one connection per concurrent request (keep-alive held), over HTTP/2 at most
/// `max_h2_connections`. `seen.connections_opened` counts from the side's first request to this server.
[[nodiscard]] inline std::string protocol_mismatch(protocol p, wire_seen const& seen, int concurrency) {
  bool const h2 = p == protocol::tls_h2;
  auto const expected = h2 ? seen.http2_responses : seen.http1_responses;
  auto const unexpected = seen.other_responses + (h2 ? seen.http1_responses : seen.http2_responses);
  if (expected == 0 || unexpected != 0) {
    return std::to_string(seen.http1_responses) + " HTTP/1.1, " + std::to_string(seen.http2_responses) +
           " HTTP/2 and " + std::to_string(seen.other_responses) + " other responses";
  }
  auto const limit = h2 ? max_h2_connections : static_cast<std::uint64_t>(concurrency);
  if (seen.connections_opened > limit) {
    return std::to_string(seen.connections_opened) + " connections opened, more than " + std::to_string(limit);
  }
  return {};
}

} // namespace wandura::bench
