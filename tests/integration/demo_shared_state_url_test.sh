#!/usr/bin/env bash
# smooth_playback --shared-state URLs. A malformed one is a usage error found while reading the arguments: exit
# status 2 and one line that says what is wrong, before any emulator or worker starts (docs/adr/0007). With a URL
# that holds a password: the password appears nowhere the run shows or
# writes (the fleet line, the summary, report.json's "shared_state", the output of the workers) nor on a worker's
# command line; the URL is shown as redis://user:***@host:port/db. Nothing listens on port 1: the workers answer
# from local state and the run completes.
#
#   demo_shared_state_url_test.sh SMOOTH_PLAYBACK WORK_DIR
set -euo pipefail
demo=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAILED: $*"
  exit 1
}

secret=s3cretPW
# URL, then what the one line must say.
while IFS='|' read -r url says; do
  rc=0
  "$demo" --processes 2 --viewers 20 --duration 2 --shared-state "$url" --report-dir "$work" \
    >"$work/bad_out.txt" 2>"$work/bad_err.txt" || rc=$?
  cat "$work/bad_out.txt" "$work/bad_err.txt"
  [ "$rc" -eq 2 ] || fail "--shared-state $url: expected exit status 2, got $rc"
  [ ! -s "$work/bad_out.txt" ] || fail "--shared-state $url: the run started"
  [ "$(grep -c "^smooth_playback: --shared-state: " "$work/bad_err.txt")" -eq 1 ] ||
    fail "--shared-state $url: expected one line about --shared-state"
  grep -q -- "$says" "$work/bad_err.txt" || fail "--shared-state $url: the message does not say \"$says\""
  if grep -q "$secret" "$work/bad_err.txt"; then
    fail "--shared-state $url: the message shows the password"
  fi
done <<URLS
redis://|empty host
redis://127.0.0.1:6379/abc|db is not a number
redis://127.0.0.1:6379?db=1|query string
redis://u:$secret@127.0.0.1:6379?db=1|query string
redis://u:$secret@127.0.0.1:0|port is not 1-65535
rediss://u:$secret@127.0.0.1:6379|TLS
http://127.0.0.1:6379|must start with redis://
URLS
[ ! -e "$work/report.json" ] || fail "a report was written for a usage error"

"$demo" --processes 2 --viewers 20 --duration 2 --shared-state "redis://fleet:$secret@127.0.0.1:1/3" \
  --report-dir "$work" >"$work/out.txt" 2>"$work/err.txt" &
parent=$!
trap 'kill -9 $parent 2>/dev/null || true' EXIT
# While it runs (at most 30 s), read the command line of each worker it starts.
: >"$work/cmdlines.txt"
for _ in $(seq 300); do
  kill -0 "$parent" 2>/dev/null || break
  for pid in $(pgrep -P "$parent" || true); do
    tr '\0' ' ' <"/proc/$pid/cmdline" >>"$work/cmdlines.txt" 2>/dev/null || true
    echo >>"$work/cmdlines.txt"
  done
  sleep 0.1
done
rc=0
wait "$parent" || rc=$?
trap - EXIT
cat "$work/out.txt" "$work/err.txt"
[ "$rc" -eq 0 ] || fail "expected exit status 0, got $rc"
grep -q -- "--worker" "$work/cmdlines.txt" || fail "no worker command line was seen"
for f in out.txt err.txt report.json cmdlines.txt; do
  if grep -q "$secret" "$work/$f"; then
    fail "the password appears in $f"
  fi
done
grep -q "^fleet: .*shared state redis://fleet:\*\*\*@127\.0\.0\.1:1/3" "$work/out.txt" ||
  fail "the fleet line does not show redis://fleet:***@127.0.0.1:1/3"
grep -Eq "^ +fleet +2 processes, shared state redis://fleet:\*\*\*@127\.0\.0\.1:1/3" "$work/out.txt" ||
  fail "the summary does not show redis://fleet:***@127.0.0.1:1/3"
grep -q '"shared_state": "redis://fleet:\*\*\*@127\.0\.0\.1:1/3"' "$work/report.json" ||
  fail "report.json's shared_state is not redis://fleet:***@127.0.0.1:1/3"
# The workers did use the URL (db 3 on port 1), from their environment.
grep -q "redis 127\.0\.0\.1:1/3 unavailable" "$work/out.txt" || fail "the workers did not use the shared state"
echo "demo shared state url: 7 malformed URLs exit 2 at once; the password appears nowhere; shown as redis://fleet:***@127.0.0.1:1/3"
