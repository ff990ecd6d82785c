#include "redis_connection.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "reply_size.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

/// The most of an AUTH or SELECT refusal kept for the commands that fail for it (Redis's are one short line).
constexpr std::size_t max_setup_refusal_bytes = 512;

redis_reply copy_reply(redisReply const& r) {
  redis_reply out;
  switch (r.type) {
  case REDIS_REPLY_STRING: out.type = redis_reply::kind::string; break;
  case REDIS_REPLY_STATUS: out.type = redis_reply::kind::status; break;
  case REDIS_REPLY_ERROR: out.type = redis_reply::kind::error; break;
  case REDIS_REPLY_INTEGER: out.type = redis_reply::kind::integer; break;
  case REDIS_REPLY_ARRAY: out.type = redis_reply::kind::array; break;
  default: out.type = redis_reply::kind::nil; break;
  }
  if (r.str != nullptr && r.len > 0) {
    out.text.assign(r.str, static_cast<std::size_t>(r.len));
  }
  out.integer = r.integer;
  if (r.type == REDIS_REPLY_ARRAY) {
    out.elements.reserve(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i) {
      out.elements.push_back(copy_reply(*r.element[i]));
    }
  }
  return out;
}

/// `args` as the RESP array of bulk strings Redis reads (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`), in `out` (its
/// capacity reused from command to command). Bulk strings carry their length: any bytes, CR/LF included, go as they
/// are. hiredis's own argv formatter cost about five times as many instructions (a printf-like pass and a fresh
/// buffer per command), for a command hiredis then copies into its output buffer either way.
void format_command(std::span<std::string_view const> args, std::string& out) {
  std::size_t size = 16;
  for (auto const arg : args) {
    size += arg.size() + 24;
  }
  out.clear();
  out.reserve(size);
  std::array<char, 24> number{};
  auto append_header = [&](char kind, std::size_t n) {
    out.push_back(kind);
    out.append(number.data(), std::to_chars(number.data(), number.data() + number.size(), n).ptr);
    out.append("\r\n");
  };
  append_header('*', args.size());
  for (auto const arg : args) {
    append_header('$', arg.size());
    out.append(arg);
    out.append("\r\n");
  }
}

/// Whether hiredis 0.14's async context would take `args` for a command of its subscribe or monitor modes
/// (`__redisAsyncCommand` in its async.c). It files the callback of such a command as one that runs again for every
/// message (SUBSCRIBE, PSUBSCRIBE, MONITOR) or not at all (UNSUBSCRIBE, PUNSUBSCRIBE), while `on_reply` owns its
/// command for exactly one call. Matched as hiredis matches, on the formatted command: one leading `p` or `P` of the
/// name is skipped, and the rest followed by CR LF is compared, ignoring case, with `subscribe\r\n` (only when an
/// argument follows the name), `unsubscribe\r\n` or `monitor\r\n`. So PMONITOR counts, and a name that goes on
/// after a CR LF of its own ("MONITOR\r\nx") too.
bool hiredis_mode_command(std::span<std::string_view const> args) noexcept {
  std::string_view name = args.front();
  if (!name.empty() && (name.front() == 'p' || name.front() == 'P')) {
    name.remove_prefix(1);
  }
  // The bytes hiredis compares: the start of the name, then the CR LF that ends it on the wire.
  std::array<char, 13> wire{};
  std::string_view const crlf = "\r\n";
  auto const from_name = std::min(name.size(), wire.size());
  auto const from_crlf = std::min(crlf.size(), wire.size() - from_name);
  std::copy_n(name.begin(), from_name, wire.begin());
  std::copy_n(crlf.begin(), from_crlf, wire.begin() + static_cast<std::ptrdiff_t>(from_name));
  std::string_view const head(wire.data(), from_name + from_crlf);
  auto const starts_with = [head](std::string_view word) { // `word` in lower case
    return head.size() >= word.size() && std::equal(word.begin(), word.end(), head.begin(), [](char w, char h) {
             return w == static_cast<char>(std::tolower(static_cast<unsigned char>(h)));
           });
  };
  return (args.size() > 1 && starts_with("subscribe\r\n")) || starts_with("unsubscribe\r\n") ||
         starts_with("monitor\r\n");
}

