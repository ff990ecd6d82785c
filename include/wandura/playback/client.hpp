// wandura::client: the typed Wandura playback API over one transport and one retry engine (docs/protocol.md §1 and §3).
//
//     asio::io_context io;
//     wandura::client api(io.get_executor(), {.base_url = "https://api.wandura.example", .api_key = key});
//     wandura::viewer v{wandura::make_viewer_ref(secret, user_id, install_id), device_id, device_key};
//     auto start = co_await api.start_episode(v, "the-heiress-returns", 4, /*unlocked_through=*/12);
//     if (start.play.outcome == wandura::item_outcome::granted) play(*start.play.ticket);
//
// What a call does on the wire: `issue_tickets` and `start_episode` send `POST /v1/playback/tickets` (counter
// `playback`) with an `Idempotency-Key`; the typed reads send `GET` to their own counter. Every request carries
// `Authorization: Bearer <api_key>`.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>

#include "wandura/detail/async_call.hpp"
#include "wandura/playback/catalog.hpp"
#include "wandura/playback/error_info_token.hpp"
#include "wandura/playback/metrics.hpp"
#include "wandura/playback/ticket.hpp"
#include "wandura/playback/ticket_result.hpp"
#include "wandura/playback/ticket_store.hpp"
#include "wandura/playback/viewer_limit.hpp"
#include "wandura/resilience/call_options.hpp"
#include "wandura/resilience/retry_engine.hpp"
#include "wandura/transport/http_sender.hpp"
#include "wandura/transport/transport_options.hpp"

