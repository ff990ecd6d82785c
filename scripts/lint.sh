#!/usr/bin/env bash
# clang-format check and clang-tidy over the library sources, using build/release/compile_commands.json.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/release/compile_commands.json ] || cmake --preset release >/dev/null
files=$(git ls-files 'src/*.cpp' 'include/*.hpp')
clang-format --dry-run --Werror $files
clang-tidy -p build/release --quiet $(git ls-files 'src/*.cpp')