// hiredis 0.14 asserts, aborting the process, when a reply that is not an error arrives with no command waiting for
// it on a connection that is neither subscribed nor monitoring (redisProcessCallbacks): a server, proxy or anything
// on the port that sends one reply too many would end every process of the fleet. The reader's object functions see
// each reply begin: a top-level one with no callback queued is refused there (the reader then fails as out of
// memory, hiredis drops the connection, and the connection reports a protocol error). An unexpected error reply is
// left to hiredis, which drops the connection with the server's text. An array that declares more elements than
// `max_reply_bytes` could carry is refused there the same way, before hiredis allocates for it (`declared_elements`).
bool unexpected_reply(redisReadTask const* task) noexcept {
  if (task->parent != nullptr || task->type == REDIS_REPLY_ERROR) {
    return false;
  }
  auto* ac = static_cast<redisAsyncContext*>(task->privdata);
  if (ac == nullptr || ac->replies.head != nullptr || (ac->c.flags & (REDIS_SUBSCRIBED | REDIS_MONITORING)) != 0) {
    return false;
  }
  static_cast<redis_connection*>(ac->data)->refuse_unexpected_reply();
  return true;
}

bool array_refused(redisReadTask const* task, int elements) noexcept {
  auto* ac = static_cast<redisAsyncContext*>(task->privdata);
  return ac != nullptr && !static_cast<redis_connection*>(ac->data)->admit_array(*task, elements);
}

void* create_string(redisReadTask const* task, char* text, std::size_t size) {
  return unexpected_reply(task) ? nullptr : hiredis_reply_functions().createString(task, text, size);
}
void* create_array(redisReadTask const* task, int elements) {
  return unexpected_reply(task) || array_refused(task, elements)
             ? nullptr
             : hiredis_reply_functions().createArray(task, elements);
}
void* create_integer(redisReadTask const* task, long long value) { // NOLINT(google-runtime-int): hiredis's type
  return unexpected_reply(task) ? nullptr : hiredis_reply_functions().createInteger(task, value);
}
void* create_nil(redisReadTask const* task) {
  return unexpected_reply(task) ? nullptr : hiredis_reply_functions().createNil(task);
}
void free_object(void* reply) {
  hiredis_reply_functions().freeObject(reply);
}

redisReplyObjectFunctions guarded_reply_functions{&create_string, &create_array, &create_integer, &create_nil,
                                                  &free_object};

/// Puts the guard above in `ac`'s reader.
void guard_replies(redisAsyncContext* ac) {
  (void)hiredis_reply_functions(); // looked up once, before the reader can need it
  ac->c.reader->fn = &guarded_reply_functions;
  ac->c.reader->privdata = ac;
}

// Owns the shared op while hiredis holds it as privdata; hiredis calls every callback exactly once (with a null
// reply when the context goes away first).
using op_holder = std::shared_ptr<redis_command_op>;

/// A compensating command: nobody waits for its reply, which is dropped as a late one.
class dropped_reply_op final : public redis_command_op {
public:
  dropped_reply_op() { done = true; }
  void deliver(std::error_code, redis_reply) override {}
  void discard() noexcept override {}
};

/// Frees what `op` holds for a reply nobody will read: its compensation's captures (they may own what owns the
/// connection) and its handler.
void drop(redis_command_op& op) noexcept {
  op.compensate = nullptr;
  if (!op.done) {
    op.done = true;
    op.slot.clear();
    op.slot = {}; // its signal may go with the handler
    op.discard();
  }
}