namespace wandura {

namespace detail {
struct ticket_call;
} // namespace detail

/// Options of one client. Per-call `call_options` override the retry settings here (docs/adr/0003).
struct client_options {
  /// Where the API lives, e.g. "https://api.wandura.example" or the emulator's "http://127.0.0.1:8787". A trailing
  /// slash is ignored. Anything but an `http://` or `https://` URL with a host is refused by the constructor
  /// (`errc::invalid_argument`).
  std::string base_url = "http://127.0.0.1:8787";
  /// The organisation's API key, sent as `Authorization: Bearer <api_key>`.
  std::string api_key;
  /// Connection pool, TLS and size limits of the owned transport (ignored when the client is given a sender).
  transport_options transport{};
  /// Retry policy, budget, hooks, logger, clock and random source shared by every call of the client. The default
  /// policy is docs/protocol.md §3 INTERACTIVE: a viewer is waiting.
  retry_options retry{};
  /// Where reusable tickets are kept; null means an in-memory LRU (`memory_ticket_store`, 10,000 entries or 64 MiB). A
  /// fleet of processes shares one through Redis (`wandura::fleet::configure`). Looked up once per call (every
  /// episode of the batch at once) and written once per ticket the server granted (fresh, or reused by the server
  /// because the store lacked it: a restarted process, a shared store that lost its keys), only when
  /// `reuse_tickets` is on and the batch has a `viewer_ref`.
  std::shared_ptr<ticket_store> tickets{};
  /// Whether tickets are reused from `tickets` at all (docs/protocol.md §3). Needs `viewer_ref`. Off, a call never
  /// touches the store.
  bool reuse_tickets = true;
  /// Whether a concurrent identical ticket request joins the one in flight instead of sending another.
  bool coalesce = true;
  /// Per-viewer limit in tickets per minute, enforced before anything is sent (docs/protocol.md §2, trust boundary:
  /// whoever controls your ticket endpoint can spend your organisation's limit). nullopt: no limit. 0 is refused
  /// by the constructor (`errc::invalid_argument`). Counted per `viewer_ref`, or without one per device, as
  /// `device:<union_info>` (the name a `viewer_limit` is given: a device id equal to a viewer's `viewer_ref` spends
  /// its own allowance, not the viewer's).
  std::optional<std::uint32_t> viewer_tickets_per_minute{};
  /// The per-viewer limit itself. Null (the default): when `viewer_tickets_per_minute` is set, the client builds a
  /// process-local token bucket per viewer at that rate (refilled continuously, a minute's allowance at once from
  /// idle, 100,000 viewers tracked). Set, it is used whatever `viewer_tickets_per_minute` says: a fleet of
  /// processes plugs one limit shared through Redis (`wandura::fleet::configure` sets it from
  /// `viewer_tickets_per_minute`). One ticket per episode about to be sent is taken, plays first; when the request
  /// ends, what the server certainly did not issue is given back (never sent, or answered without a fresh ticket),
  /// while a ticket its request may have got unseen (cancelled in flight, no answer) stays taken (viewer_limit.hpp).
  /// The allowance is the request's: a call that joins an identical request in flight (`coalesce`) takes none and
  /// gets the request's answer, refusals included.
  std::shared_ptr<wandura::viewer_limit> viewer_limit{};
  /// Whether refused prefetch items are retried like play items. Default false: a refused prefetch is reported
  /// (`shed`, `rate_limited`, `unavailable`) and asked for again with `play` when the viewer gets there
  /// (docs/protocol.md §3).
  bool retry_prefetch = false;
};

/// The viewer and device a ticket is for. Tickets are bound to `union_info` and never reused across devices.
struct viewer {
  /// Stable, non-personal viewer id: `make_viewer_ref(secret, user_id, install_id)`. May be empty: then neither the
  /// server nor the client reuses tickets.
  std::string viewer_ref;
  /// The device id from the player SDK. Required.
  std::string union_info;
  /// The device public key from the player SDK. Required.
  std::string drm_kek;
};

/// What `start_episode` produced: the play ticket and the prefetches, each with its own outcome.
struct episode_start {
  /// Episode N as `play`. `outcome == item_outcome::granted` means the viewer can watch.
  ticket_item_result play;
  /// N+1 and N+2 as `prefetch`, those up to `unlocked_through` (0 to 2 items). Never affects `play`.
  std::vector<ticket_item_result> prefetch;
  /// HTTP attempts sent for this start, retries and per-item retries included; 0 when all came from the cache or
  /// when this start joined an identical one in flight.
  int attempts = 0;
};

/// Counters of one client since it was created.
struct client_stats {
  metrics_snapshot metrics;
  retry_engine_stats engine;
};

/// The Wandura playback API client.
///
/// @par Thread safety
/// Every member function may be called from any thread and from many coroutines at once. Each call's own work (its
/// requests, waits and the hooks they run: `on_attempt_begin`, `on_attempt_end`, `on_retry`, the log; a shared
/// request's included) runs serialised: on the caller's executor when that
/// runs one handler at a time already (a strand, or an `io_context` made with concurrency hint 1,
/// `asio::io_context(1)`, which must then be run by one thread only), on a strand of it made for the call otherwise
/// (two allocations per call); for a caller on another `io_context` than the client's, the same on the client's
/// executor (only the call's own coroutine runs on the caller's: checking its arguments, the ticket store's answers
/// given at once and the WARN line of a store that threw, `attempt_observer::on_call_end`, and the completion), so
/// that the client's own cancellations (a last
/// waiter leaving a shared request,
/// `~client()`) never run at once with the work they cancel. A service that runs its `io_context` on one thread
/// saves that strand by making the context with concurrency hint 1.
/// @par Lifetime
/// Every call keeps the client's internals alive until it ends, so the client may be destroyed with calls in
/// flight: `~client()` cancels each of them (each completes with `asio::error::operation_aborted` as a
/// `wandura::error`) and returns without waiting; `shutdown()` does the same and completes once nothing of the
/// client runs any more. As for any Asio I/O object, destroy the client before its `io_context`, and let its work
/// end first: a call's handler having run does not mean that the client's own work has (a cancelled request still
/// unwinds inside the `io_context`), and completing `shutdown()`, or running the `io_context` until it runs out of
/// work, is what says so. A context destroyed with work of the client still pending destroys that work without
/// completing it, as Asio destroys its own pending operations: calls waiting to send, at the admission gate, for a
/// shared request or on the fleet's Redis commands are freed with their coroutines, and the client with them when
/// they owned it. Calls may come from coroutines of other io_contexts than the client's: their work runs on the
/// client's context, which must run for any call to make progress, and each caller's context must run for it to
/// get its completion (a call's deadline timer runs there). Another context destroyed with calls pending frees
/// those callers' waits unrun, as Asio frees its own pending operations; a request no caller waits for any more
/// is then cancelled, and the client and its other callers go on. A shared request (`coalesce`) runs on the
/// client's context whichever caller started it. A call from another context holds the client's internals (its
/// transport's I/O objects among them) until its completion has run there: destroy the client's own context last,
/// once the other contexts have run those completions or have been destroyed themselves (the client's context
/// destroyed then frees its requests still pending, and with them the client). As everywhere in Asio, a context
/// must not be destroyed while another thread may still post to it: a call's completion is posted to its caller's
/// context from the thread that runs the client's, so destroy a caller's context while calls of it are pending
/// only when the client's context is not running on another thread (stopped, or run by this thread).
/// @par Cancellation
/// Every operation supports terminal cancellation through the awaiting coroutine's cancellation slot (or the
/// completion token's, for the `async_` forms): it ends promptly with `asio::error::operation_aborted`, thrown as a
/// `wandura::error`, whether it is sending, waiting to retry, waiting for a 429 hold-off or waiting for an identical
/// request in flight: at once, or, for a request's only caller, as soon as the request it cancels has ended (a few
/// handlers of the client's context: nothing more is awaited but what the client plugs in honours cancellation).
/// Partial and total cancellation, when the awaiting coroutine lets them through
/// (`asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation())`), end it the same way: a call
/// cannot promise that nothing observable happened. A request that no caller waits for any more is cancelled too:
/// it sends nothing more (an attempt already on the wire is aborted). A cancellation that comes after the answer
/// (a 2xx read whole before the cancellation reaches the request: on a fast loopback right after the call starts,
/// or from an `attempt_observer` hook as the attempt ends) does not undo it: the call completes with its result, and
/// its tickets are stored as far as the ticket store takes them at once (`try_insert_many`). Nor does one that
/// comes while a ticket batch waits to retry some of its items: when a 2xx granted others before, the call completes
/// with those, the items still waiting failed with `operation_aborted`. For that, a
/// cancelled call that is its request's only caller ends with the request (which ends within a few handlers of the
/// client's context once cancelled, nothing more awaited); a caller on another `io_context` than the request runs on,
/// or one of several callers sharing a request, leaves at once (the others take the result).
class client {
public:
  /// A client with its own `wandura::transport` (one libcurl-multi loop) on `executor`. The executor's context may
  /// be run by several threads.
  /// @throws wandura::error `errc::invalid_argument`, nothing made (no transport) or sent, for a `base_url` that
  ///         `detail::checked_base_url` refuses (not http(s), no host, port outside 1-65535, a query, a fragment or
  ///         userinfo; the message never quotes userinfo), an empty `api_key`, an `api_key` or
  ///         `transport.user_agent` holding a control byte other than HTAB (0x00-0x08, 0x0A-0x1F: CR, LF and NUL
  ///         included) or DEL (0x7F), which RFC 9110 does not allow in a field value (the message names the header,
  ///         the byte (CR, LF and NUL by name, the others as `\xHH`) and its offset, never the key; HTAB and bytes
  ///         0x80-0xFF pass), a
  ///         `transport.ca_bundle` naming no readable file of PEM certificates (transport.hpp), a zero
  ///         `viewer_tickets_per_minute`, a `retry.admission` option outside its range (admission_gate.hpp), or
  ///         a `retry.policy` or `retry.budget` value the retry engine refuses (retry_engine.hpp).
  client(asio::any_io_executor executor, client_options options);
  /// A client over another sender (e.g. `wandura::testing::fake_transport`); shares its ownership.
  /// @throws wandura::error `errc::invalid_argument` for a null `sender`, or as the constructor above except for
  ///         `transport.ca_bundle`, which only a client's own transport reads.
  client(std::shared_ptr<http_sender> sender, client_options options);
  client(client const&) = delete;
  client& operator=(client const&) = delete;
  ~client();

