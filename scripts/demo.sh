#!/usr/bin/env bash
# Quick-start command one: installs what is missing, builds Release and runs the smooth-playback demo against the
# embedded emulator. Extra arguments go to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target smooth_playback
exec build/release/examples/smooth_playback/smooth_playback "$@"