/// `options`, refused when a bound would switch the shared state off while looking like an outage: every command
/// timed out at once, or every reply too large (the WARN line would blame a healthy Redis).
redis_options checked(redis_options options) {
  auto refuse = [](char const* why) { throw error(errc::invalid_argument, std::string("redis options: ") + why); };
  if (options.command_timeout.count() <= 0) {
    refuse("command_timeout must be > 0");
  }
  if (options.connect_timeout.count() <= 0) {
    refuse("connect_timeout must be > 0");
  }
  if (options.max_pending == 0) {
    refuse("max_pending must be > 0");
  }
  if (options.max_reply_bytes == 0 || options.max_reply_elements == 0) {
    refuse("max_reply_bytes and max_reply_elements must be > 0");
  }
  return options;
}

} // namespace

redis_connection::redis_connection(asio::any_io_executor ex, redis_options options)
    : executor_(std::move(ex)), options_(checked(std::move(options))), url_(redis_url::parse(options_.url)),
      connect_timer_(executor_), deadline_timer_(executor_), backoff_(options_),
      declared_elements_(options_.max_reply_bytes, options_.max_reply_elements) {}

redis_connection::~redis_connection() {
  // Open here only when the release handed to the executor never ran (`release_redis_connection`): it was destroyed
  // at the shutdown of the execution context, when no thread runs it, or could not be allocated.
  if (ac_ != nullptr) {
    down_reason_ = asio::error::operation_aborted;
    redisAsyncFree(ac_); // pending callbacks run now with a null reply; cleanup clears ac_
  }
}

void redis_connection::finish(redis_command_op& op, std::error_code ec, redis_reply reply) {
  if (op.done) {
    return;
  }
  op.done = true;
  op.slot.clear();
  op.slot = {}; // its signal may go with the handler
  op.deliver(ec, std::move(reply));
}

void redis_connection::abandon(asio::execution_context& context) noexcept {
  if (&context_of(executor_) != &context) {
    return;
  }
  // Every command not answered yet is in one of the two queues (hiredis's own list holds them too, and drops them
  // when the context is freed: they are done by then). Moved out first: freeing a handler destroys its
  // coroutine's frames, which may own what owns this connection (the caller holds it meanwhile).
  try {
    std::array<std::deque<std::shared_ptr<redis_command_op>>, 2> queues{std::move(deadlines_),
                                                                        std::move(awaiting_ready_)};
    // Commands that timed out or were cancelled are in neither queue, only in hiredis's: their compensations can
    // no longer run either. Collected before anything is freed (freeing may close the context).
    for (redisCallback const* cb = ac_ != nullptr ? ac_->replies.head : nullptr; cb != nullptr; cb = cb->next) {
      if (cb->fn == &on_reply) {
        queues[0].push_back(*static_cast<op_holder const*>(cb->privdata));
      }
    }
    for (auto const& queue : queues) {
      for (auto const& op : queue) {
        drop(*op);
      }
    }
  } catch (...) { // out of memory moving the queues: left as they are (they may leak at teardown)
  }
}

redis_client_stats redis_connection::stats() const noexcept {
  return stats_;
}

void redis_connection::start(std::span<std::string_view const> args, std::shared_ptr<redis_command_op> const& op) {
  auto refuse = [&](std::error_code ec) { // not sent: nothing to compensate
    retire(op->compensate);
    finish(*op, ec, failure_reply(ec));
  };
  if (closed_) {
    refuse(closed_reason_); // not counted: no command is made any more
    return;
  }
  if (released_.load(std::memory_order_acquire)) {
    refuse(asio::error::operation_aborted); // the client is gone; its close is on its way to this executor
    return;
  }
  if (args.empty() || hiredis_mode_command(args)) {
    refuse(errc::invalid_argument); // no command to send (hiredis would abort on one), or one hiredis keeps to itself
    return;
  }
  ++stats_.commands;
  std::error_code ec;
  if (!ensure_context(ec)) {
    refuse(ec);
    return;
  }
  if (stats_.pending >= options_.max_pending) {
    refuse(fleet_errc::overloaded);
    return;
  }
  auto holder = std::make_unique<op_holder>(op);
  format_command(args, command_buffer_);
  if (redisAsyncFormattedCommand(ac_, &on_reply, holder.get(), command_buffer_.data(), command_buffer_.size()) !=
      REDIS_OK) {
    refuse(errc::connection_reset); // the context is disconnecting
    return;
  }
  (void)holder.release(); // hiredis owns it now; on_reply deletes it
  ++stats_.pending;
  watch_cancellation(op);
  if (ready_ || charge_connecting_) {
    arm_timeout(op); // on a reconnect, the wait for it counts: redis_options::command_timeout
  } else {
    awaiting_ready_.push_back(op); // the client's first connection is not charged to the command: see on_ready
  }
}

