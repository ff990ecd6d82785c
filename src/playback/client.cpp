#include "wandura/playback/client.hpp"

#include <exception>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/error.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "client_impl.hpp"
#include "playback/call_progress.hpp"
#include "playback/observed_call.hpp"
#include "playback/response_parser.hpp"
#include "playback/viewer_limiter.hpp"
#include "resilience/checked_options.hpp"
#include "ticket_flow.hpp"
#include "wandura/detail/base_url.hpp"
#include "wandura/detail/header_value.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/transport/transport.hpp"

namespace wandura {

detail::response_parser& detail::thread_parser() {
  thread_local detail::response_parser parser;
  return parser;
}

namespace {

// Every refusal of the constructors' `@throws` but the transport's own, before anything is made or sent: the
// transport, once made, posts its shutdown to the context when it goes, which a client refused after making it would
// leave behind. Among them the options that would put a broken or injected header on the wire: an empty API key (it
// would go out as "Bearer "), and a key or user agent holding a control byte other than HTAB, or DEL
// (detail::find_forbidden_header_byte).
void check_options(client_options const& options) {
  if (options.api_key.empty()) {
    throw error(errc::invalid_argument, "client: api_key must not be empty; refused, nothing sent");
  }
  detail::check_header_value("Authorization", options.api_key);
  detail::check_header_value("User-Agent", options.transport.user_agent);
  (void)detail::checked_base_url(options.base_url);
  (void)detail::checked_retry_options(options.retry);
  if (options.viewer_tickets_per_minute == 0U) {
    throw error(errc::invalid_argument, "client: viewer_tickets_per_minute must be > 0");
  }
}

/// A ticket call cancelled before anything was sent ends as `errc::cancelled`. Out of `issue_tickets_impl`: a
/// `call_result` local (392 bytes) would be kept in its coroutine frame, over the 1,020 bytes Asio recycles.
[[noreturn]] void throw_cancelled(detail::ticket_call const& call) {
  call_result cancelled;
  cancelled.stopped = stop_reason::cancelled;
  cancelled.total_timeout = call.settings.total_timeout;
  throw to_error(cancelled, call.operation);
}

// Percent-encodes a path segment (RFC 3986 unreserved characters pass through).
void append_path_segment(std::string& out, std::string_view segment) {
  static constexpr char hex[] = "0123456789ABCDEF";
  for (char const c : segment) {
    auto const u = static_cast<unsigned char>(c);
    bool const unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
                            u == '.' || u == '_' || u == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4U]);
      out.push_back(hex[u & 0x0FU]);
    }
  }
}

std::shared_ptr<wandura::clock> client_clock(retry_options const& options) {
  return options.time_source ? options.time_source : std::make_shared<real_clock>();
}

// The given limit, else the local one at `viewer_tickets_per_minute` (checked: check_options), else none.
std::shared_ptr<viewer_limit> make_limit(client_options const& options, std::shared_ptr<wandura::clock> const& time) {
  if (options.viewer_limit) {
    return options.viewer_limit;
  }
  if (!options.viewer_tickets_per_minute) {
    return nullptr;
  }
  detail::viewer_limiter_options lo;
  lo.tickets_per_minute = static_cast<double>(*options.viewer_tickets_per_minute);
  lo.time_source = time;
  return std::make_shared<detail::viewer_limiter>(std::move(lo));
}

std::shared_ptr<ticket_store> default_store(std::shared_ptr<wandura::clock> const& time) {
  memory_ticket_store_options so;
  so.time_source = time;
  return std::make_shared<memory_ticket_store>(so);
}

} // namespace

client::impl::impl(std::shared_ptr<http_sender> s, client_options o)
    : options(std::move(o)), time(client_clock(options.retry)),
      http_metrics(std::make_shared<http_client_metrics>(options.retry.observer)), sender(std::move(s)),
      engine(*sender,
             [this] {
               retry_options r = options.retry;
               r.time_source = time;
               r.observer = http_metrics;
               r.report_call_end = false; // each call's end is reported once, by observed_call.hpp
               return r;
             }()),
      store(options.tickets ? options.tickets : default_store(time)), limit(make_limit(options, time)),
      calls(sender->get_executor()), base_url(detail::checked_base_url(options.base_url)),
      tickets_url(base_url + "/v1/playback/tickets"), authorization{"Authorization", "Bearer " + options.api_key} {}

asio::any_io_executor client::call_executor() const {
  bool own_strand = false;
  return impl_->calls.serialized(executor_, own_strand);
}

