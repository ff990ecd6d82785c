#!/usr/bin/env bash
# `wandura config` over TLS against the test nginx (tests/support/nginx, a self-signed certificate for 127.0.0.1
# and localhost, not for ::1): the CA bundle comes from --ca-bundle, CURL_CA_BUNDLE or SSL_CERT_FILE; without it
# the call fails and says the certificate could not be verified; --insecure works and warns; https:// to a plain-HTTP
# port fails with a hint that names that cause too.
# Usage: cli_tls_test.sh /path/to/wandura WORK_DIR NGINX_RUN_DIR
set -euo pipefail
wandura=$1
work=$2
nginx_dir=$3
rm -rf "$work" && mkdir -p "$work"
cd "$work"

fail() { echo "FAILED: $*" >&2; exit 1; }
[ -f "$nginx_dir/nginx.env" ] || fail "no $nginx_dir/nginx.env: the wandura_nginx fixture did not run"
# shellcheck disable=SC1091
. "$nginx_dir/nginx.env"
url="https://127.0.0.1:$WANDURA_NGINX_HTTPS_PORT"
ca=$WANDURA_NGINX_CA

run() {
  set +e
  "$wandura" "$@" >out.txt 2>err.txt
  rc=$?
  set -e
}
expect_rc() { [ "$rc" -eq "$1" ] || { cat out.txt err.txt >&2; fail "$2: exit $rc, expected $1"; }; }
expect_out() { grep -q -- "$1" out.txt || { cat out.txt >&2; fail "stdout lacks: $1"; }; }
expect_err() { grep -qi -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks: $1"; }; }
no_err() { ! grep -qi -- "$1" err.txt || { cat err.txt >&2; fail "stderr has: $1"; }; }

export WANDURA_API_KEY=test-key
unset WANDURA_BASE_URL CURL_CA_BUNDLE SSL_CERT_FILE || true
# One attempt per call: the checks are about the TLS outcome, not the retry loop.
once=(--base-url "$url" --policy standard)

# The private CA from the flag: the call succeeds (nginx answers every path with the same JSON).
run config "${once[@]}" --ca-bundle "$ca"
expect_rc 0 "--ca-bundle"
expect_out "^organisation: "
no_err "WARNING"

# Without it the system's bundle does not know the certificate: exit 1; the message names TLS, and a hint names
# what a certificate is checked against and how to trust a private CA (and the other cause of a TLS failure).
run config "${once[@]}"
expect_rc 1 "no CA bundle"
expect_err "^wandura config: .*TLS"
expect_err "^wandura config: .*TLS[^:]*: .*certificate" # libcurl's own words on the error line, not only in the hint
expect_err "^hint: either the server's certificate failed verification against the system's CA bundle .* pass --ca-bundle FILE"

# https:// to a port that speaks plain HTTP: the handshake fails before any certificate is seen. The hint must not
# say a certificate was checked; it names both causes, the scheme and port included.
run config --base-url "https://127.0.0.1:$WANDURA_NGINX_HTTP_PORT" --policy standard --ca-bundle "$ca"
expect_rc 1 "https:// to a plain-HTTP port"
expect_err "^wandura config: .*TLS"
no_err "certificate was checked"
expect_err "^hint: either the server's certificate .* or the server does not speak TLS at that address (check the URL's scheme and port)"
run config --base-url "https://127.0.0.1:$WANDURA_NGINX_HTTP_PORT" --policy standard --insecure
expect_rc 1 "https:// to a plain-HTTP port, --insecure"
expect_err "^hint: certificates were not verified (--insecure).*does not speak TLS at that address (check the URL's scheme and port)"

# The same CA through the environment, as the curl tool reads it.
( export SSL_CERT_FILE=$ca; run config "${once[@]}"; expect_rc 0 "SSL_CERT_FILE" )
( export CURL_CA_BUNDLE=$ca; run config "${once[@]}"; expect_rc 0 "CURL_CA_BUNDLE" )
# The flag wins over the environment.
( export CURL_CA_BUNDLE=/nonexistent/ca.pem; run config "${once[@]}" --ca-bundle "$ca"; expect_rc 0 "flag over env" )

# A trusted certificate that does not name the host (::1 is not in it) still fails.
run config --base-url "https://[::1]:$WANDURA_NGINX_HTTPS_PORT" --policy standard --ca-bundle "$ca"
expect_rc 1 "host not in the certificate"
expect_err "TLS"
expect_err "^wandura config: .*TLS[^:]*: .*certificate"
expect_err "^hint: either the server's certificate failed verification against the CA bundle $ca (from --ca-bundle)"
( export SSL_CERT_FILE=$ca; run config --base-url "https://[::1]:$WANDURA_NGINX_HTTPS_PORT" --policy standard
  expect_rc 1 "host not in the certificate, CA from SSL_CERT_FILE"
  expect_err "verification against the CA bundle $ca (from SSL_CERT_FILE)" )

# --insecure: no verification, and a loud warning on every run.
run config "${once[@]}" --insecure
expect_rc 0 "--insecure"
expect_err "^WARNING: --insecure"
run config "${once[@]}" --insecure --json
expect_rc 0 "--insecure again"
expect_err "^WARNING: --insecure"

# A CA bundle that cannot be read, or --insecure with --ca-bundle, is a usage error: nothing is sent.
run config "${once[@]}" --ca-bundle /nonexistent/ca.pem
expect_rc 2 "unreadable --ca-bundle"
expect_err '^wandura config: --ca-bundle: the CA bundle "/nonexistent/ca.pem": cannot be opened: No such file or directory$'
printf 'not a certificate\n' >no-certificate.pem
run config "${once[@]}" --ca-bundle no-certificate.pem
expect_rc 2 "a --ca-bundle without a certificate"
expect_err '^wandura config: --ca-bundle: the CA bundle "no-certificate.pem": holds no PEM certificate$'
# A pipe (process substitution) is refused unread: reading it to check would leave libcurl nothing.
run config "${once[@]}" --ca-bundle <(cat "$ca")
expect_rc 2 "a pipe as --ca-bundle"
expect_err '^wandura config: --ca-bundle: the CA bundle "/dev/fd/[0-9]*": is not a regular file'
run config "${once[@]}" --ca-bundle "$ca" --insecure
expect_rc 2 "--ca-bundle with --insecure"
# A directory opens like a file but is no bundle: refused by name, not left to fail every handshake later.
mkdir -p certs && cp "$ca" certs/
run config "${once[@]}" --ca-bundle certs
expect_rc 2 "a directory as --ca-bundle"
expect_err '^wandura config: --ca-bundle: the CA bundle "certs": is a directory; give one PEM file'
( export SSL_CERT_FILE=$PWD/certs; run config "${once[@]}"; expect_rc 2 "a directory as SSL_CERT_FILE"
  expect_err "^wandura config: SSL_CERT_FILE: the CA bundle \"$PWD/certs\": is a directory" )

echo "cli tls: all checks passed"