void redis_connection::close() {
  shut(asio::error::shut_down);
}

void redis_connection::abort() {
  shut(asio::error::operation_aborted);
}

void redis_connection::shut(std::error_code why) {
  if (closed_) {
    return;
  }
  closed_ = true;
  closed_reason_ = why;
  if (ac_ != nullptr) {
    down_reason_ = why;
    redisAsyncFree(ac_); // pending callbacks run now with a null reply (`why`); on_context_gone clears ac_
  }
  connect_timer_.cancel();
  deadline_timer_.cancel();
  deadline_timer_armed_ = false;
  deadlines_.clear(); // every command in it completed just now
  awaiting_ready_.clear();
}

void redis_connection::on_ready() {
  ready_ = true;
  // Established only now: a connection whose AUTH or SELECT is refused (or unanswered) is a failed connect, and
  // the reconnect waits go on doubling. Reset at TCP connect, a wrong password was retried every first wait.
  ++stats_.connects;
  backoff_.reset();
  for (auto& op : awaiting_ready_) {
    if (!op->done) {
      arm_timeout(op);
    }
  }
  awaiting_ready_.clear();
}

void redis_connection::arm_timeout(std::shared_ptr<redis_command_op> const& op) {
  // Deadlines stay in initiation order: the commands that waited for the connection are armed before any
  // command initiated after it became ready.
  op->deadline = saturating_add(std::chrono::steady_clock::now(), options_.command_timeout);
  deadlines_.push_back(op);
  if (!deadline_timer_armed_) {
    arm_deadline_timer(op->deadline);
  }
}

void redis_connection::watch_cancellation(std::shared_ptr<redis_command_op> const& op) {
  if (op->slot.is_connected()) {
    op->slot.assign([weak = std::weak_ptr(op), ex = executor_](asio::cancellation_type) {
      // Posted: finishing clears the slot, which must not happen inside the slot's own handler.
      asio::post(ex, [weak] {
        if (auto o = weak.lock()) {
          finish(*o, asio::error::operation_aborted);
        }
      });
    });
  }
}

void redis_connection::arm_deadline_timer(std::chrono::steady_clock::time_point at) {
  deadline_timer_armed_ = true;
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait([self = weak_from_this()](std::error_code ec) {
    if (auto conn = self.lock(); conn && !ec) {
      conn->deadline_timer_armed_ = false;
      conn->expire_overdue();
    }
  });
}

bool redis_connection::reply_started(redis_command_op const& op) const noexcept {
  // Replies come in command order: the reader holds a part of `op`'s only when `op` is the first command hiredis
  // waits for (AUTH and SELECT, ahead of it, are answered by then).
  redisCallback const* const next = ac_ != nullptr ? ac_->replies.head : nullptr;
  if (next == nullptr || next->fn != &on_reply || static_cast<op_holder const*>(next->privdata)->get() != &op) {
    return false;
  }
  // hiredis 0.14's reader between replies: nothing unread, and the first task of a reply (index 0, type -1) not begun.
  // Otherwise bytes of a line or a bulk string wait unread, a reply's type byte was read, or an array is under way.
  redisReader const& reader = *ac_->c.reader;
  return reader.len > reader.pos || reader.ridx > 0 || (reader.ridx == 0 && reader.rstack[0].type >= 0);
}

