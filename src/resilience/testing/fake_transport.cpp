#include "wandura/testing/fake_transport.hpp"

#include "wandura/error.hpp"

#include "saturating_time.hpp"

namespace wandura::testing {

fake_step fake_step::respond(int status, std::string_view body, std::vector<http_header> const& headers) {
  fake_step step;
  step.what = kind::respond;
  step.response.status = status;
  step.response.http_version = 11;
  for (auto const& h : headers) {
    step.response.headers.add(h.name, h.value);
  }
  step.response.body.assign(body);
  return step;
}

fake_step fake_step::fail(std::error_code error) {
  fake_step step;
  step.what = kind::fail;
  step.error = error;
  return step;
}

fake_step fake_step::stall() {
  fake_step step;
  step.what = kind::stall;
  return step;
}

std::string recorded_attempt::header(std::string_view name) const {
  for (auto const& h : request.headers) {
    if (iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

fake_transport::fake_transport(asio::any_io_executor executor, wandura::clock& time_source)
    : executor_(std::move(executor)), clock_(time_source), default_(fake_step::respond(200, "{}")) {}

void fake_transport::push(fake_step step) {
  std::lock_guard lock(mutex_);
  script_.push_back(std::move(step));
}

void fake_transport::set_default(fake_step step) {
  std::lock_guard lock(mutex_);
  default_ = std::move(step);
}

void fake_transport::fail_at(std::size_t attempt, std::error_code error) {
  std::lock_guard lock(mutex_);
  failures_[attempt] = error;
}

asio::awaitable<attempt_result> fake_transport::send_attempt(http_request const& request,
                                                             attempt_options const& options) {
  fake_step step;
  {
    std::lock_guard lock(mutex_);
    seen_.push_back({request, options});
    auto const failure = failures_.find(seen_.size());
    if (failure != failures_.end()) {
      step = fake_step::fail(failure->second);
      if (!script_.empty()) {
        script_.pop_front(); // the injected failure takes this attempt's place in the script
      }
    } else if (!script_.empty()) {
      step = std::move(script_.front());
      script_.pop_front();
    } else {
      step = default_;
    }
  }

  auto const start = clock_.now();
  auto sleep_until = [this](wandura::clock::time_point when) -> asio::awaitable<std::error_code> {
    try {
      co_return co_await clock_.sleep_until(when);
    } catch (std::system_error const& e) {
      co_return e.code(); // already cancelled before the wait began
    }
  };
  bool const limited = options.timeout.count() > 0;
  auto const timeout_at = detail::saturating_add(start, options.timeout); // ms::max(): at time_point::max()

  attempt_result result;
  if (step.what == fake_step::kind::stall) {
    auto ec = co_await sleep_until(limited ? timeout_at : wandura::clock::time_point::max());
    result.error = ec ? ec : std::error_code(errc::attempt_timeout);
    co_return result;
  }
  if (step.latency.count() > 0) {
    auto const ready_at = detail::saturating_add(start, step.latency);
    bool const times_out = limited && timeout_at <= ready_at;
    if (auto ec = co_await sleep_until(times_out ? timeout_at : ready_at)) {
      result.error = ec;
      co_return result;
    }
    if (times_out) {
      result.error = errc::attempt_timeout;
      co_return result;
    }
  }
  if (step.what == fake_step::kind::fail) {
    result.error = step.error;
  } else {
    result.response = std::move(step.response);
  }
  co_return result;
}

std::vector<recorded_attempt> fake_transport::attempts() const {
  std::lock_guard lock(mutex_);
  return seen_;
}

std::size_t fake_transport::attempt_count() const {
  std::lock_guard lock(mutex_);
  return seen_.size();
}

std::size_t fake_transport::steps_left() const {
  std::lock_guard lock(mutex_);
  return script_.size();
}

} // namespace wandura::testing