http_request client::impl::make_request(http_method method, std::string url, std::string body) const {
  http_request r;
  r.method = method;
  r.url = std::move(url);
  r.headers.reserve(4); // and the Idempotency-Key the engine adds to a POST
  r.headers.push_back(authorization);
  r.headers.push_back(accept);
  if (method == http_method::post) {
    r.headers.push_back(content_type);
  }
  r.body = std::move(body);
  return r;
}

client::client(asio::any_io_executor executor, client_options options) : executor_(std::move(executor)) {
  check_options(options);
  impl_ = std::make_shared<impl>(std::make_shared<transport>(executor_, options.transport), std::move(options));
}

client::client(std::shared_ptr<http_sender> sender, client_options options)
    : executor_(sender ? sender->get_executor() : asio::any_io_executor{}) {
  if (!sender) {
    throw error(errc::invalid_argument, "client: sender must not be null");
  }
  check_options(options);
  impl_ = std::make_shared<impl>(std::move(sender), std::move(options));
}

client::~client() {
  if (impl_) {
    impl_->calls.cancel_all();
  }
}

asio::awaitable<void> client::shutdown() {
  return shutdown_impl(impl_);
}

asio::awaitable<void> client::shutdown_impl(std::shared_ptr<impl> self) {
  self->calls.cancel_all();
  std::error_code ignored;
  co_await self->calls.async_wait_idle(asio::redirect_error(asio::use_awaitable, ignored));
}

retry_engine& client::engine() noexcept {
  return impl_->engine;
}

client_stats client::stats() const {
  client_stats s;
  s.engine = impl_->engine.stats();
  s.metrics = impl_->metrics.snapshot();
  // The engine counts the attempts it sends, the retries it makes (follow-ups included) and its budget refusals;
  // its admission gate the requests that queued behind a counter's limit. The client counts none of them, so
  // nothing is counted twice.
  s.metrics.attempts += s.engine.attempts;
  s.metrics.retries += s.engine.retries;
  s.metrics.budget_denied += s.engine.budget_denied;
  for (auto const& counter : impl_->engine.gate().stats()) {
    s.metrics.held_off += counter.waited;
  }
  s.metrics.hook_errors = s.engine.hook_errors;
  return s;
}

std::string client::metrics_text() const {
  return to_prometheus(stats().metrics) + impl_->engine.gate().metrics_text() + impl_->http_metrics->to_prometheus();
}

asio::awaitable<ticket_batch_result> client::issue_tickets(ticket_batch batch, call_options options) {
  return issue_tickets_impl(impl_, std::make_shared<detail::ticket_call>(std::move(batch)), std::move(options));
}

asio::awaitable<ticket_batch_result> client::issue_tickets_impl(std::shared_ptr<impl> self,
                                                                std::shared_ptr<detail::ticket_call> shared_call,
                                                                call_options options) {
  detail::observed_call observed(self->http_metrics.get(), shared_call->operation, *self->time);
  try {
    detail::ticket_call& call = *shared_call;
    detail::ticket_settlement settle(*self);
    detail::prepare(*self, call, options);
    // The deadline counts from the call's start, the ticket store's time included (its waits end at it too). The
    // store is awaited only when used: a call without reuse (the benchmark's) awaits nothing but its operation, and
    // reads the clock again only after an await (a real clock read costs tens to hundreds of ns on a VM).
    auto now = observed.started();
    call.settings = merge_options(options, self->engine.options(), now); // as engine.settings_for, at `now`
    if (call.reuses) {
      co_await detail::reuse_stored(*self, call);
      now = self->time->now();
    }
    detail::plan(*self, call, now);
    if (!call.pending.empty()) {
      auto const executor = co_await asio::this_coro::executor;
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
        // Cancelled while the store answered: nothing is sent. Checked here, with nothing awaited between this and
        // the wait below, so that a caller given an operation always waits for it (call_registry: until it does,
        // the others' leaving does not cancel it).
        throw_cancelled(call);
      }
      detail::sending sent = detail::send(self, shared_call, executor);
      if (sent.coalesced && call.settings.deadline > now) { // one whose deadline has passed leaves at once
        self->metrics.add_coalesced();
      }
      // The operation may have started here, at once, and a hook inside it (an attempt observer's) cancelled this
      // call: the wait is then cancelled as it begins, and awaited without Asio's throw (call_registry::async_wait).
      bool const cancelled_already =
          (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
      bool const throws = cancelled_already && co_await asio::this_coro::throw_if_cancelled();
      if (throws) {
        co_await asio::this_coro::throw_if_cancelled(false);
      }
      std::error_code waited;
      std::exception_ptr wait_failed; // the setting is the whole coroutine thread's: restored on every path
      try {
        auto op = sent.op; // named: GCC 12 and class temporaries in co_await expressions
        co_await self->calls.async_wait(std::move(op), self->time, call.settings.deadline,
                                        detail::call_registry::on_cancel::end_with_operation, cancelled_already,
                                        asio::redirect_error(asio::use_awaitable, waited));
      } catch (...) { // out of memory starting the wait
        wait_failed = std::current_exception();
      }
      if (throws) {
        co_await asio::this_coro::throw_if_cancelled(true);
      }
      if (wait_failed) {
        std::rethrow_exception(wait_failed);
      }
      detail::merge(call, sent, waited);
      if (detail::has_granted_to_store(call, sent)) {
        // A caller cancelled after its wait ended has its result: it stores what the store takes at once and
        // returns it, awaiting nothing (Asio would throw from a co_await in a cancelled frame, losing the tickets).
        if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
          detail::store_granted_at_once(*self, call);
        } else {
          co_await detail::store_granted(*self, call);
        }
      }
    } else {
      self->calls.throw_if_closed(); // answered without a request (the store, the viewer limit): still refused
    }
    detail::finish_items(*self, call);
    settle.succeeded();
    observed.succeeded();
    co_return std::move(call.result);
  } catch (...) {
    observed.fail(std::current_exception()); // the call's duration is observed on every exit, failures included
    throw;
  }
}

