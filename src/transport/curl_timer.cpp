#include "transport/curl_timer.hpp"

namespace wandura::detail {

bool curl_timer::take_immediate() noexcept {
  if (!immediate_wanted_) {
    return false;
  }
  immediate_wanted_ = false;
  return true;
}

bool curl_timer::take_posted_immediate() noexcept {
  immediate_posted_ = false;
  return take_immediate();
}

void curl_timer::end_timeout_action() noexcept {
  // Nothing announced a deadline during the action and no immediate action is on its way: a wait still pending
  // from an earlier deadline would hold the io_context until it expired (the connect timeout after a burst of
  // HTTP/2 streams), unless the owner's deadline may need it (then the owner serves it after the action).
  if (!deadline_ && !immediate_wanted_ && owner_ == clock::time_point::max()) {
    disarm();
  }
}

void curl_timer::clear_owner_deadline() noexcept {
  owner_ = clock::time_point::max();
  if (!deadline_ && !immediate_wanted_) {
    disarm();
  }
}

void curl_timer::cancel() noexcept {
  deadline_.reset();
  owner_ = clock::time_point::max();
  disarm();
}

void curl_timer::disarm() noexcept {
  if (armed_) {
    armed_ = false;
    ++generation_;
    timer_.cancel();
  }
}

} // namespace wandura::detail
