// Ctrl-C (SIGINT) and SIGTERM in the parent of a fleet run: the handler only notes the signal; the parent's loops
// check it and unwind through the normal cleanup path (workers killed and reaped, the private Redis stopped and its
// directory removed), and the demo exits with 128 + the signal's number (130, 143) as shells expect.
#pragma once

#include <exception>

namespace demo {

/// Installs the handlers for SIGINT and SIGTERM, each for one signal: a second Ctrl-C ends the process at once. A
/// SIGINT ignored when the demo started (a background job of a shell without job control, `nohup`) stays ignored.
/// Call from the main thread before starting other threads or processes.
void catch_interrupts();

/// The signal received since `catch_interrupts`, or 0. Async-signal-safe; from any thread.
[[nodiscard]] int interrupt_signal() noexcept;

/// Thrown by `throw_if_interrupted` to leave the run through its destructors.
class interrupted : public std::exception {
public:
  explicit interrupted(int signal) noexcept : signal_(signal) {}
  [[nodiscard]] int signal() const noexcept { return signal_; }
  /// `interrupted by SIGINT` or `interrupted by SIGTERM`.
  [[nodiscard]] char const* what() const noexcept override;

private:
  int signal_;
};

/// @throws interrupted when a signal was received.
void throw_if_interrupted();

} // namespace demo
