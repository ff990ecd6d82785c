// Internal: how an easy handle is set up for a request, and its callbacks (header, body, pre-request, sockets).
#pragma once

#include <chrono>
#include <string>
#include <system_error>

#include "transport/socket_set.hpp"
#include "transport/transfer.hpp"
#include "wandura/transport/transport_options.hpp"

namespace wandura::detail {

/// Whether the connection `t` is on (about to send, or sending) speaks HTTP/1.x for sure: its request cannot
/// multiplex (plain http:// without prior knowledge), or TLS agreed on no `h2` by ALPN (as OpenSSL tells). In doubt
/// (prior knowledge, another TLS backend) it is taken for HTTP/2. On the strand, while `t` is active.
[[nodiscard]] bool speaks_http1(transfer const& t) noexcept;

/// The transport-wide settings every easy handle gets, decided once at construction.
///
/// @par Thread safety
/// Immutable after construction; `configure` is called on the strand for transfers it owns.
class easy_setup {
public:
  /// @throws wandura::error (`errc::invalid_argument`) when `options.user_agent` holds a control byte other than
  ///         HTAB, or DEL (see `detail::find_forbidden_header_byte`).
  easy_setup(transport_options options, socket_set& sockets);

  /// Prepares `t`'s easy handle for `*t.request`: created and given the constant options on first use, then the
  /// attempt's timeouts (what is left until `t.deadline`), URL, method, body and header list. On failure returns the
  /// code
  /// (`invalid_argument` for a header that cannot be sent, `attempt_timeout`, `transport_failed`) and says why in
  /// `why`; nothing was sent.
  /// `now`: the steady clock as the caller read it just before (the transfer's deadline is counted from it when
  /// the request was not queued); unused when the transfer has no deadline.
  [[nodiscard]] std::error_code configure(transfer& t, std::chrono::steady_clock::time_point now,
                                          std::string& why) const;

  [[nodiscard]] transport_options const& options() const noexcept { return options_; }

private:
  [[nodiscard]] std::error_code configure_url(transfer& t, std::string& why) const;
  [[nodiscard]] std::error_code configure_method(transfer& t, std::string& why) const;
  void set_constant_options(transfer& t) const;

  transport_options options_;
  socket_set& sockets_;
  bool h2c_reuse_broken_ = false;        ///< libcurl < 8.0.0: see configure_url()
  bool no_proxy_in_environment_ = false; ///< see proxy_in_environment()
  std::string user_agent_line_;          ///< "User-Agent: " and `transport_options::user_agent`; empty for none
};

} // namespace wandura::detail