namespace {

/// The batch `start_episode` sends: episode N as `play`, N+1 and N+2 as `prefetch` where unlocked.
std::shared_ptr<detail::ticket_call> episode_call(viewer&& who, std::string const& film_ref, std::int32_t episode_no,
                                                  std::int32_t unlocked_through) {
  ticket_batch batch;
  batch.union_info = std::move(who.union_info);
  batch.drm_kek = std::move(who.drm_kek);
  if (!who.viewer_ref.empty()) {
    batch.viewer_ref = std::move(who.viewer_ref);
  }
  batch.episodes.push_back({film_ref, episode_no, intent::play});
  for (std::int32_t next = 1; next <= 2; ++next) {
    if (episode_no > std::numeric_limits<std::int32_t>::max() - next || episode_no + next > unlocked_through) {
      break;
    }
    batch.episodes.push_back({film_ref, episode_no + next, intent::prefetch});
  }
  auto call = std::make_shared<detail::ticket_call>(std::move(batch));
  call->operation = "start_episode";
  return call;
}

episode_start to_episode_start(ticket_batch_result&& result) {
  episode_start out;
  out.attempts = result.attempts;
  out.play = std::move(result.items.front());
  for (std::size_t i = 1; i < result.items.size(); ++i) {
    out.prefetch.push_back(std::move(result.items[i]));
  }
  return out;
}

} // namespace

asio::awaitable<episode_start> client::start_episode(viewer who, std::string film_ref, std::int32_t episode_no,
                                                     std::int32_t unlocked_through, call_options options) {
  // The batch is made here and the result read in plain functions: the coroutine's frame keeps only what lives
  // across its one wait, within the 1,020 bytes Asio recycles.
  return start_episode_impl(impl_, episode_call(std::move(who), film_ref, episode_no, unlocked_through),
                            std::move(options));
}

asio::awaitable<episode_start> client::start_episode_impl(std::shared_ptr<impl> self,
                                                          std::shared_ptr<detail::ticket_call> shared_call,
                                                          call_options options) {
  auto call = issue_tickets_impl(std::move(self), std::move(shared_call), std::move(options)); // named: GCC 12
  auto result = co_await std::move(call);
  co_return to_episode_start(std::move(result));
}

