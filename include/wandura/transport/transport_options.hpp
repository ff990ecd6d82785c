// Options of one `wandura::transport` (one libcurl multi handle and its connection pool).
//
// Thread safety: a plain value; it is copied into the transport at construction and never read again.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace wandura {

/// Client-wide transport settings. Per-attempt timeouts come from `attempt_options`; these are the limits and
/// security settings that belong to the connection pool. Defaults suit a high-throughput backend talking to one
/// API host: keep-alive on, HTTP/2 over TLS when the server offers it, certificates verified.
///
/// Proxies come from the environment as libcurl reads them (`http_proxy`, `https_proxy`/`HTTPS_PROXY`,
/// `all_proxy`/`ALL_PROXY`, `no_proxy`/`NO_PROXY`). Whether any of the first five is set is looked at once, when
/// the transport is created. If none is, the transport never uses a proxy: a variable set later is not seen. If
/// one is, libcurl reads the variables again for each request, so a later change (set, changed or unset) takes
/// effect at the next request. Through a proxy, an `https` request is tunnelled (CONNECT) and verified end to end;
/// a plain `http` one, its `Authorization` header included, is readable by the proxy.
struct transport_options {
  /// Largest response body accepted, in bytes. A larger body (by `Content-Length` or by bytes received) ends the
  /// attempt with `errc::response_too_large`. Default 1 MiB. Unlike the connection limits below, 0 is not "no
  /// limit": it accepts empty bodies only (for no practical limit, give `SIZE_MAX`).
  std::size_t max_response_bytes = std::size_t{1} << 20U;

  /// Most connections open to one host at a time (CURLMOPT_MAX_HOST_CONNECTIONS); further transfers wait inside
  /// libcurl for a free connection. 0 means no limit. HTTP/2 multiplexes many requests on one connection.
  long max_connections_per_host = 64;
  /// Most connections open at a time over all hosts (CURLMOPT_MAX_TOTAL_CONNECTIONS). 0 means no limit.
  long max_total_connections = 0;
  /// Idle keep-alive connections kept for reuse (CURLMOPT_MAXCONNECTS); the oldest beyond it are closed.
  /// 0: the larger of `max_total_connections`, `max_connections_per_host` and 64.
  long max_idle_connections = 0;
  /// Requests handed to libcurl at once. Requests beyond it wait in a FIFO queue inside the transport; their
  /// attempt timeout counts from the moment they were started, queue time included. 0 means no limit.
  std::size_t max_in_flight = 1024;
  /// Most HTTP/2 streams opened on one connection (CURLMOPT_MAX_CONCURRENT_STREAMS); the server's own limit
  /// still applies.
  long max_concurrent_streams = 100;

  /// Speak HTTP/2 without upgrade to `http://` URLs (h2c, "prior knowledge"). Only for servers known to support
  /// it. `https://` URLs always offer HTTP/2 by ALPN and fall back to HTTP/1.1.
  /// libcurl before 8.0.0 (Debian 12 ships 7.88) fails any request that reuses a prior-knowledge connection
  /// (curl#10634); with such a libcurl each of these requests opens, and closes, a connection of its own.
  bool http2_prior_knowledge = false;

  /// Path of a PEM file with the CA certificates to trust (CURLOPT_CAINFO). Empty: the system default bundle. A
  /// path that cannot be opened, is not a regular file or holds no PEM certificate is refused when the transport is
  /// made (`errc::invalid_argument`).
  std::string ca_bundle{};
  /// Verify the server certificate chain (CURLOPT_SSL_VERIFYPEER). Turning it off is for tests only.
  bool verify_peer = true;
  /// Verify that the certificate names the host of the URL (CURLOPT_SSL_VERIFYHOST). For tests only.
  bool verify_host = true;

  /// Connect timeout used when an attempt's `connect_timeout` is zero: DNS, TCP and TLS handshake. Milliseconds;
  /// zero or less is taken as the default, 3000.
  std::chrono::milliseconds default_connect_timeout{3000};
  /// `User-Agent` header sent with every request unless the request sets its own. Empty: none. Visible ASCII, SP,
  /// HTAB and bytes 0x80-0xFF only: any other control byte, or DEL, makes the transport's and the client's
  /// constructors throw `errc::invalid_argument`.
  std::string user_agent = "wandura-cpp/0.1";

  /// Send TCP keep-alive probes on idle connections (CURLOPT_TCP_KEEPALIVE).
  bool tcp_keepalive = true;
  /// Idle time before the first keep-alive probe, and the interval between probes (CURLOPT_TCP_KEEPIDLE and
  /// CURLOPT_TCP_KEEPINTVL). Seconds.
  std::chrono::seconds tcp_keepalive_idle{60};
  std::chrono::seconds tcp_keepalive_interval{30};
  /// How long resolved host names are reused (CURLOPT_DNS_CACHE_TIMEOUT). Seconds; negative: forever.
  std::chrono::seconds dns_cache_ttl{60};
  /// Close a pooled connection once it has been idle this long (CURLOPT_MAXAGE_CONN). Seconds. Keep it under the
  /// server's keep-alive timeout so that a request never races the server closing the connection.
  std::chrono::seconds max_idle_age{55};
  /// Ask for and decode compressed responses (`Accept-Encoding` with every encoding libcurl supports). The size
  /// cap applies to decoded bytes.
  bool accept_compressed = false;
};

} // namespace wandura
