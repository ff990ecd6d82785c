#!/usr/bin/env bash
# A fleet run with --shared-state auto whose private redis-server is stopped (SIGSTOP) for 1.5 s and then resumed:
# each worker's fleet reports the shared state failing (WARN) and then back (INFO), and the parent relays each line
# with its own level, once: `WARN worker K: fleet ... unavailable`, `INFO worker K: fleet ... is back`, never
# `WARN worker K: INFO fleet ...`.
#
#   demo_fleet_log_levels_test.sh SMOOTH_PLAYBACK WORK_DIR
set -euo pipefail
demo=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAILED: $*"
  cat "$work/out.txt" "$work/err.txt" 2>/dev/null || true
  exit 1
}
if [ -z "${WANDURA_REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null; then
  echo "demo fleet: skipped: no redis-server on PATH (install redis-server to run this test)"
  exit 0
fi

"$demo" --viewers 300 --duration 6 --processes 2 --shared-state auto --verbose --report-dir "$work" \
  >"$work/out.txt" 2>"$work/err.txt" &
parent=$!
trap 'kill -9 $parent 2>/dev/null || true' EXIT
redis=""
for _ in $(seq 300); do # 30 s at most for the redis-server and the first progress line
  for pid in $(pgrep -P "$parent" || true); do
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
      redis=$pid
    fi
  done
  if [ -n "$redis" ] && grep -q "^t=" "$work/out.txt"; then
    break
  fi
  sleep 0.1
done
[ -n "$redis" ] || fail "no redis-server child of the demo"
grep -q "^t=" "$work/out.txt" || fail "the run did not start within 30 s"
sleep 1
kill -STOP "$redis"
sleep 1.5
kill -CONT "$redis"
for _ in $(seq 1200); do # 120 s at most
  kill -0 "$parent" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$parent" 2>/dev/null && fail "the run did not end within 120 s"
rc=0
wait "$parent" || rc=$?
trap - EXIT
# The plays are not what is tested here: a pause of the shared state may cost one at most.
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || fail "expected exit status 0 or 1, got $rc"
relayed=$(grep -Ec "^(DEBUG|INFO|WARN|ERROR) worker [01]: " "$work/out.txt" || true)
if grep -Eq "^[A-Z]+ worker [0-9]+: (DEBUG|INFO|WARN|ERROR) " "$work/out.txt"; then
  fail "a relayed line carries a second level: $(grep -Em1 "^[A-Z]+ worker [0-9]+: (DEBUG|INFO|WARN|ERROR) " "$work/out.txt")"
fi
grep -Eq "^WARN worker [01]: fleet [a-z_ ]+: redis 127\.0\.0\.1:[0-9]+ unavailable" "$work/out.txt" ||
  fail "no WARN line for the shared state failing"
grep -Eq "^INFO worker [01]: fleet [a-z_ ]+: redis 127\.0\.0\.1:[0-9]+ is back after [0-9]+ local answers" \
  "$work/out.txt" || fail "no INFO line for the shared state back"
echo "demo fleet: $relayed worker lines relayed, each with its own level (WARN unavailable, INFO back)"
