#!/usr/bin/env bash
# Installs every Debian 12 package that the build, tests, benchmarks and demo need. Does nothing when all are
# present. Run as root, or as a user with sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libasio-dev libcurl4-openssl-dev libssl-dev libsimdjson-dev libhttp-parser-dev libcli11-dev
  catch2 nlohmann-json3-dev
  nginx-light openssl wrk curl
  nghttp2-client python3-h2
  doxygen
  clang-16 libfuzzer-16-dev libclang-rt-16-dev llvm
  redis-server libhiredis-dev
  prometheus-cpp-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# nginx and redis-server are started only by the tests and benchmarks, on loopback, with their own settings;
# never as services.
if command -v systemctl >/dev/null 2>&1; then
  $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
  $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