void redis_connection::expire_overdue() {
  auto const now = std::chrono::steady_clock::now();
  while (!deadlines_.empty() && (deadlines_.front()->done || deadlines_.front()->deadline <= now)) {
    auto op = std::move(deadlines_.front());
    deadlines_.pop_front();
    if (!op->done) {
      ++stats_.timeouts;
      finish(*op, reply_started(*op) ? errc::response_timeout : errc::attempt_timeout);
    }
  }
  if (!deadlines_.empty()) {
    arm_deadline_timer(deadlines_.front()->deadline);
  }
}

bool redis_connection::ensure_context(std::error_code& ec) {
  if (ac_ != nullptr) {
    return true;
  }
  if (std::chrono::steady_clock::now() < next_connect_at_) {
    ec = last_connect_failure_; // within the backoff after a failed connect: what made it fail
    return false;
  }
  return open_context(ec);
}

bool redis_connection::open_context(std::error_code& ec) {
  redisAsyncContext* ac = redisAsyncConnect(url_.host.c_str(), url_.port);
  if (ac == nullptr || ac->err != 0) {
    if (ac != nullptr) {
      redisAsyncFree(ac);
    }
    note_connect_failure(errc::connect_failed);
    ec = errc::connect_failed;
    return false;
  }
  ac_ = ac;
  ac->data = this;
  charge_connecting_ = opened_before_;
  opened_before_ = true;
  guard_replies(ac);
  connected_ = false;
  ready_ = false;
  setup_pending_ = 0;
  down_reason_.clear();
  adapter_ = hiredis_asio_adapter::attach(
      ac, executor_, [this] { on_context_gone(); }, [this] { bound_unfinished_reply(); });
  redisAsyncSetConnectCallback(ac, &on_connect);
  expire_after(connect_timer_, options_.connect_timeout);
  connect_timer_.async_wait([self = weak_from_this()](std::error_code wait_ec) {
    auto conn = self.lock();
    if (wait_ec || !conn || conn->ac_ == nullptr || conn->ready_) {
      return; // connected and set up in time (or gone already)
    }
    conn->down_reason_ = errc::connect_failed;
    redisAsyncFree(conn->ac_);
  });
  send_setup();
  return true;
}

void redis_connection::send_setup() {
  // A named user is logged in as, with whatever password the URL gives (a nopass user takes an empty one): without
  // AUTH the commands would run as the default user.
  if (!url_.password.empty() || !url_.user.empty()) {
    std::array<char const*, 3> argv{"AUTH", url_.user.c_str(), url_.password.c_str()};
    std::array<std::size_t, 3> lens{4, url_.user.size(), url_.password.size()};
    if (url_.user.empty()) {
      argv = {"AUTH", url_.password.c_str(), nullptr};
      lens = {4, url_.password.size(), 0};
    }
    int const argc = url_.user.empty() ? 2 : 3;
    if (redisAsyncCommandArgv(ac_, &on_setup_reply, this, argc, argv.data(), lens.data()) == REDIS_OK) {
      ++setup_pending_;
    }
  }
  if (url_.db != 0) {
    std::string const db = std::to_string(url_.db);
    std::array<char const*, 2> argv{"SELECT", db.c_str()};
    std::array<std::size_t, 2> lens{6, db.size()};
    if (redisAsyncCommandArgv(ac_, &on_setup_reply, this, 2, argv.data(), lens.data()) == REDIS_OK) {
      ++setup_pending_;
    }
  }
}

void redis_connection::note_connect_failure(std::error_code why) {
  ++stats_.connect_failures;
  last_connect_failure_ = why;
  next_connect_at_ = saturating_add(std::chrono::steady_clock::now(), backoff_.next());
}

redis_reply redis_connection::failure_reply(std::error_code ec) const noexcept {
  redis_reply reply;
  if (ec == fleet_errc::auth_failed && !setup_refusal_.empty()) {
    try {
      reply.text = setup_refusal_;
      reply.type = redis_reply::kind::error;
    } catch (...) { // out of memory: the code alone says what happened
      reply = redis_reply{};
    }
  }
  return reply;
}

