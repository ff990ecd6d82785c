#include "wandura/playback/client.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <utility>

#include <asio/error.hpp>
#include <asio/this_coro.hpp>

#include "wandura/error.hpp"
#include "wandura/playback/detail/inflight_table.hpp"
#include "wandura/playback/detail/request_writer.hpp"
#include "wandura/playback/detail/response_parser.hpp"
#include "wandura/playback/viewer_limiter.hpp"
#include "wandura/resilience/call_result.hpp"
#include "wandura/transport/transport.hpp"

namespace wandura {
namespace {

constexpr std::string_view tickets_path = "/v1/playback/tickets";
constexpr std::string_view playback_counter = "playback";
/// Seed 000 checklist: "Request xin vé có timeout phía client ít nhất 5 giây".
constexpr std::chrono::milliseconds ticket_attempt_floor{5000};

// The parser keeps simdjson buffers for reuse. Each use runs to completion without suspending, so one per thread is
// safe even though coroutines move between threads.
detail::response_parser& thread_parser() {
  thread_local detail::response_parser parser;
  return parser;
}

// The items of a ticket batch response as read, before they are matched to the request and moved into the call's
// result. Used from the parse to the end of the matching, without suspending (as the parser), so one per thread; its
// items vector is kept, so that reading a batch does not allocate it every time.
ticket_batch_result& thread_parsed_batch() {
  thread_local ticket_batch_result parsed;
  return parsed;
}

/// Indexes into the episodes of one batch. A batch has at most `ticket_batch::max_episodes` (refused before anything
/// is sent otherwise), so they live in place instead of in a vector per call.
class item_indexes {
public:
  /// @pre size() < ticket_batch::max_episodes: issue_tickets validates the batch (write_ticket_batch) first.
  void push_back(std::size_t index) noexcept { items_[size_++] = index; }
  [[nodiscard]] bool contains(std::size_t index) const noexcept { return std::find(begin(), end(), index) != end(); }
  template <class Predicate> void erase_if(Predicate p) {
    size_ = static_cast<std::size_t>(std::remove_if(begin(), end(), p) - begin());
  }

  [[nodiscard]] std::size_t* begin() noexcept { return items_.data(); }
  [[nodiscard]] std::size_t* end() noexcept { return items_.data() + size_; }
  [[nodiscard]] std::size_t const* begin() const noexcept { return items_.data(); }
  [[nodiscard]] std::size_t const* end() const noexcept { return items_.data() + size_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t operator[](std::size_t i) const noexcept { return items_[i]; }

private:
  std::array<std::size_t, ticket_batch::max_episodes> items_{};
  std::size_t size_ = 0;
};

// The base URL without trailing slashes; refuses anything that is not http(s)://host[...] before any request.
std::string checked_base_url(std::string url) {
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  std::string_view const v(url);
  std::size_t const scheme_end = v.starts_with("https://") ? 8 : v.starts_with("http://") ? 7 : 0;
  bool const has_host = scheme_end != 0 && v.size() > scheme_end && v[scheme_end] != '/' && v[scheme_end] != ':';
  bool const clean = v.find_first_of(" \t\r\n") == std::string_view::npos;
  if (!has_host || !clean) {
    throw error(errc::invalid_argument,
                "client: base_url must be an http:// or https:// URL with a host, got \"" + url + "\"");
  }
  return url;
}

// A 2xx whose body is not the documented JSON: says so, with the status and the parser's words.
error invalid_body(std::string_view operation, call_result const& sent, std::string_view what) {
  return error(
      errc::invalid_response,
      std::string(operation) + ": invalid response body (HTTP " + std::to_string(sent.response.status) +
          "): " + std::string(what),
      error_info{sent.response.status, {}, {}, std::string(sent.response.request_id().value_or("")), sent.attempts});
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

bool is_retryable_item(item_outcome o) noexcept {
  return o == item_outcome::rate_limited || o == item_outcome::unavailable;
}

bool is_fresh_grant(ticket_item_result const& item) noexcept {
  return item.outcome == item_outcome::granted && !item.reused;
}

ticket_key key_for(ticket_batch const& batch, episode_request const& e) {
  return ticket_key{batch.viewer_ref.value_or(std::string{}), batch.union_info, e.film_ref, e.episode_no, e.intent};
}

[[noreturn]] void throw_cancelled(std::string_view operation) {
  throw error(asio::error::operation_aborted, std::string(operation) + ": cancelled");
}

} // namespace

struct client::impl {
  impl(std::shared_ptr<http_sender> s, client_options o)
      : options(std::move(o)), sender(std::move(s)), engine(*sender, options.retry),
        store(options.tickets ? options.tickets : std::make_shared<memory_ticket_store>()),
        base_url(checked_base_url(options.base_url)), tickets_url(base_url + std::string(tickets_path)),
        authorization("Bearer " + options.api_key) {
    if (options.viewer_tickets_per_minute) {
      if (*options.viewer_tickets_per_minute == 0) {
        throw error(errc::invalid_argument, "client: viewer_tickets_per_minute must be > 0");
      }
      viewer_limiter_options lo;
      lo.tickets_per_minute = static_cast<double>(*options.viewer_tickets_per_minute);
      limiter.emplace(lo);
    }
  }

