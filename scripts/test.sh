#!/usr/bin/env bash
# Quick-start command two: installs what is missing, builds the release preset and runs the whole test suite
# (unit + integration + the installed package and the .deb, each built against by examples/consumer). Ends with
# ctest's summary; exits non-zero if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release -j2