void redis_connection::on_context_gone() {
  ac_ = nullptr;
  connect_timer_.cancel();
  awaiting_ready_.clear(); // hiredis completed every one of them (null reply) before this cleanup
  ready_ = false;
  if (closed_) {
    connected_ = false;
    return; // closed on purpose: neither a lost connection nor a failed connect
  }
  // A connection that never became ready (AUTH/SELECT refused or unanswered in time) failed to connect.
  if (connected_ && down_reason_ != fleet_errc::auth_failed && down_reason_ != errc::connect_failed) {
    ++stats_.disconnects;
  } else {
    note_connect_failure(down_reason_ == fleet_errc::auth_failed ? std::error_code(fleet_errc::auth_failed)
                                                                 : std::error_code(errc::connect_failed));
  }
  connected_ = false;
}

bool redis_connection::admit_array(redisReadTask const& task, int count) noexcept {
  if (declared_elements_.admit(task, count)) {
    return true;
  }
  down_reason_ = errc::protocol_error; // the reader fails now, and hiredis drops the connection
  return false;
}

void redis_connection::bound_unfinished_reply() {
  // A timed-out command keeps the connection for its late reply: only while that reply stays within the bound.
  if (ac_ != nullptr && reply_too_large(*ac_->c.reader, options_.max_reply_bytes)) {
    down_reason_ = errc::protocol_error;
    redisAsyncFree(ac_); // outside hiredis's callbacks: every command on it completes now; on_context_gone follows
  }
}

std::error_code redis_connection::failure_code(redisAsyncContext const* ac) const noexcept {
  if (down_reason_ == errc::connect_failed && connected_) {
    // Written behind an AUTH or SELECT unanswered within the connect timeout: Redis runs it if it reads them later.
    // Not "not sent" (`connect_failed`): the connection closed before the reply, as any broken connection does.
    return errc::connection_reset;
  }
  if (down_reason_) {
    return down_reason_;
  }
  switch (ac->err) {
  case REDIS_ERR_PROTOCOL: return errc::protocol_error;
  case REDIS_ERR_IO: return (ac->c.flags & REDIS_CONNECTED) != 0 ? errc::connection_reset : errc::connect_failed;
  default: return errc::connection_reset; // REDIS_ERR_EOF and anything else that ends a connection
  }
}

void redis_connection::on_connect(redisAsyncContext const* ac, int status) {
  auto* conn = static_cast<redis_connection*>(ac->data);
  if (status != REDIS_OK) {
    return; // hiredis frees the context next; on_context_gone counts the failure
  }
  conn->connected_ = true;
  if (conn->setup_pending_ == 0) {
    conn->connect_timer_.cancel();
    conn->on_ready();
  }
}

void redis_connection::on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* conn = static_cast<redis_connection*>(privdata);
  auto const* r = static_cast<redisReply const*>(reply);
  if (r == nullptr || conn->down_reason_) {
    return; // the context is going away
  }
  if (r->type != REDIS_REPLY_ERROR) {
    if (--conn->setup_pending_ == 0) {
      conn->connect_timer_.cancel();
      conn->on_ready(); // the commands pipelined behind AUTH/SELECT start their timeouts now
    }
    return;
  }
  // Commands pipelined behind AUTH/SELECT must not run as the wrong user or in the wrong database: drop the
  // connection (hiredis defers the free until this callback returns) and back off. The refusal goes with the
  // commands that fail for it, so that what reports them can say why (a wrong password, a database out of range).
  try {
    conn->setup_refusal_.assign(r->str != nullptr ? r->str : "", std::min(r->len, max_setup_refusal_bytes));
  } catch (...) { // out of memory, inside hiredis's callback: the code alone says what happened
    conn->setup_refusal_.clear();
  }
  conn->down_reason_ = fleet_errc::auth_failed;
  redisAsyncFree(ac);
}