  /// Issues the tickets of one batch: `POST /v1/playback/tickets` (docs/protocol.md §1), at most 3 episodes.
  ///
  /// Items answered from the ticket store or refused by the per-viewer limit are not sent. The rest go in one
  /// request; an identical request already in flight is joined instead (`coalesce`): the joiner still waits under
  /// its own deadline (`options.total_timeout`) and cancellation, and leaves alone (`errc::deadline_exceeded`,
  /// `operation_aborted`); the shared request runs under its first caller's options (a joiner's later deadline does
  /// not extend it: the joiner gets the request's ending as its own; a caller-chosen idempotency key never joins).
  /// The whole request is retried by
  /// the retry engine (429, 5xx, network errors; `Retry-After`; budget; deadline); after a 2xx, failed items that
  /// are needed (play, and prefetch when `retry_prefetch`) and retryable by the policy's rule applied to the item's
  /// own status and code (classify.hpp: 429, 500, 502, 503 except `not_ready`, ...) are retried alone, in a new
  /// request with a new idempotency key, after their own `retry_after` plus jitter, within the same deadline and
  /// budget: the retry engine makes that request as one of its retries (never with `auto_idempotency_keys` off, a
  /// caller key or not: the items stay as answered). Whole-request and per-item retries
  /// share the policy's `max_retries`: a call makes at most `max_retries + 1` attempts in all. Granted tickets are
  /// stored for reuse (those the server reused too: the store lacked them). The deadline counts from the call's start,
  /// the ticket store's work included: a lookup still running at it ends the call with `errc::deadline_exceeded`, and
  /// tickets the store is still writing then are left unstored (the call returns them).
  ///
  /// When every play of the batch was answered before sending (from the ticket store), what is left is prefetches,
  /// and their request's failure is theirs alone: it is not sent while the playback counter is congested (the
  /// prefetches come back `deferred`), and a failure of it as a whole gives each prefetch an outcome instead of
  /// failing the call: what the failure's status means for an item (`unavailable` for a 503), `deferred` when
  /// nothing was sent, else `failed` with the failure's code in `error`. Only cancellation still throws.
  ///
  /// @returns one `ticket_item_result` per episode, in the batch's order. A refused prefetch is `shed`, not an
  ///          error; one item's failure never affects another's. A final answer that carries items is read item by
  ///          item whatever stopped the retries: a whole-batch 429 or 503 whose `Retry-After` outlasts the deadline
  ///          gives each item its outcome and `retry_after`, at once, not `errc::deadline_exceeded`. A retry of some
  ///          items that ends without an answer for them (a status without items, network errors, the deadline or
  ///          the budget) gives those items that failure's outcome, as for prefetches above, and the others keep
  ///          theirs; only cancellation still throws. An item that cannot be read fails alone
  ///          (`unreadable_item_code`).
  /// @throws wandura::error for whole-call failures only (not when only prefetches were sent, nor after a retry of
  ///         some items, above):
  ///         `errc::invalid_argument` (nothing sent: no episode or more than 3, empty
  ///         `union_info`/`drm_kek`/`film_ref`, a `viewer_ref` set but empty, `episode_no < 1`, `intent::other`,
  ///         invalid UTF-8, one film's episode named twice with one intent, an `options.policy` that
  ///         `check_retry_policy` refuses),
  ///         `errc::invalid_idempotency_key` (90010), `errc::unauthorized` (401), `errc::deadline_exceeded` and
  ///         `errc::budget_exhausted` (the retries stopped for the deadline or the retry budget, and the last answer
  ///         carries no items: none arrived, or a status without them such as a proxy's 503; the message names that
  ///         answer), `errc::rate_limited` (nothing sent: the admission gate held the request back after a 429, or
  ///         behind the counter's pace, until past the deadline), `operation_aborted` (cancelled), a transport code
  ///         when no response ever arrived, `errc::invalid_response` when the last answer's body is not the
  ///         documented JSON (not JSON, or no `items` array: an item that cannot be read fails alone, see
  ///         `unreadable_item_code`) and retries ran out or may not be made (an unkeyed write), `errc::unavailable` for
  ///         a status without items that the policy retries when no retry is left (a proxy's 503 on every attempt),
  ///         `errc::http_error` for a final status without items (e.g. 400). Besides these, what a
  ///         `client_options::viewer_limit` of the caller's throws, as thrown (viewer_limit.hpp, "Errors"). What a
  ///         ticket store throws never fails a call (ticket_store.hpp, "Errors"); the call's own deadline or
  ///         cancellation while the store works does, as above.
  /// @par Retries and idempotency
  /// One automatic key per request (reused on every retry of that request), or `options.idempotency_key` for the
  /// first request; per-item retry requests always get fresh automatic keys, and none is made when
  /// `retry_options::auto_idempotency_keys` is off (the call then ends with the items as first answered). Attempt
  /// timeouts set by the options are never under 5 s (docs/protocol.md §3 checklist).
  [[nodiscard]] asio::awaitable<ticket_batch_result> issue_tickets(ticket_batch batch, call_options options = {});

