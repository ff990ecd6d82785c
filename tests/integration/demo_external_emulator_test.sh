#!/usr/bin/env bash
# smooth_playback against `wandura emulator` started on its own (--base-url, key from WANDURA_API_KEY): the demo
# reads the emulator's ticket count before and after, and the difference must equal the fresh tickets it received.
# Usage: demo_external_emulator_test.sh /path/to/wandura /path/to/smooth_playback WORK_DIR
set -euo pipefail
wandura=$1
demo=$2
work=$3
rm -rf "$work" && mkdir -p "$work"
cd "$work"

"$wandura" emulator --port 0 --seed 11 >emulator.out 2>&1 &
emulator=$!
trap 'kill $emulator 2>/dev/null || true; wait $emulator 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 100); do
  url=$(sed -n 's/^listening on //p' emulator.out)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat emulator.out; echo "FAILED: the emulator did not print its address"; exit 1; }

set +e
WANDURA_API_KEY=test-key "$demo" --base-url "$url" --viewers 150 --duration 3 --report-dir report >demo.out 2>&1
rc=$?
set -e
cat demo.out
[ "$rc" -eq 0 ] || { echo "FAILED: smooth_playback exited with $rc"; exit 1; }

value() { sed -n "s/^  \"$1\": \\([0-9.]*\\|null\\),\$/\\1/p" report/report.json; }
counted=$(value emulator_tickets_counted)
fresh=$(value tickets_fresh)
limit=$(value playback_limit_per_min)
[ -n "$counted" ] && [ "$counted" != null ] || { echo "FAILED: no emulator_tickets_counted"; exit 1; }
[ "$counted" -eq "$fresh" ] || { echo "FAILED: emulator counted $counted, demo received $fresh fresh"; exit 1; }
[ "$fresh" -gt 0 ] || { echo "FAILED: no ticket at all"; exit 1; }
# The chart's limit comes from GET /v1/config: the emulator's default 6000 tickets/min.
[ "$limit" = 6000 ] || { echo "FAILED: playback_limit_per_min $limit, expected 6000"; exit 1; }
grep -q "equal, nothing counted twice" demo.out || { echo "FAILED: summary lacks the count check"; exit 1; }
echo "demo against an external emulator: all checks passed"