namespace {

/// Settles a typed read on every exit: counts a failure. (Its duration is observed by `observed_call`.)
class read_settlement {
public:
  explicit read_settlement(client::impl& self) noexcept : self_(self) { self_.metrics.add_call(); }
  read_settlement(read_settlement const&) = delete;
  read_settlement& operator=(read_settlement const&) = delete;
  ~read_settlement() {
    if (!succeeded_) {
      self_.metrics.add_call_failure();
    }
  }
  void succeeded() noexcept { succeeded_ = true; }

private:
  client::impl& self_;
  bool succeeded_ = false;
};

/// What a typed read asks for: `GET base_url + path [+ "/" + segment]` on `counter`.
struct read_target {
  std::string_view path;
  std::string_view counter;
  std::string_view operation;
  std::string_view segment_name; ///< Non-empty: a path segment follows, named so in the error for an empty one.
};

// Reads the 2xx of a typed GET with `parse` (a member of response_parser) into `value`; an unreadable body is
// reported to the engine, which retries it as it would a connection reset (a GET is safe to resend).
template <class T, class Parse> class typed_reader final : public response_reader {
public:
  /// @param read_url what the read GETs, kept for its error's target when its caller leaves early (`progress`).
  /// @param asked_ref the film or video asked for by a read of one (`get_film`, `get_video`); empty for the others.
  typed_reader(Parse parse, std::string read_url, std::string asked_ref)
      : url(std::move(read_url)), progress(http_method::get, this->url), parse_(parse),
        asked_ref_(std::move(asked_ref)) {}

  void on_progress(int attempts, int http_status) noexcept override { progress.note(attempts, http_status); }

  [[nodiscard]] follow_up after_success(call_result const& response) override {
    follow_up next;
    value = T{};
    if ((detail::thread_parser().*parse_)(response.response.body, value)) {
      next.unreadable = detail::thread_parser().message();
    } else if (auto other = answered_ref(); other && *other != asked_ref_) {
      // An answer about another resource (a misrouted or mixed-up response) is no answer to this read.
      next.unreadable = std::string(ref_name()) + ": the answer is for \"" + detail::printable(*other) +
                        "\", not the \"" + detail::printable(asked_ref_) + "\" asked for";
      value = T{};
    }
    return next;
  }

  T value{};
  std::string const url;
  detail::call_progress progress; ///< For the caller's error when it leaves before the call ends.

private:
  /// The ref the answer names, for a read of one film or video.
  [[nodiscard]] std::optional<std::string_view> answered_ref() const noexcept {
    if constexpr (std::is_same_v<T, film>) {
      return value.film_ref;
    } else if constexpr (std::is_same_v<T, video>) {
      return value.video_ref;
    } else {
      return std::nullopt;
    }
  }
  [[nodiscard]] static constexpr std::string_view ref_name() noexcept {
    return std::is_same_v<T, film> ? "film_ref" : "video_ref";
  }

  Parse parse_;
  std::string asked_ref_;
};

/// A typed read once its request is started (or an identical one joined): what its caller's wait needs.
template <class T, class Parse> struct typed_start {
  std::shared_ptr<typed_reader<T, Parse>> reader;
  std::shared_ptr<detail::call_registry::operation<T>> op;
  clock::time_point deadline{};
  decltype(call_settings::total_timeout) total{};
};

/// The part of a typed read before its wait, out of `get_typed`'s coroutine: every local here would be kept in its
/// frame, which then stays within the 1,020 bytes Asio recycles.
/// @throws wandura::error `invalid_argument` for a segment that cannot be sent; as `call_registry::join_or_start`.
template <class T, class Parse>
typed_start<T, Parse> start_typed(std::shared_ptr<client::impl> const& self, read_target const& target,
                                  std::string const& segment, call_options const& options, Parse parse,
                                  clock::time_point started, asio::any_io_executor const& executor) {
  if (!target.segment_name.empty() && (segment.empty() || segment == "." || segment == "..")) {
    // A dot segment would be taken out of the path (RFC 3986 §5.2.4) and ask for another resource.
    throw error(errc::invalid_argument, std::string(target.operation) + ": " + std::string(target.segment_name) +
                                            " must not be empty, \".\" or \"..\"");
  }
  std::string url = self->base_url + std::string(target.path);
  if (!target.segment_name.empty()) {
    url.push_back('/');
    auto const before = url.size();
    append_path_segment(url, segment);
    if (url.size() - before > client::max_path_segment_bytes) {
      throw error(errc::invalid_argument, std::string(target.operation) + ": " + std::string(target.segment_name) +
                                              " is " + std::to_string(url.size() - before) +
                                              " bytes percent-encoded; at most " +
                                              std::to_string(client::max_path_segment_bytes) + " are sent");
    }
  }
  call_settings settings = merge_options(options, self->engine.options(), started); // nothing awaited
  typed_start<T, Parse> out;
  out.deadline = settings.deadline;
  out.total = settings.total_timeout;
  // The reader lives as long as the operation's finish, which outlives the engine's call.
  out.reader = std::make_shared<typed_reader<T, Parse>>(parse, std::move(url), segment);
  auto* const reader = out.reader.get();
  auto make = [&] {
    http_request request = self->make_request(http_method::get, reader->url, {});
    request_traits traits{std::string(target.counter), false, std::chrono::milliseconds{0}, target.operation};
    return self->engine.call(std::move(request), std::move(traits), std::move(settings), reader);
  };
  auto finish = [self, keep = out.reader, operation = target.operation](call_result&& sent) {
    if (!sent.ok()) {
      throw to_error(sent, operation);
    }
    return std::move(keep->value);
  };
  out.op = self->calls.join_or_start<T>(std::nullopt, executor, out.deadline, make, finish).first;
  return out;
}

// A GET through the engine as an operation of the client, parsed with `parse` (a member of response_parser);
// throws `wandura::error`.
template <class T, class Parse>
asio::awaitable<T> get_typed(std::shared_ptr<client::impl> self, read_target target, std::string segment,
                             call_options options, Parse parse) {
  detail::observed_call observed(self->http_metrics.get(), target.operation, *self->time);
  try {
    read_settlement settle(*self); // first: a call refused for its arguments is a call that failed, as everywhere
    auto const executor = co_await asio::this_coro::executor;
    auto started = start_typed<T>(self, target, segment, options, parse, observed.started(), executor);
    // As for a ticket call: the operation's start, here, may have cancelled the call.
    asio::cancellation_state const state = co_await asio::this_coro::cancellation_state; // named: GCC 12, templates
    bool const cancelled_already = state.cancelled() != asio::cancellation_type::none;
    bool const throws = cancelled_already && co_await asio::this_coro::throw_if_cancelled();
    if (throws) {
      co_await asio::this_coro::throw_if_cancelled(false);
    }
    std::error_code waited;
    std::exception_ptr wait_failed; // as for a ticket call: the setting is restored on every path
    try {
      auto op = started.op;
      co_await self->calls.async_wait(std::move(op), self->time, started.deadline,
                                      detail::call_registry::on_cancel::end_with_operation, cancelled_already,
                                      asio::redirect_error(asio::use_awaitable, waited));
    } catch (...) {
      wait_failed = std::current_exception();
    }
    if (throws) {
      co_await asio::this_coro::throw_if_cancelled(true);
    }
    if (wait_failed) {
      std::rethrow_exception(wait_failed);
    }
    if (waited) { // the caller's own wait ended first: what the call had done by then
      throw started.reader->progress.left_early(
          target.operation,
          waited == asio::error::operation_aborted ? stop_reason::cancelled : stop_reason::deadline_exceeded,
          started.total);
    }
    T value = started.op->take();
    settle.succeeded();
    observed.succeeded();
    co_return value;
  } catch (...) {
    observed.fail(std::current_exception()); // the call's duration is observed on every exit, failures included
    throw;
  }
}

template <class T> using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, T&);

