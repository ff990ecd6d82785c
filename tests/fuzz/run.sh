#!/usr/bin/env bash
# Runs every libFuzzer target of a `fuzz` build for a bounded time each, one job each, as many targets at once as
# the machine has cores (FUZZ_PARALLEL overrides: 1 runs them one after the other; set it where a CPU quota gives
# the process fewer cores than `nproc` counts, or a target may hit its 10 s timeout for want of CPU).
#   tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# Each target starts from its seed corpus (tests/fuzz/corpus/<target>/, read-only) and a scratch corpus under
# BUILD_DIR/fuzz-work/<target>/, where a finding is written as crash-*, leak-*, timeout-* or oom-*. Prints one line
# per target with its executions, in the order given; exits 1 if any target reported a finding.
set -uo pipefail
build_dir=${1:?build directory}
seconds=${2:?seconds per target}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
targets=()
if [ $# -eq 0 ]; then
  for dir in "$here"/corpus/*/; do
    targets+=("$(basename "$dir")")
  done
fi
# Each target once: two runs of one target at a time would share its scratch directory.
for target in "$@"; do
  case " ${targets[*]} " in
    *" $target "*) ;;
    *) targets+=("$target") ;;
  esac
done
parallel=${FUZZ_PARALLEL:-$(nproc)}
if ! [[ $parallel =~ ^[1-9][0-9]*$ ]]; then
  echo "FUZZ_PARALLEL must be a positive number, not \"$parallel\"" >&2
  exit 2
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Symbolised stacks: the sanitizers look for llvm-symbolizer (Debian package llvm).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer >/dev/null 2>&1; then
  ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer)
  export ASAN_SYMBOLIZER_PATH
fi

# One target: its exit status goes to fuzz-work/<target>/rc, its output to log.txt.
run_target() {
  local target=$1 binary="$build_dir/tests/fuzz/$1" work="$build_dir/fuzz-work/$1"
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" "$here/corpus/$target" >"$work/log.txt" 2>&1
  echo $? >"$work/rc"
}

running=0
for target in "${targets[@]}"; do
  work="$build_dir/fuzz-work/$target"
  mkdir -p "$work/corpus"
  rm -f "$work/rc"
  if [ $running -ge "$parallel" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
wait

status=0
for target in "${targets[@]}"; do
  work="$build_dir/fuzz-work/$target"
  log="$work/log.txt"
  rc=$(cat "$work/rc" 2>/dev/null || echo "?")
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$')
  echo "fuzz: $target ${seconds}s rc=$rc executions=${runs:-?}"
  if [ "$rc" != 0 ]; then
    status=1
    report='ERROR|runtime error|deadly signal'
    if grep -qE "$report" "$log"; then
      grep -E -A40 "$report" "$log" | head -60
    else
      tail -20 "$log" # no sanitizer report: a missing binary, a killed process
    fi
    ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null
  fi
done
exit $status
