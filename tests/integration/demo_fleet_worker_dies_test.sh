#!/usr/bin/env bash
# A fleet run whose worker process is killed (SIGKILL) mid-run: the parent neither hangs nor reports half a run. It
# exits 1 within seconds, names the worker and how it ended, and leaves no worker behind.
#
#   demo_fleet_worker_dies_test.sh SMOOTH_PLAYBACK WORK_DIR
set -euo pipefail
demo=$1
work=$2
rm -rf "$work"
mkdir -p "$work"

"$demo" --viewers 2000 --duration 30 --processes 2 --report-dir "$work" >"$work/out.txt" 2>"$work/err.txt" &
parent=$!
trap 'kill -9 $parent 2>/dev/null || true' EXIT

# The workers are the parent's children; wait (at most 30 s) until the run has started in both.
workers=""
for _ in $(seq 300); do
  workers=$(pgrep -P "$parent" || true)
  if [ "$(echo "$workers" | grep -c .)" -eq 2 ] && grep -q "^t=" "$work/out.txt"; then
    break
  fi
  sleep 0.1
done
if [ "$(echo "$workers" | grep -c .)" -ne 2 ]; then
  echo "FAILED: expected 2 worker processes, found: $workers"
  cat "$work/out.txt" "$work/err.txt"
  exit 1
fi
victim=$(echo "$workers" | head -1)
other=$(echo "$workers" | tail -1)
sleep 1
kill -9 "$victim"
started=$(date +%s)

rc=0
for _ in $(seq 300); do # 30 s at most
  if ! kill -0 "$parent" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if kill -0 "$parent" 2>/dev/null; then
  echo "FAILED: the parent still runs 30 s after its worker was killed"
  exit 1
fi
wait "$parent" || rc=$?
took=$(($(date +%s) - started))
cat "$work/out.txt" "$work/err.txt"
if [ "$rc" -ne 1 ]; then
  echo "FAILED: expected exit status 1, got $rc"
  exit 1
fi
if ! grep -q "ended without a report: killed by signal 9" "$work/err.txt"; then
  echo "FAILED: the error does not say the worker was killed"
  exit 1
fi
if kill -0 "$other" 2>/dev/null; then
  echo "FAILED: the other worker ($other) outlived the parent"
  exit 1
fi
if [ -e "$work/report.json" ]; then
  echo "FAILED: a report was written for a run that lost a worker"
  exit 1
fi
echo "demo fleet: the parent ended $took s after its worker was killed, exit status 1, no worker left"