asio::awaitable<org_config> config_and_limits(std::shared_ptr<client::impl> self, call_options options) {
  org_config config =
      co_await get_typed<org_config>(self, {"/v1/config", "config", "get_config", {}}, {}, std::move(options),
                                     static_cast<parse_fn<org_config>>(&detail::response_parser::parse_org_config));
  // The admission gate paces a congested counter at its refill: the limits told here are the first it knows.
  for (auto const& limit : config.limits) {
    if (limit.per_minute > 0 && limit.per_minute <= std::numeric_limits<std::uint32_t>::max()) {
      self->engine.gate().set_limit(limit.counter, {static_cast<std::uint32_t>(limit.per_minute),
                                                    std::chrono::seconds(60), default_refill(limit.counter)});
    }
  }
  co_return config;
}

} // namespace

// Not a coroutine: the call takes its share of the client's internals here, when it is made, as every call does (a
// coroutine would read `impl_` only when first resumed, possibly after `~client()`).
asio::awaitable<org_config> client::get_config(call_options options) {
  return config_and_limits(impl_, std::move(options));
}

asio::awaitable<film> client::get_film(std::string film_ref, call_options options) {
  return get_typed<film>(impl_, {"/v1/catalog/films", "catalog", "get_film", "film_ref"}, std::move(film_ref),
                         std::move(options), static_cast<parse_fn<film>>(&detail::response_parser::parse_film));
}

asio::awaitable<std::vector<video>> client::list_videos(call_options options) {
  return get_typed<std::vector<video>>(
      impl_, {"/v1/videos", "videos", "list_videos", {}}, {}, std::move(options),
      static_cast<parse_fn<std::vector<video>>>(&detail::response_parser::parse_videos));
}

asio::awaitable<video> client::get_video(std::string video_ref, call_options options) {
  return get_typed<video>(impl_, {"/v1/videos", "video", "get_video", "video_ref"}, std::move(video_ref),
                          std::move(options), static_cast<parse_fn<video>>(&detail::response_parser::parse_video));
}

asio::awaitable<std::vector<creative>> client::list_creatives(call_options options) {
  return get_typed<std::vector<creative>>(
      impl_, {"/v1/creatives", "creatives", "list_creatives", {}}, {}, std::move(options),
      static_cast<parse_fn<std::vector<creative>>>(&detail::response_parser::parse_creatives));
}

} // namespace wandura