  /// Starts episode N for a viewer (docs/protocol.md §3): one request with N as `play` plus N+1 and N+2 as
  /// `prefetch` when they are `<= unlocked_through`. Failures of N+1 or N+2 never affect N.
  ///
  /// @param who the viewer and device the tickets are for. @param film_ref the film's catalog reference.
  /// @param episode_no N, >= 1. @param unlocked_through the last episode the viewer may watch (0, or any value
  /// below N + 1: only N, which is asked for as `play` whatever this says; the server decides what a viewer may play).
  /// @param options per-call overrides of the client's retry settings.
  /// @throws as `issue_tickets`.
  [[nodiscard]] asio::awaitable<episode_start> start_episode(viewer who, std::string film_ref, std::int32_t episode_no,
                                                             std::int32_t unlocked_through, call_options options = {});

  /// The longest percent-encoded path segment `get_film` and `get_video` send, in bytes: a request line longer than
  /// about 8 KiB is refused by most servers (nginx's default buffer for it is 8 KiB).
  static constexpr std::size_t max_path_segment_bytes = 8000;

  /// `GET /v1/config` (counter `config`): the organisation's limits. @throws wandura::error as for any call.
  [[nodiscard]] asio::awaitable<org_config> get_config(call_options options = {});
  /// `GET /v1/catalog/films/{film_ref}` (counter `catalog`); `film_ref` goes into the path percent-encoded (RFC
  /// 3986 unreserved bytes as they are). @throws wandura::error, `errc::invalid_argument` (nothing sent) for an
  /// `options.policy` that `check_retry_policy` refuses, an empty `film_ref`, a dot segment (`.` or `..`, which would
  /// name another path) or one whose encoded form is over `max_path_segment_bytes` (8,000 bytes: servers refuse longer
  /// request lines), `errc::http_error` with status 404 for an unknown film, `errc::invalid_response` when the last
  /// attempt's 2xx could not be read or named another film (its `film_ref` is compared byte for byte with the one asked
  /// for; such an answer is retried as an unreadable one is, within the call's retry policy).
  [[nodiscard]] asio::awaitable<film> get_film(std::string film_ref, call_options options = {});
  /// `GET /v1/videos` (counter `videos`): the open videos.
  [[nodiscard]] asio::awaitable<std::vector<video>> list_videos(call_options options = {});
  /// `GET /v1/videos/{video_ref}` (counter `video`). @throws as `get_film`, for `video_ref`.
  [[nodiscard]] asio::awaitable<video> get_video(std::string video_ref, call_options options = {});
  /// `GET /v1/creatives` (counter `creatives`).
  [[nodiscard]] asio::awaitable<std::vector<creative>> list_creatives(call_options options = {});

