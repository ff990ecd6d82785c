#!/usr/bin/env bash
# Starts or stops the test/benchmark nginx on loopback.
#
#   nginx.sh start <run-dir> [workers]   generate a self-signed certificate (openssl), write nginx.conf from
#                                        nginx.conf.in with free ports, start nginx (daemon), wait until it answers,
#                                        and write <run-dir>/nginx.env (WANDURA_NGINX_HTTP_PORT, _H2C_PORT,
#                                        _HTTPS_PORT (HTTP/2 by ALPN), _HTTPS1_PORT (TLS offering only
#                                        HTTP/1.1), _CA).
#   nginx.sh stop <run-dir>              stop it (TERM via the pid file, then wait), leaving the directory.
#
# Used by the ctest fixture `wandura_nginx` (tests/unit/transport/CMakeLists.txt) and by bench/transport and
# bench/issue_tickets.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop <run-dir> [workers]" >&2
  exit 2
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

stop() {
  if [ -f "$dir/nginx.pid" ]; then
    local pid
    pid="$(cat "$dir/nginx.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
      done
    fi
    rm -f "$dir/nginx.pid"
  fi
}

port_free() { # true when nothing listens on 127.0.0.1:$1
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

answers() { # true when 127.0.0.1:$1 accepts connections
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    if port_free "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

case "$cmd" in
stop)
  stop
  ;;
start)
  workers="${3:-1}"
  stop
  mkdir -p "$dir/tmp"
  if [ ! -f "$dir/cert.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 -subj "/CN=localhost" \
      -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
      -keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1
  fi
  mkdir -p "$dir/www"
  tr -d '\n' < "$here/response.json" > "$dir/www/response.json"
  for attempt in $(seq 1 20); do
    http_port="$(pick_port)"; h2c_port="$(pick_port)"; https_port="$(pick_port)"; https1_port="$(pick_port)"
    if [ "$(printf '%s\n' "$http_port" "$h2c_port" "$https_port" "$https1_port" | sort -u | wc -l)" != 4 ]; then
      continue
    fi
    sed -e "s|@DIR@|$dir|g" -e "s|@WORKERS@|$workers|g" -e "s|@HTTP_PORT@|$http_port|g" \
        -e "s|@H2C_PORT@|$h2c_port|g" -e "s|@HTTPS_PORT@|$https_port|g" -e "s|@HTTPS1_PORT@|$https1_port|g" \
        "$here/nginx.conf.in" > "$dir/nginx.conf"
    if "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>>"$dir/start.log"; then
      ok=0
      for _ in $(seq 1 100); do
        if answers "$http_port" && answers "$h2c_port" && answers "$https_port" && answers "$https1_port"; then
          ok=1
          break
        fi
        sleep 0.05
      done
      if [ "$ok" = 1 ]; then
        {
          echo "WANDURA_NGINX_HTTP_PORT=$http_port"
          echo "WANDURA_NGINX_H2C_PORT=$h2c_port"
          echo "WANDURA_NGINX_HTTPS_PORT=$https_port"
          echo "WANDURA_NGINX_HTTPS1_PORT=$https1_port"
          echo "WANDURA_NGINX_CA=$dir/cert.pem"
        } > "$dir/nginx.env"
        echo "nginx on 127.0.0.1: http $http_port, h2c $h2c_port, https $https_port, https (HTTP/1.1 only)" \
          "$https1_port (attempt $attempt)"
        exit 0
      fi
      stop
    fi
  done
  echo "nginx.sh: could not start nginx; see $dir/start.log and $dir/error.log" >&2
  exit 1
  ;;
*)
  echo "usage: $0 start|stop <run-dir> [workers]" >&2
  exit 2
  ;;
esac
