// wandura::fallback_options: how a shared-state class degrades when Redis is slow, down or answers errors.
//
// Degrade, never block: every operation of `shared_ticket_cache`, `shared_viewer_limit` and
// `shared_counter_pace` that cannot get its answer from Redis within `redis_options::command_timeout` answers from
// the class's local, in-process equivalent instead (a reconnect included; the commands waiting for the fleet's first
// connection wait for it first, up to `redis_options::connect_timeout`: see fleet.hpp). After a failure the class keeps
// answering locally for `probe_interval`, then lets one operation ask Redis again (the probe) while the others go on
// answering locally until its outcome is known, so a paused Redis costs one timeout per interval, not one per call;
// Redis's answer ends the fallback by itself. A Redis may answer reads and refuse writes (a read-only replica, `OOM`
// under `noeviction`, an ACL): a fallback that a refused write started is ended only by a write Redis accepts, so only
// a writing operation probes it and reads answer locally meanwhile; one that a read started, by either.
//
// What is a failure of Redis, and what of one call: no reply (timeout, reset, refused or failed connection), a
// reply of the wrong shape, and every error reply about the server (`NOAUTH`, `NOPERM`, `OOM`, `READONLY`,
// `LOADING`, `BUSY`, `MISCONF`, an unknown command, ...) start the fallback above for every operation of the
// class. An error raised inside a script by what one of its keys held (`WRONGTYPE`, or an `ERR` from a command or
// the Lua arithmetic: a key another program wrote) concerns that call alone: it answers locally, counted as a
// fallback, and the next call asks Redis. (The scripts repair such keys themselves, so this is for what they do
// not foresee; docs/adr/0008-fleet-shared-state.md.)
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

namespace wandura {

struct fallback_options {
  /// Receives one line when the class starts answering locally, e.g.
  /// `WARN fleet ticket_cache: redis 127.0.0.1:6379 unavailable (attempt timed out before any response byte);
  /// answering from local state until it is back`, and one when Redis answers again
  /// (`INFO fleet ticket_cache: redis 127.0.0.1:6379 is back after 42 local answers`). Never one per call; never
  /// a password. When Redis answered an error reply, the line quotes it (one line, its first 200 bytes), e.g.
  /// `unavailable (redis answered an error reply: NOAUTH Authentication required.)`: a server that refuses the
  /// fleet's commands (no or wrong ACL permissions, `maxmemory` reached, a read-only replica) says why. May be
  /// empty. A call that failed on its own key (above) writes no such line: at most one a minute says
  /// `WARN fleet viewer_limit: redis 127.0.0.1:6379 answered a call with an error about its viewer bucket key
  /// (WRONGTYPE ...); that call answered from local state, the next ones ask redis`, naming the kind of key, never
  /// the key (nor so the viewer_ref), and how many such calls the previous line left unsaid. Called on the thread
  /// that runs the operation.
  std::function<void(std::string_view)> log;
  /// After a failure, how long operations answer locally before Redis is tried again.
  std::chrono::milliseconds probe_interval{500};
};

} // namespace wandura