  [[nodiscard]] http_request make_request(http_method method, std::string url, std::string body) const {
    http_request r;
    r.method = method;
    r.url = std::move(url);
    r.headers.reserve(4); // and the Idempotency-Key the engine adds to a POST
    r.headers.push_back({"Authorization", authorization});
    r.headers.push_back({"Accept", "application/json"});
    if (method == http_method::post) {
      r.headers.push_back({"Content-Type", "application/json"});
    }
    r.body = std::move(body);
    return r;
  }

  [[nodiscard]] bool counter_held(std::string_view counter) {
    auto const held = engine.holdoffs().held_until(counter);
    return held != clock::time_point::min() && held > engine.get_clock().now();
  }

  /// Whether a ticket batch request with these settings may join an identical one in flight: a caller-chosen key
  /// means "this exact logical call", never merged with another.
  [[nodiscard]] bool may_coalesce(call_settings const& settings) const noexcept {
    return options.coalesce && !settings.idempotency_key;
  }

  /// One request of a ticket batch through the retry engine, joining an identical one in flight.
  asio::awaitable<detail::joined_result<call_result>> send_coalesced(std::string body, call_settings const& settings) {
    std::string key = body;
    // The operation is detached from this caller (inflight_table), so it owns copies of what it uses.
    auto start = [eng = &engine, request = make_request(http_method::post, tickets_url, std::move(body)), settings]() {
      return eng->call(request, ticket_traits(), settings);
    };
    auto joined = co_await inflight.run_or_join(std::move(key), std::move(start));
    co_return joined;
  }

  [[nodiscard]] static request_traits ticket_traits() {
    return request_traits{std::string(playback_counter), true, ticket_attempt_floor};
  }

