// The Lua scripts of the fleet's shared state. Each runs atomically in one round trip and touches keys of one
// organisation only (one slot: it works behind a Redis Cluster proxy with the `{org}` hash tag). The arithmetic mirrors
// rate_math.hpp line by line. Numbers cross into Lua as shortest round-trip strings (std::to_chars) and are stored the
// same way (Redis writes a Lua number with full precision), so both sides compute on the same doubles. Replies are
// integers (Lua numbers are truncated to integer replies), so fractional state stays inside the hashes.
//
// A key is the SDK's, but anything may have written it: a value the SDK never writes reads as absent and is
// repaired by the script that reads it, in the same step. A key of another type is deleted (a key that holds no
// state), a field that is not a number, or is NaN, ±inf (Lua's tonumber reads "nan", "inf", "1e400") or out of its
// range, is deleted from the hash; the script then goes on as on a key without it and writes what it writes on any
// key, with its expiry. So no value in one key makes a script fail, and none reaches a reply, the arithmetic or a
// write unchecked. Not public API.
#pragma once

#include <string_view>

namespace wandura::detail::lua {

/// Keeps the key's expiry at least `ms` from now, at most 2^53 ms (285,000 years: beyond it `PEXPIRE` refuses
/// the number as Lua passes it, after what the script wrote; a hold read as 1e300 asked for that).
#define WANDURA_LUA_EXTEND                                                                                             \
  "local function extend(key, ms)\n"                                                                                   \
  "  ms = math.min(math.ceil(ms), 9007199254740992)\n"                                                                 \
  "  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end\n"                                        \
  "end\n"

/// `fields(key, names, ok)`: the hash's fields `names` as numbers, by name, nil for each absent, and whether it
/// repaired the key. A key of another type is deleted; a field that is not a finite number, or for which
/// `ok(name, value)` is false, is deleted from the hash. Either reads as absent. `finite(v)`: v is a number,
/// neither NaN nor ±inf.
#define WANDURA_LUA_FIELDS                                                                                             \
  "local function finite(v) return v ~= nil and v == v and v > -math.huge and v < math.huge end\n"                     \
  "local function fields(key, names, ok)\n"                                                                            \
  "  local s = redis.pcall('HMGET', key, unpack(names))\n"                                                             \
  "  if s.err then\n"                                                                                                  \
  "    if not string.find(s.err, '^WRONGTYPE') then return redis.call('HMGET', key, unpack(names)) end\n"              \
  "    redis.call('DEL', key)\n"                                                                                       \
  "    return {}, true\n"                                                                                              \
  "  end\n"                                                                                                            \
  "  local out, bad = {}, {}\n"                                                                                        \
  "  for i, name in ipairs(names) do\n"                                                                                \
  "    local v = tonumber(s[i])\n"                                                                                     \
  "    if s[i] and not (finite(v) and ok(name, v)) then bad[#bad + 1] = name; v = nil end\n"                           \
  "    out[name] = v\n"                                                                                                \
  "  end\n"                                                                                                            \
  "  if #bad > 0 then redis.call('HDEL', key, unpack(bad)) end\n"                                                      \
  "  return out, #bad > 0\n"                                                                                           \
  "end\n"

/// `pace(key)`: the pace hash's state through `fields`: `tat`, `hold`, `press` within ±2^53 ms (the SDK writes
/// times before the clock's end, 2262; Redis answers a larger one as a wrong integer), `em` and `burst` > 0 (a
/// rate is finite and > 0). A key it repaired gets its expiry, whether or not the script writes it afterwards.
#define WANDURA_LUA_PACE                                                                                               \
  WANDURA_LUA_FIELDS                                                                                                   \
  "local function pace(key)\n"                                                                                         \
  "  local s, repaired = fields(key, {'tat', 'hold', 'press', 'em', 'burst'}, function(name, v)\n"                     \
  "    if name == 'em' or name == 'burst' then return v > 0 end\n"                                                     \
  "    return math.abs(v) <= 9007199254740992\n"                                                                       \
  "  end)\n"                                                                                                           \
  "  if repaired then extend(key, 3600000) end\n"                                                                      \
  "  return s\n"                                                                                                       \
  "end\n"

/// KEYS: ticket keys (one slot: the organisation's hash tag); ARGV: envelope and px of each, in order, then the
/// erase channel. Stores each unless its stored ticket lives at least as long: two processes that issued tickets
/// for the same identity keep the longer-lived one. A key is stored after a miss, so it is almost always absent:
/// `SET NX` stores it in one command, and only a key that exists is compared (`PTTL`, then `SET`); a `PTTL` read
/// before every `SET` cost redis-server about 13 % more per script. A key of another type than a string holds no
/// ticket: it is replaced whatever its expiry (`TYPE`, asked only when the stored key would otherwise stay). Then
/// publishes what it stored on the channel, in one message: `+` and a line `<key> <px>` per ticket (the fleet's replica
/// of which keys exist, src/fleet/known_keys.hpp). Returns how many were stored.
inline constexpr std::string_view ticket_put =
    "local call = redis.call\n"
    "local stored = {'+'}\n"
    "for i = 1, #KEYS do\n"
    "  local key, envelope, px = KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]\n"
    "  if call('SET', key, envelope, 'PX', px, 'NX') or\n"
    "     ((call('PTTL', key) < tonumber(px) or call('TYPE', key)['ok'] ~= 'string') and\n"
    "      call('SET', key, envelope, 'PX', px)) then\n"
    "    stored[#stored + 1] = key .. ' ' .. px .. '\\n'\n"
    "  end\n"
    "end\n"
    "local channel = ARGV[2 * #KEYS + 1]\n"
    "if #stored > 1 and channel then\n"
    "  call('PUBLISH', channel, table.concat(stored))\n"
    "end\n"
    "return #stored - 1\n";

/// ARGV: a `SCAN` cursor, the pattern of the organisation's ticket keys, the page's `COUNT`. One page of the
/// replica's resync: {next cursor, then each key found and its PTTL (keys without a positive one left out)}.
/// Read-only; names no key (it reads the keys `SCAN` finds), so it runs on a single Redis, not behind a cluster
/// proxy (there it fails, and the replica stays incomplete: lookups ask Redis as without it).
inline constexpr std::string_view ticket_scan =
    "local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])\n"
    "local out = {page[1]}\n"
    "for _, key in ipairs(page[2]) do\n"
    "  local ttl = redis.call('PTTL', key)\n"
    "  if ttl > 0 then out[#out + 1] = key; out[#out + 1] = ttl end\n"
    "end\n"
    "return out\n";

/// KEYS[1] ticket key; ARGV[1] the erase channel. Deletes the ticket and then publishes its key, in one step, so
/// that a process told of the erase cannot read the ticket again from Redis. Returns 1.
inline constexpr std::string_view ticket_erase = "redis.call('DEL', KEYS[1])\n"
                                                 "redis.call('PUBLISH', ARGV[1], KEYS[1])\n"
                                                 "return 1\n";

/// KEYS[1] viewer key; ARGV: now_ms, rate_per_ms, capacity, n (n < 0 gives -n back), owed (tickets the process
/// granted locally while Redis did not answer, > 0, or absent: none). Owed tickets are taken first, down to an
/// empty bucket and no further (the rest is forgiven). Returns {granted 0/1, wait_ms (at most 10^12: ~31 years),
/// tokens left in thousandths, rounded down, owed tickets taken in thousandths, rounded down}: the process keeps
/// the tokens left as its local bucket of the viewer (what it answers from while Redis does not). Mirrors
/// bucket_take. A bucket whose `t` is not a number within [0, capacity] (the SDK never writes another), or whose
/// `ts` is not one within ±2^53 ms, starts full as a missing one does.
inline constexpr std::string_view viewer_take = WANDURA_LUA_EXTEND WANDURA_LUA_FIELDS
    "local now, rate, cap, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local owed = tonumber(ARGV[5])\n"
    "local s = fields(KEYS[1], {'t', 'ts'}, function(name, v)\n"
    "  if name == 't' then return v >= 0 and v <= cap end\n"
    "  return math.abs(v) <= 9007199254740992\n"
    "end)\n"
    "local tokens, at = s.t, s.ts\n"
    "if not (tokens and at) then tokens, at = cap, now end\n"
    "if now > at then tokens = math.min(cap, tokens + (now - at) * rate); at = now end\n"
    "if not (finite(owed) and owed > 0) then owed = 0 end\n"
    "owed = math.min(owed, tokens)\n"
    "tokens = tokens - owed\n"
    "local granted, wait = 1, 0\n"
    "if n < 0 then tokens = math.min(cap, tokens - n)\n"
    "elseif n > cap then granted = 0; wait = math.ceil((cap - tokens) / rate)\n"
    "elseif n > tokens then granted = 0; wait = math.ceil((n - tokens) / rate)\n"
    "else tokens = tokens - n end\n"
    "redis.call('HSET', KEYS[1], 't', tokens, 'ts', at)\n"
    "extend(KEYS[1], (cap - tokens) / rate + 60000)\n"
    "return {granted, math.min(wait, 1000000000000), math.floor(tokens * 1000), math.floor(owed * 1000)}\n";

/// KEYS[1] pace key; ARGV: now_ms, cost, emission_ms, burst (the caller's rate, used unless one was set in the
/// key), book_ms (units that conform within this time are booked for then). Returns {go 0/1, at_ms}: go with the
/// time the units may be used (now, or the booked instant), or not with the earliest time to ask again. Mirrors
/// gcra_take.
inline constexpr std::string_view pace_take = WANDURA_LUA_EXTEND WANDURA_LUA_PACE
    "local now, cost, book = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5]) or 0\n"
    "local s = pace(KEYS[1])\n"
    "local em, burst = s.em or tonumber(ARGV[3]), s.burst or tonumber(ARGV[4])\n"
    "local hold = s.hold or 0\n"
    "if hold > now then return {0, math.ceil(hold)} end\n"
    "local tat = math.max(s.tat or now, now)\n"
    "local new_tat = tat + cost * em\n"
    "local allow_at = new_tat - burst * em\n"
    "if allow_at > now + book then return {0, math.ceil(allow_at - book)} end\n"
    "redis.call('HSET', KEYS[1], 'tat', new_tat)\n"
    "extend(KEYS[1], 3600000)\n"
    "if allow_at > now then return {1, math.ceil(allow_at)} end\n"
    "return {1, now}\n";

/// KEYS[1] pace key; ARGV: now_ms, until_ms, emission_ms, burst (the caller's rate, used unless one was set in the
/// key). Nobody in the fleet goes before until_ms (a 429's Retry-After), units booked for instants inside the hold
/// come out of the burst at its end, and `press` (the latest refusal any process saw) becomes at least now_ms.
/// Returns the hold in force afterwards. Mirrors gcra_hold.
inline constexpr std::string_view pace_hold = WANDURA_LUA_EXTEND WANDURA_LUA_PACE
    "local now, hold = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local s = pace(KEYS[1])\n"
    "local cur, press = s.hold or 0, s.press or 0\n"
    "local em, burst = s.em or tonumber(ARGV[3]), s.burst or tonumber(ARGV[4])\n"
    "local tat = s.tat\n"
    "local from = math.max(now, cur)\n"
    "if cur > hold then hold = cur end\n"
    "if tat and em and burst then\n"
    "  local to = math.min(tat - burst * em, hold)\n"
    "  if to > from then redis.call('HSET', KEYS[1], 'tat', math.max(tat, hold + (to - from))) end\n"
    "end\n"
    "if press > now then now = press end\n"
    "redis.call('HSET', KEYS[1], 'hold', hold, 'press', now)\n"
    "extend(KEYS[1], math.max(3600000, hold - now + 60000))\n"
    "return hold\n";

/// KEYS[1] pace key; ARGV: emission_ms, burst. The counter's rate for the whole fleet (e.g. from a 429's
/// X-RateLimit-Limit). Returns 1.
inline constexpr std::string_view pace_rate =
    WANDURA_LUA_EXTEND WANDURA_LUA_PACE "pace(KEYS[1])\n"
                                        "redis.call('HSET', KEYS[1], 'em', ARGV[1], 'burst', ARGV[2])\n"
                                        "extend(KEYS[1], 3600000)\n"
                                        "return 1\n";

/// KEYS[1] pace key. What a process needs to learn of the others: {hold, press, em} as text ('0' when absent;
/// em is absent until a rate was set for the fleet). A key of another type, or a field that is not a number within
/// [0, 2^53] (`pace` above), reads as absent. Read-only: the next take, hold or rate repairs the key.
inline constexpr std::string_view pace_read = "local s = redis.pcall('HMGET', KEYS[1], 'hold', 'press', 'em')\n"
                                              "if s.err then\n"
                                              "  if string.find(s.err, '^WRONGTYPE') then return {'0', '0', '0'} end\n"
                                              "  return redis.call('HMGET', KEYS[1], 'hold', 'press', 'em')\n"
                                              "end\n"
                                              "local out = {}\n"
                                              "for i = 1, 3 do\n"
                                              "  local v = tonumber(s[i])\n"
                                              "  out[i] = (v and v >= 0 and v <= 9007199254740992) and s[i] or '0'\n"
                                              "end\n"
                                              "return out\n";

#undef WANDURA_LUA_PACE
#undef WANDURA_LUA_FIELDS
#undef WANDURA_LUA_EXTEND

} // namespace wandura::detail::lua