  /// The executor type of the `async_` forms' default completion token.
  using executor_type = asio::any_io_executor;

  /// @name Completion-token forms
  /// Each awaitable call has an `async_` twin that takes any Asio completion token and completes the way Asio's own
  /// operations do: `void(std::error_code, T)`, where `T` is the awaitable form's result (default-constructed on
  /// failure). The codes are those the awaitable form throws (`errc`, `asio::error::operation_aborted`, transport
  /// codes; an exception that carries none, which only a `viewer_limit` or `http_sender` of the caller's can throw, is
  /// `std::errc::io_error`, and `std::bad_alloc` is `std::errc::not_enough_memory`), so `asio::redirect_error`,
  /// `asio::experimental::as_tuple`, `asio::use_future` and plain callbacks all work without exceptions. Wrap the token
  /// in `wandura::with_error_info(token, details)` to also receive the HTTP status, server code, request id and
  /// attempts of a failure (docs/adr/0009-completion-signatures.md).
  ///
  /// The call runs on `get_executor()` (on a strand of it made for the call, unless it is a strand or made with
  /// concurrency hint 1); the handler runs on its own associated executor (by default the call's).
  /// Every form has an overload without `call_options`. The token defaults to
  /// `asio::default_completion_token_t<executor_type>` as Asio's I/O objects do; with Asio 1.22 and
  /// `asio::any_io_executor` that default is not a usable token, so pass one.
  /// @par Cancellation
  /// Terminal, partial or total cancellation through the token's bound cancellation slot
  /// (`asio::bind_cancellation_slot`): the call completes with `asio::error::operation_aborted`, whichever type was
  /// emitted (as for the awaitable forms: a call cannot promise that nothing observable happened). Emit it where the
  /// handler runs (Asio's rule for a slot; on a context run by several threads, bind the handler to a strand and emit
  /// there): the client posts it on to where the call runs, and takes it out of the slot before the handler is called.
  /// The slot holds nothing of the call's context: a signal may outlive both.
  /// @par Thread safety
  /// As for the awaitable forms: any thread, many calls at once.
  /// @{

