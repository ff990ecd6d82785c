#!/usr/bin/env bash
# clang-format check over every C++ file, then clang-tidy (.clang-tidy) over the library and app sources, using
# build/release/compile_commands.json. Usage: scripts/lint.sh [files...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/release/compile_commands.json ] || cmake --preset release >/dev/null
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.hpp' 'include/*.hpp' 'tests/*.cpp' 'tests/*.hpp' 'bench/*.cpp' \
                                    'bench/*.hpp' 'examples/*.cpp' 'examples/*.hpp')
fi
clang-format --dry-run --Werror "${files[@]}"
# Asio's coroutine support comes with the library's definitions (cmake/WanduraDependencies.cmake), which the
# compile commands carry; clang does not know GCC-only warning flags: tell it to pass over them.
tidy_args=(--quiet --extra-arg=-Wno-unknown-warning-option)
for f in "${files[@]}"; do
  case "$f" in
    src/*.cpp) clang-tidy -p build/release "${tidy_args[@]}" "$f" ;;
  esac
done
