// A completion token adapter that also hands back a failed call's details (HTTP status, server code, request id,
// attempts) to the `client::async_` forms, without any exception:
//
//     wandura::error_info details;
//     std::error_code ec;
//     auto pending = api.async_get_config(
//         wandura::with_error_info(asio::redirect_error(asio::use_awaitable, ec), details));
//     auto cfg = co_await std::move(pending); // named first: GCC 12 may destroy a co_await's temporaries twice
//     if (ec) log("config failed: HTTP {} request {}", details.http_status, details.request_id);
//
// The shape follows `asio::redirect_error(token, ec)`: the caller names an object the operation writes into before
// it completes, and the completion signature stays Asio's `void(std::error_code, T)` (docs/adr/0009).
//
// Thread safety: plain values; the named `error_info` is written once, on the completing thread, before the inner
// token's handler runs.
#pragma once

#include <type_traits>
#include <utility>

#include "wandura/error.hpp"

namespace wandura {

/// A completion token: `inner` completes the operation, and `*details` receives the error's details first.
/// Understood by the `wandura::client::async_` forms only (not a general Asio token adapter), so it must be the
/// outermost token: other adapters go inside it, `with_error_info(asio::bind_cancellation_slot(slot, token),
/// details)`, not around it.
template <typename CompletionToken> struct error_info_token {
  /// The token the operation completes with, e.g. `asio::use_future` or `asio::redirect_error(...)`.
  CompletionToken inner;
  /// Written before completion: the failure's details, or a default `error_info` on success. Not owned; must
  /// outlive the operation.
  error_info* details;
};

/// Wraps `token` so that the operation also writes its error's details into `details` (which must outlive it).
/// @param token any completion token the `client::async_` forms accept.
/// @param details receives the details; reset to `error_info{}` when the call succeeds.
template <typename CompletionToken>
[[nodiscard]] error_info_token<std::decay_t<CompletionToken>> with_error_info(CompletionToken&& token,
                                                                              error_info& details) {
  return {std::forward<CompletionToken>(token), &details};
}

namespace detail {
template <typename T> struct is_error_info_token : std::false_type {};
template <typename T> struct is_error_info_token<error_info_token<T>> : std::true_type {};
} // namespace detail

} // namespace wandura
