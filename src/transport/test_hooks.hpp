// Internal: hooks that let the transport's tests run code *inside* libcurl callbacks (not public API).
//
// The traps "cancel from inside a header/write callback" and "no exception crosses a C callback" can only be
// tested from inside those callbacks; these hooks put the test there. A function pointer and a context, so the
// hot path pays one null check per header line and nothing else.
#pragma once

namespace wandura {
class transport;
}

namespace wandura::detail {

struct transport_test_hooks {
  /// Called inside libcurl's header callback, on the transport's strand, for every header line. May throw: the
  /// transport catches it and aborts that transfer (transport_failed).
  void (*on_header)(void* context) = nullptr;
  void* context = nullptr;
};

/// Installs `hooks` on `tr`. Call before the first request; not thread-safe against requests in flight.
void set_test_hooks(transport& tr, transport_test_hooks hooks) noexcept;

} // namespace wandura::detail