  /// `issue_tickets` for any completion token: `void(std::error_code, ticket_batch_result)`.
  /// @param batch the episodes, as for `issue_tickets`. @param options per-call overrides.
  /// @param token how to complete, e.g. `asio::use_future`.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_issue_tickets(ticket_batch batch, call_options options = {},
                           CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), issue_tickets(std::move(batch), std::move(options)),
                              std::forward<CompletionToken>(token));
  }
  /// `async_issue_tickets` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_issue_tickets(
      ticket_batch batch, CompletionToken&& token) {
    return async_issue_tickets(std::move(batch), call_options{}, std::forward<CompletionToken>(token));
  }

  /// `start_episode` for any completion token: `void(std::error_code, episode_start)`.
  /// @param who the viewer. @param film_ref the film. @param episode_no N, >= 1.
  /// @param unlocked_through the last episode the viewer may watch. @param options per-call overrides.
  /// @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_start_episode(viewer who, std::string film_ref, std::int32_t episode_no, std::int32_t unlocked_through,
                           call_options options = {},
                           CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(
        call_executor(),
        start_episode(std::move(who), std::move(film_ref), episode_no, unlocked_through, std::move(options)),
        std::forward<CompletionToken>(token));
  }
  /// `async_start_episode` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_start_episode(
      viewer who, std::string film_ref, std::int32_t episode_no, std::int32_t unlocked_through,
      CompletionToken&& token) {
    return async_start_episode(std::move(who), std::move(film_ref), episode_no, unlocked_through, call_options{},
                               std::forward<CompletionToken>(token));
  }

  /// `get_config` for any completion token: `void(std::error_code, org_config)`.
  /// @param options per-call overrides. @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_get_config(call_options options = {},
                        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), get_config(std::move(options)), std::forward<CompletionToken>(token));
  }
  /// `async_get_config` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_get_config(
      CompletionToken&& token) {
    return async_get_config(call_options{}, std::forward<CompletionToken>(token));
  }

  /// `get_film` for any completion token: `void(std::error_code, film)`.
  /// @param film_ref the film. @param options per-call overrides. @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_get_film(std::string film_ref, call_options options = {},
                      CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), get_film(std::move(film_ref), std::move(options)),
                              std::forward<CompletionToken>(token));
  }
  /// `async_get_film` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_get_film(std::string film_ref,
                                                                                             CompletionToken&& token) {
    return async_get_film(std::move(film_ref), call_options{}, std::forward<CompletionToken>(token));
  }

  /// `list_videos` for any completion token: `void(std::error_code, std::vector<video>)`.
  /// @param options per-call overrides. @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_list_videos(call_options options = {},
                         CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), list_videos(std::move(options)), std::forward<CompletionToken>(token));
  }
  /// `async_list_videos` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_list_videos(
      CompletionToken&& token) {
    return async_list_videos(call_options{}, std::forward<CompletionToken>(token));
  }

  /// `get_video` for any completion token: `void(std::error_code, video)`.
  /// @param video_ref the video. @param options per-call overrides. @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_get_video(std::string video_ref, call_options options = {},
                       CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), get_video(std::move(video_ref), std::move(options)),
                              std::forward<CompletionToken>(token));
  }
  /// `async_get_video` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_get_video(std::string video_ref,
                                                                                              CompletionToken&& token) {
    return async_get_video(std::move(video_ref), call_options{}, std::forward<CompletionToken>(token));
  }

  /// `list_creatives` for any completion token: `void(std::error_code, std::vector<creative>)`.
  /// @param options per-call overrides. @param token how to complete.
  template <typename CompletionToken = asio::default_completion_token_t<executor_type>>
  auto async_list_creatives(call_options options = {},
                            CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
    return detail::async_call(call_executor(), list_creatives(std::move(options)),
                              std::forward<CompletionToken>(token));
  }
  /// `async_list_creatives` with default `call_options`.
  template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, call_options>) auto async_list_creatives(
      CompletionToken&& token) {
    return async_list_creatives(call_options{}, std::forward<CompletionToken>(token));
  }
  /// @}

  /// Cancels every call in flight (each completes with `operation_aborted`), refuses new ones (they fail with
  /// `operation_aborted`) and completes once no request, retry wait or hold-off wait of the client runs any more.
  /// Never fails. May be awaited from any coroutine; the client must outlive the wait.
  [[nodiscard]] asio::awaitable<void> shutdown();

  /// Counters: calls, attempts, retries, budget denials, queued at the gate, outcomes by kind, cache hits, coalesced.
  /// How long calls take is in `metrics_text` (`wandura_call_duration_seconds`, by operation and outcome).
  [[nodiscard]] client_stats stats() const;
  /// The same counters in the Prometheus text exposition format (prefix `wandura_`), followed by the admission
  /// gate's families (`wandura_gate_*`, by counter) and the client's `http_client_metrics` families
  /// (`http_client_request_duration_seconds`, ...); docs/testing.md lists them all. Serve this text alone, not
  /// beside `http_client_metrics::to_prometheus()`, which would give those families twice in one scrape.
  [[nodiscard]] std::string metrics_text() const;
  /// The retry engine (budget, hold-offs) shared by every call of this client.
  [[nodiscard]] retry_engine& engine() noexcept;
  /// The executor calls run on when spawned through an `async_` form.
  [[nodiscard]] asio::any_io_executor get_executor() const noexcept { return executor_; }

  /// The client's internals, shared by every call in flight. Not public API: complete only inside the library.
  struct impl;

private:
  // The call's state (the batch included, shared with the operation that sends it) arrives on the heap: the
  // coroutine's frame then stays small enough for Asio to recycle.
  static asio::awaitable<ticket_batch_result> issue_tickets_impl(std::shared_ptr<impl> self,
                                                                 std::shared_ptr<detail::ticket_call> shared_call,
                                                                 call_options options);
  static asio::awaitable<episode_start> start_episode_impl(std::shared_ptr<impl> self,
                                                           std::shared_ptr<detail::ticket_call> shared_call,
                                                           call_options options);
  static asio::awaitable<void> shutdown_impl(std::shared_ptr<impl> self);
  /// Where an `async_` form runs its call: `executor_` when it runs one handler at a time, a strand of it made for
  /// the call otherwise (detail/async_call.hpp posts the caller's cancellation there).
  [[nodiscard]] asio::any_io_executor call_executor() const;

  asio::any_io_executor executor_;
  std::shared_ptr<impl> impl_; // shared with every call in flight
};

} // namespace wandura
