#!/usr/bin/env bash
# A fleet run with --shared-state auto ended by a signal once its fleet line is out and its viewers have started.
# INT or TERM: the demo exits 130 or 143 within seconds, its workers and its private redis-server are gone, the
# server's temporary directory is removed, and no report is written. KILL (which nothing can catch): the
# redis-server still dies with the demo (PR_SET_PDEATHSIG), as the workers do; only its directory is left, and the
# test removes it.
#
#   demo_fleet_interrupted_test.sh SMOOTH_PLAYBACK WORK_DIR INT|TERM|KILL
set -euo pipefail
demo=$1
work=$2
sig=$3
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

# Job control, so that the demo is started with SIGINT not ignored, as from a terminal.
set -m
"$demo" --viewers 2000 --duration 30 --processes 2 --shared-state auto --report-dir "$work" \
  >"$work/out.txt" 2>"$work/err.txt" &
parent=$!
set +m
trap 'kill -9 $parent 2>/dev/null || true' EXIT

# Its children (at most 30 s): the redis-server (started first), then 2 workers; and the first progress line.
redis=""
workers=""
for _ in $(seq 300); do
  redis=""
  workers=""
  for pid in $(pgrep -P "$parent" || true); do
    if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qx -- "--worker"; then
      workers="$workers $pid"
    elif [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
      redis=$pid
    fi
  done
  if [ -n "$redis" ] && [ "$(echo $workers | wc -w)" -eq 2 ] && grep -q "^fleet: " "$work/out.txt" &&
    grep -q "^t=" "$work/out.txt"; then
    break
  fi
  sleep 0.1
done
[ -n "$redis" ] || fail "no redis-server child of the demo"
[ "$(echo $workers | wc -w)" -eq 2 ] || fail "expected 2 workers, found:$workers"
grep -q "^t=" "$work/out.txt" || fail "the run did not start within 30 s"
# redis-server rewrites its command line; it runs in its --dir.
dir=$(readlink "/proc/$redis/cwd")
[ -d "$dir" ] && [[ "$dir" == */smooth-playback-redis-* ]] || fail "the redis-server's directory ($dir) is not there"

kill -"$sig" "$parent"
started=$(date +%s%N)
for _ in $(seq 200); do # 20 s at most
  kill -0 "$parent" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$parent" 2>/dev/null && fail "the demo still runs 20 s after SIG$sig"
rc=0
wait "$parent" || rc=$?
trap - EXIT
took_ms=$((($(date +%s%N) - started) / 1000000))

# The redis-server and the workers: gone within 5 s (killed and reaped by the demo, or by the kernel after it).
gone() {
  local pid=$1
  [ ! -e "/proc/$pid" ] || [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" = "Z" ]
}
for pid in $redis $workers; do
  for _ in $(seq 50); do
    gone "$pid" && break
    sleep 0.1
  done
  if ! gone "$pid"; then
    what=$(tr -s '\0 ' ' ' <"/proc/$pid/cmdline")
    kill -9 "$pid" 2>/dev/null || true # leave nothing behind on this machine either
    rm -rf "$dir"
    fail "process $pid ($what) outlived the demo"
  fi
done
[ ! -e "$work/report.json" ] || fail "a report was written for an interrupted run"
if [ "$sig" = KILL ]; then
  [ "$rc" -eq 137 ] || fail "expected the demo killed by SIGKILL (137), got $rc"
  rm -rf "$dir"
  echo "demo fleet: SIGKILL: the private redis-server and the workers died with the demo"
  exit 0
fi
expected=$((128 + $(kill -l "$sig")))
[ "$rc" -eq "$expected" ] || fail "expected exit status $expected after SIG$sig, got $rc"
[ ! -e "$dir" ] || fail "the redis-server's directory $dir is left"
grep -q "^smooth_playback: interrupted by SIG$sig" "$work/err.txt" || fail "stderr does not say SIG$sig ended the run"
echo "demo fleet: SIG$sig: exit status $rc $took_ms ms after the signal, no redis-server, no worker, no directory left"
