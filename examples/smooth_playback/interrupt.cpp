#include "interrupt.hpp"

#include <signal.h>

#include <csignal>

namespace demo {
namespace {

volatile std::sig_atomic_t received = 0;

extern "C" void note_signal(int signal) {
  received = signal;
}

void catch_signal(int signal, bool unless_ignored) {
  struct sigaction before {};
  ::sigaction(signal, nullptr, &before);
  if (unless_ignored && before.sa_handler == SIG_IGN) {
    return;
  }
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking poll returns EINTR and the loop checks at once.
  action.sa_flags = static_cast<int>(SA_RESETHAND);
  ::sigaction(signal, &action, nullptr);
}

} // namespace

void catch_interrupts() {
  catch_signal(SIGINT, true);
  catch_signal(SIGTERM, false);
}

int interrupt_signal() noexcept {
  return received;
}

char const* interrupted::what() const noexcept {
  return signal_ == SIGINT ? "interrupted by SIGINT" : signal_ == SIGTERM ? "interrupted by SIGTERM" : "interrupted";
}

void throw_if_interrupted() {
  if (int const signal = interrupt_signal(); signal != 0) {
    throw interrupted(signal);
  }
}

} // namespace demo