  client_options options;
  std::shared_ptr<http_sender> sender;
  retry_engine engine;
  std::shared_ptr<ticket_store> store;
  std::optional<viewer_limiter> limiter;
  playback_metrics metrics;
  detail::inflight_table<std::string, call_result> inflight;
  std::string base_url;
  std::string tickets_url;
  std::string authorization;
};

client::client(asio::any_io_executor executor, client_options options)
    : executor_(std::move(executor)),
      impl_(std::make_unique<impl>(std::make_shared<transport>(executor_, options.transport), std::move(options))) {}

client::client(std::shared_ptr<http_sender> sender, client_options options)
    : executor_(sender ? sender->get_executor() : asio::any_io_executor{}) {
  if (!sender) {
    throw error(errc::invalid_argument, "client: sender must not be null");
  }
  impl_ = std::make_unique<impl>(std::move(sender), std::move(options));
}

client::~client() = default;

retry_engine& client::engine() noexcept {
  return impl_->engine;
}

client_stats client::stats() const {
  client_stats s;
  s.engine = impl_->engine.stats();
  s.metrics = impl_->metrics.snapshot();
  // The engine counts the attempts it sends, the retries it makes, its budget refusals and hold-off waits; the
  // client counts only those of its per-item retry rounds, so nothing is counted twice.
  s.metrics.attempts += s.engine.attempts;
  s.metrics.retries += s.engine.retries;
  s.metrics.budget_denied += s.engine.budget_denied;
  s.metrics.held_off += s.engine.holdoff_waits;
  return s;
}

std::string client::metrics_text() const {
  return to_prometheus(stats().metrics);
}

asio::awaitable<ticket_batch_result> client::issue_tickets(ticket_batch batch, call_options options) {
  impl& self = *impl_;
  auto const started = std::chrono::steady_clock::now();
  self.metrics.add_request();

  // Validate the whole batch before anything is sent or any allowance taken.
  std::string body;
  std::string message;
  if (auto ec = detail::write_ticket_batch(batch, body, &message)) {
    self.metrics.add_call_failure();
    throw error(ec, "issue_tickets: " + message);
  }

  call_settings settings = self.engine.settings_for(options);
  bool const has_viewer = batch.viewer_ref.has_value() && !batch.viewer_ref->empty();

  // Each item names its episode once the call is done (see the end); until then an empty film_ref marks an item
  // that no response has filled, so that the server's items are not preceded by copies of the same names.
  ticket_batch_result result;
  result.items.resize(batch.episodes.size());
  item_indexes pending;
  for (std::size_t i = 0; i < batch.episodes.size(); ++i) {
    auto const& e = batch.episodes[i];
    auto& item = result.items[i];
    item.outcome = item_outcome::deferred;
    if (self.options.reuse_tickets && has_viewer) {
      if (auto t = self.store->find(key_for(batch, e))) {
        item.outcome = item_outcome::granted;
        item.status = 200;
        item.reused = true;
        item.ticket = std::move(*t);
        self.metrics.add_cache_hit();
        continue;
      }
    }
    pending.push_back(i);
  }

  // While the playback counter is held off after a 429, prefetches are not sent at all (seed 001: retrying early
  // only earns more 429s); plays wait for the hold-off inside the engine.
  if (self.counter_held(playback_counter)) {
    pending.erase_if([&](std::size_t i) { return batch.episodes[i].intent == intent::prefetch; });
  }

  // Per-viewer limit (seed 001, trust boundary): plays first, one ticket each, before anything is sent. Without a
  // viewer_ref the device stands for the viewer.
  std::string_view const who = has_viewer ? std::string_view(*batch.viewer_ref) : std::string_view(batch.union_info);
  item_indexes acquired;
  if (self.limiter && !pending.empty()) {
    std::stable_partition(pending.begin(), pending.end(),
                          [&](std::size_t i) { return batch.episodes[i].intent == intent::play; });
    item_indexes allowed;
    for (std::size_t const i : pending) {
      auto decision = self.limiter->try_acquire(who, 1);
      if (decision.allowed) {
        allowed.push_back(i);
        acquired.push_back(i);
      } else {
        auto& item = result.items[i];
        item.outcome = item_outcome::viewer_limited;
        item.retry_after = std::chrono::ceil<std::chrono::seconds>(decision.retry_after);
      }
    }
    std::sort(allowed.begin(), allowed.end());
    pending = allowed;
  }

  // A call that fails as a whole gives back all the allowance it took: nothing was granted to the viewer.
  auto fail_call = [&] {
    self.metrics.add_call_failure();
    if (self.limiter && !acquired.empty()) {
      self.limiter->release(who, static_cast<std::uint32_t>(acquired.size()));
    }
  };

  retry_policy const& policy = settings.policy;
  int item_round = 0;
  int retries_done = 0; // by the engine and by per-item rounds together: at most policy.max_retries in the call
  while (!pending.empty()) {
    if (pending.size() != batch.episodes.size() || item_round > 0) {
      // Only some items go (the rest came from the store, were limited or deferred, or succeeded already).
      ticket_batch sub;
      sub.union_info = batch.union_info;
      sub.drm_kek = batch.drm_kek;
      sub.viewer_ref = batch.viewer_ref;
      sub.episodes.reserve(pending.size());
      for (std::size_t const i : pending) {
        sub.episodes.push_back(batch.episodes[i]);
      }
      (void)detail::write_ticket_batch(sub, body); // validated above as part of the whole batch
    }

    // A request of prefetches only (the play came from the store, or was refused) is not retried unless asked:
    // a refused prefetch is reported and asked for again as play when the viewer gets there (seed 000).
    bool const any_play = std::any_of(pending.begin(), pending.end(),
                                      [&](std::size_t i) { return batch.episodes[i].intent == intent::play; });
    call_settings const* request_settings = &settings;
    call_settings prefetch_only;
    if (!any_play && !self.options.retry_prefetch) {
      prefetch_only = settings;
      prefetch_only.policy.max_retries = 0;
      request_settings = &prefetch_only;
    }
    detail::joined_result<call_result> joined;
    if (self.may_coalesce(*request_settings)) {
      joined = co_await self.send_coalesced(std::move(body), *request_settings);
    } else {
      // Awaited here rather than in a helper coroutine: one coroutine frame fewer per call.
      http_request request = self.make_request(http_method::post, self.tickets_url, std::move(body));
      request_traits traits = impl::ticket_traits();
      joined.value = co_await self.engine.call(std::move(request), std::move(traits), *request_settings);
    }
    body.clear(); // moved into the request; a next round writes its own (item_round > 0 below)
    call_result& sent = joined.value;
    if (joined.coalesced) {
      self.metrics.add_coalesced();
    }
    result.attempts += joined.coalesced ? 0 : sent.attempts;
    retries_done += sent.retries;

    if (sent.stopped == stop_reason::cancelled) {
      fail_call();
      throw_cancelled("issue_tickets");
    }
    // Per-item outcomes are read from any response that carries them, a final 429 or 503 included; a response
    // without them (401, 400, a proxy's HTML) or no response at all fails the whole call.
    // From here to the end of the matching nothing suspends: the per-thread result may be used (and is left with its
    // strings moved out).
    ticket_batch_result& parsed = thread_parsed_batch();
    parsed.items.clear();
    bool have_items = false;
    if (sent.has_response() && sent.response.status != 401) {
      auto ec = thread_parser().parse_ticket_batch(sent.response.body, parsed);
      if (!ec && !parsed.items.empty()) {
        have_items = true;
      } else if (sent.ok()) {
        fail_call();
        throw invalid_body("issue_tickets", sent, ec ? thread_parser().message() : std::string("no items"));
      }
    }
    if (!have_items && sent.attempts == 0 && sent.error == errc::rate_limited) {
      // The counter's 429 hold-off outlasts the deadline: nothing was sent. Like a refused item, it is an outcome
      // with the time left, not a failure of the call.
      auto const held = self.engine.holdoffs().held_until(playback_counter) - self.engine.get_clock().now();
      for (std::size_t const i : pending) {
        auto& item = result.items[i];
        item.outcome = item_outcome::rate_limited;
        item.status = 0;
        item.error_code = "rate_limited";
        item.reason = "held_off";
        item.retry_after = std::chrono::ceil<std::chrono::seconds>(std::max(held, clock::duration::zero()));
      }
      self.metrics.add_held_off();
      break;
    }
    if (!have_items) {
      fail_call();
      throw to_error(sent, "issue_tickets");
    }

    result.http_status = sent.response.status;
    result.replayed = result.replayed || sent.replayed;
    if (result.request_id.empty() || item_round == 0) {
      result.request_id = std::move(parsed.request_id);
    }

    // Match the server's items to ours by film, episode and intent (the server keeps the order; trust, but check).
    item_indexes used; // indexes into parsed.items, one per item of `pending` at most
    item_indexes retry_next;
    std::optional<std::chrono::milliseconds> longest_retry_after;
    int retry_status = 0;
    std::string retry_code;
    for (std::size_t p = 0; p < pending.size(); ++p) {
      std::size_t const i = pending[p];
      auto const& want = batch.episodes[i];
      std::size_t match = parsed.items.size();
      if (p < parsed.items.size() && !used.contains(p) && parsed.items[p].film_ref == want.film_ref &&
          parsed.items[p].episode_no == want.episode_no && parsed.items[p].intent == want.intent) {
        match = p;
      } else {
        for (std::size_t k = 0; k < parsed.items.size(); ++k) {
          if (!used.contains(k) && parsed.items[k].film_ref == want.film_ref &&
              parsed.items[k].episode_no == want.episode_no && parsed.items[k].intent == want.intent) {
            match = k;
            break;
          }
        }
      }
      auto& item = result.items[i];
      if (match == parsed.items.size()) {
        item.outcome = item_outcome::failed;
        item.status = sent.response.status;
        item.error = make_error_code(errc::invalid_response);
        item.error_code = "missing_item";
        continue;
      }
      used.push_back(match);
      item = std::move(parsed.items[match]);
      if (joined.coalesced && item.outcome == item_outcome::granted) {
        // Another call of this client asked for (and counted) this very ticket.
        item.reused = true;
      }
      if (is_fresh_grant(item) && has_viewer && self.options.reuse_tickets && item.ticket) {
        self.store->insert(key_for(batch, want), *item.ticket);
      }
      bool const needed = want.intent == intent::play || self.options.retry_prefetch;
      if (needed && is_retryable_item(item.outcome)) {
        retry_next.push_back(i);
        auto const ra = item.retry_after ? std::chrono::duration_cast<std::chrono::milliseconds>(*item.retry_after)
                                         : std::chrono::milliseconds{0};
        if (!longest_retry_after || ra > *longest_retry_after) {
          longest_retry_after = ra;
          retry_status = item.status;
          retry_code = item.error_code;
        }
      }
    }
    // Only after a 2xx: a final 429 or 503 means the engine already stopped retrying (exhausted, budget, deadline).
    if (retry_next.empty() || !sent.ok()) {
      break;
    }
    // Retry the needed items alone, in a new request with its own key, within the same deadline, budget and
    // number of retries.
    ++item_round;
    int const retry = retries_done + 1;
    if (retry > policy.max_retries) {
      break;
    }
    std::optional<std::chrono::milliseconds> item_retry_after;
    if (longest_retry_after && longest_retry_after->count() > 0) {
      item_retry_after = longest_retry_after;
    }
    backoff_delay const wait = self.engine.next_delay(policy, retry, item_retry_after);
    auto const wait_d = std::chrono::duration_cast<clock::duration>(wait.delay);
    if (!self.engine.fits_deadline(settings, wait_d)) {
      break;
    }
    auto& clk = self.engine.get_clock();
    if (!self.engine.budget().try_retry(clk.now())) {
      self.metrics.add_budget_denied();
      break;
    }
    retry_event event;
    event.retry = retry;
    event.max_retries = policy.max_retries;
    event.delay = std::chrono::round<std::chrono::milliseconds>(wait.delay);
    event.source = wait.source;
    event.http_status = retry_status;
    event.error_code = retry_code;
    event.budget_left = self.engine.budget().snapshot(clk.now()).left;
    event.counter = playback_counter;
    self.engine.notify_retry(event);
    self.metrics.add_retry();
    auto slept = co_await self.engine.sleep_until(clk.now() + wait_d);
    if (slept) {
      fail_call();
      throw_cancelled("issue_tickets");
    }
    pending = retry_next;
    retries_done = retry;
    settings.retries_done = retries_done;
    settings.count_request = false;   // one logical call, counted once in the budget
    settings.idempotency_key.reset(); // each per-item request gets its own automatic key
  }

  // Allowance taken for tickets that were not freshly granted goes back (refused, shed, reused, never sent).
  if (self.limiter) {
    auto const unused = std::count_if(acquired.begin(), acquired.end(),
                                      [&](std::size_t i) { return !is_fresh_grant(result.items[i]); });
    if (unused > 0) {
      self.limiter->release(who, static_cast<std::uint32_t>(unused));
    }
  }
  for (std::size_t i = 0; i < result.items.size(); ++i) {
    auto& item = result.items[i];
    if (item.film_ref.empty()) { // not filled by a response: the episode as asked (a server's item matched on it)
      auto const& e = batch.episodes[i];
      item.film_ref = e.film_ref;
      item.episode_no = e.episode_no;
      item.intent = e.intent;
    }
    self.metrics.add_outcome(item.outcome);
  }
  self.metrics.observe_latency(std::chrono::steady_clock::now() - started);
  co_return result;
}

asio::awaitable<episode_start> client::start_episode(viewer who, std::string film_ref, std::int32_t episode_no,
                                                     std::int32_t unlocked_through, call_options options) {
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
  auto result = co_await issue_tickets(std::move(batch), std::move(options));
  episode_start out;
  out.requests = result.attempts;
  out.play = std::move(result.items.front());
  for (std::size_t i = 1; i < result.items.size(); ++i) {
    out.prefetch.push_back(std::move(result.items[i]));
  }
  co_return out;
}

namespace {

// A GET through the engine, parsed with `parse` (a member of response_parser); throws `wandura::error`.
template <class T, class Parse>
asio::awaitable<T> get_typed(retry_engine& engine, playback_metrics& metrics, http_request request,
                             std::string_view counter, call_options const& options, Parse parse,
                             std::string_view operation) {
  auto const started = std::chrono::steady_clock::now();
  metrics.add_request();
  call_settings settings = engine.settings_for(options);
  request_traits traits{std::string(counter), false, std::chrono::milliseconds{0}};
  call_result sent = co_await engine.call(std::move(request), std::move(traits), std::move(settings));
  if (!sent.ok()) {
    metrics.add_call_failure();
    throw to_error(sent, operation);
  }
  T value{};
  if (auto ec = (thread_parser().*parse)(sent.response.body, value)) {
    metrics.add_call_failure();
    throw invalid_body(operation, sent, thread_parser().message());
  }
  metrics.observe_latency(std::chrono::steady_clock::now() - started);
  co_return value;
}

} // namespace

asio::awaitable<org_config> client::get_config(call_options options) {
  auto request = impl_->make_request(http_method::get, impl_->base_url + "/v1/config", {});
  using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, org_config&);
  org_config value =
      co_await get_typed<org_config>(impl_->engine, impl_->metrics, std::move(request), "config", options,
                                     static_cast<parse_fn>(&detail::response_parser::parse_org_config), "get_config");
  co_return value;
}

asio::awaitable<film> client::get_film(std::string film_ref, call_options options) {
  if (film_ref.empty()) {
    throw error(errc::invalid_argument, "get_film: film_ref must not be empty");
  }
  std::string url = impl_->base_url + "/v1/catalog/films/";
  append_path_segment(url, film_ref);
  auto request = impl_->make_request(http_method::get, std::move(url), {});
  using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, film&);
  film value = co_await get_typed<film>(impl_->engine, impl_->metrics, std::move(request), "catalog", options,
                                        static_cast<parse_fn>(&detail::response_parser::parse_film), "get_film");
  co_return value;
}

asio::awaitable<std::vector<video>> client::list_videos(call_options options) {
  auto request = impl_->make_request(http_method::get, impl_->base_url + "/v1/videos", {});
  using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, std::vector<video>&);
  auto value = co_await get_typed<std::vector<video>>(
      impl_->engine, impl_->metrics, std::move(request), "videos", options,
      static_cast<parse_fn>(&detail::response_parser::parse_videos), "list_videos");
  co_return value;
}

asio::awaitable<video> client::get_video(std::string video_ref, call_options options) {
  if (video_ref.empty()) {
    throw error(errc::invalid_argument, "get_video: video_ref must not be empty");
  }
  std::string url = impl_->base_url + "/v1/videos/";
  append_path_segment(url, video_ref);
  auto request = impl_->make_request(http_method::get, std::move(url), {});
  using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, video&);
  video value = co_await get_typed<video>(impl_->engine, impl_->metrics, std::move(request), "video", options,
                                          static_cast<parse_fn>(&detail::response_parser::parse_video), "get_video");
  co_return value;
}

asio::awaitable<std::vector<creative>> client::list_creatives(call_options options) {
  auto request = impl_->make_request(http_method::get, impl_->base_url + "/v1/creatives", {});
  using parse_fn = std::error_code (detail::response_parser::*)(response_body const&, std::vector<creative>&);
  auto value = co_await get_typed<std::vector<creative>>(
      impl_->engine, impl_->metrics, std::move(request), "creatives", options,
      static_cast<parse_fn>(&detail::response_parser::parse_creatives), "list_creatives");
  co_return value;
}

} // namespace wandura