void redis_connection::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<op_holder> holder(static_cast<op_holder*>(privdata));
  auto* conn = static_cast<redis_connection*>(ac->data);
  redis_command_op& op = **holder;
  if (reply == nullptr) {
    --conn->stats_.pending;
    conn->retire(op.compensate); // no reply: nothing is known to undo
    auto const ec = conn->failure_code(ac);
    finish(op, ec, conn->failure_reply(ec));
    return;
  }
  if (op.done) { // timed out or cancelled: the late reply is dropped, after its compensation
    conn->send_compensation(op, *static_cast<redisReply const*>(reply));
    return;
  }
  --conn->stats_.pending;
  conn->retire(op.compensate); // answered in time: nothing to undo
  redis_reply value = copy_reply(*static_cast<redisReply const*>(reply));
  std::error_code const ec = value.is_error() ? make_error_code(fleet_errc::server_error) : std::error_code{};
  finish(op, ec, std::move(value));
}

void redis_connection::send_compensation(redis_command_op& op, redisReply const& late) noexcept {
  redis_compensation compensate = std::move(op.compensate);
  op.compensate = nullptr; // a moved-from std::function is valid but unspecified
  bool sent = false;
  try {
    // The late command still counts as pending meanwhile: commands the compensation starts see it.
    std::vector<std::string> const command = compensate ? compensate(copy_reply(late)) : std::vector<std::string>{};
    if (!command.empty() && ac_ != nullptr && !closed_) {
      std::vector<std::string_view> const args(command.begin(), command.end());
      auto holder = std::make_unique<op_holder>(std::make_shared<dropped_reply_op>());
      format_command(args, command_buffer_);
      // Sent from inside hiredis's reply callback: hiredis queues it behind the commands already written, so
      // Redis runs it after the late command (and after any command written since).
      sent = redisAsyncFormattedCommand(ac_, &on_reply, holder.get(), command_buffer_.data(), command_buffer_.size()) ==
             REDIS_OK;
      if (sent) {
        (void)holder.release();
        ++stats_.compensations;
      }
    }
  } catch (...) { // the compensation threw, or out of memory: nothing is sent
  }
  if (!sent) {
    --stats_.pending; // else the late command's place among the pending passes to its compensating command
  }
  retire(compensate);
}

void redis_connection::retire(redis_compensation& compensate) noexcept {
  if (!compensate) {
    return;
  }
  // Destroyed later, from the executor: what it captures may own the client, whose connection must not be
  // destroyed inside hiredis's callbacks (hiredis calls back into it after them).
  try {
    asio::post(executor_, [dying = std::move(compensate)] {});
  } catch (...) { // out of memory: destroyed here, as a last resort
  }
  compensate = nullptr;
}

void start_redis_command(redis_connection& conn, std::span<std::string_view const> args,
                         std::shared_ptr<redis_command_op> const& op) {
  conn.start(args, op);
}

asio::any_io_executor redis_connection_executor(redis_connection const& conn) noexcept {
  return conn.executor();
}

std::shared_ptr<redis_connection> make_redis_connection(asio::any_io_executor ex, redis_options options) {
  auto conn = std::make_shared<redis_connection>(std::move(ex), std::move(options));
  context_shutdown::add(context_of(conn->executor()), conn);
  return conn;
}

void release_redis_connection(std::shared_ptr<redis_connection> conn) noexcept {
  // hiredis's context is read, written and freed on the connection's executor only: a handler there may be inside
  // redisAsyncHandleRead right now (it holds the adapter, not the connection), and a free from this thread would pull
  // the context, and the connection its callbacks use, from under it. The posted handler keeps the connection alive
  // until it ran; this thread does not wait. At once when called on the executor. A handler that the execution
  // context destroys unrun (at its shutdown, when no thread runs it) frees the context in ~redis_connection; so does a
  // failed allocation here, as a last resort.
  conn->mark_released(); // a command initiated on the executor before the close runs is refused unsent
  auto const ex = conn->executor();
  try {
    asio::dispatch(ex, [conn = std::move(conn)] { conn->abort(); });
  } catch (...) { // NOLINT(bugprone-empty-catch): out of memory: see above
  }
}

redis_client_stats redis_connection_stats(redis_connection const& conn) noexcept {
  return conn.stats();
}

} // namespace wandura::detail
