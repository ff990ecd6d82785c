#!/usr/bin/env bash
# `wandura tickets` against `wandura emulator` on loopback (issue 7): tickets are printed and the exit status follows
# the play item; with two scripted 503s the retries print WARN lines on stderr and the call still exits 0; usage
# errors exit 2; a key that would add header lines is refused before anything is sent; --version names the
# project's version; what the server names (an organisation, an error code) reaches the terminal one line each; an
# item the client could not read is printed with the SDK's reason.
# Usage: cli_tickets_test.sh /path/to/wandura WORK_DIR PROJECT_VERSION
set -euo pipefail
wandura=$1
work=$2
version=$3
rm -rf "$work" && mkdir -p "$work"
cd "$work"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

fail() { echo "FAILED: $*" >&2; exit 1; }

# Starts `wandura emulator --port 0 "$@"` and sets $url once it prints its address (at most ~10 s).
start_emulator() {
  local out="emulator.$((${#pids[@]})).out"
  : >"$out" # before the emulator's shell opens it, the first sed below may run: it must find a file (set -e)
  "$wandura" emulator --port 0 "$@" >"$out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    url=$(sed -n 's/^listening on //p' "$out")
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  cat "$out" >&2
  fail "the emulator did not print its address"
}

# Runs wandura with the given arguments; sets $rc, stdout in out.txt, stderr in err.txt.
run() {
  set +e
  "$wandura" "$@" >out.txt 2>err.txt
  rc=$?
  set -e
}

expect_rc() { [ "$rc" -eq "$1" ] || { cat out.txt err.txt >&2; fail "$2: exit $rc, expected $1"; }; }
expect_out() { grep -q -- "$1" out.txt || { cat out.txt >&2; fail "stdout lacks: $1"; }; }
expect_err() { grep -q -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks: $1"; }; }

export WANDURA_API_KEY=test-key
unset WANDURA_BASE_URL || true

start_emulator --seed 7
export WANDURA_BASE_URL=$url

# A play with two prefetches: a table of three granted items, one attempt, exit 0.
run tickets --film the-heiress-returns --episode 4 --unlocked-through 12 --viewer-secret s3cret --user u-1 --install i-1
expect_rc 0 "granted play"
[ "$(grep -c ' granted ' out.txt)" -eq 3 ] || { cat out.txt; fail "expected three granted items"; }
expect_out "attempts: 1, replayed: no"

# Columns stay aligned past the widths the table starts with: an episode number of 6 digits (refused, not_found,
# exit 1) and a film ref of 40 characters start the INTENT column where the header does.
intent_aligned() {
  local header_at row_at
  header_at=$(head -1 out.txt | grep -bo 'INTENT' | cut -d: -f1)
  row_at=$(sed -n 2p out.txt | grep -bo ' play ' | head -1 | cut -d: -f1)
  if [ -z "$header_at" ] || [ "$row_at" != "$((header_at - 1))" ]; then
    cat out.txt
    fail "$1: columns moved"
  fi
}
run tickets --film the-heiress-returns --episode 123456 --viewer-secret s3cret --user u-1 --install i-1
intent_aligned "episode 123456"
run tickets --film a-film-ref-forty-characters-long-xxxxxxx --episode 1 --viewer-secret s3cret --user u-1 --install i-1
intent_aligned "a long film ref"

# A CA bundle named by the environment is for https:// only: a stale one set machine-wide leaves plain HTTP alone.
( export CURL_CA_BUNDLE=/nonexistent/ca.pem SSL_CERT_FILE=/nonexistent/ca.pem; run config
  expect_rc 0 "plain HTTP with a stale CURL_CA_BUNDLE and SSL_CERT_FILE" )
( export CURL_CA_BUNDLE=/nonexistent/ca.pem; run config --base-url "https://127.0.0.1:1"
  expect_rc 2 "https with a stale CURL_CA_BUNDLE"; expect_err "CURL_CA_BUNDLE: the CA bundle" )

# The same viewer and device again: the server reuses the tickets (counted once), --json shape.
run tickets --film the-heiress-returns --episode 4 --unlocked-through 12 --viewer-secret s3cret --user u-1 --install i-1 --json
expect_rc 0 "reused play"
expect_out '"items":\[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play","outcome":"granted","status":200,"reused":true,"ticket":{"ticket_id":"tkt_'
expect_out '"attempts":1,"replayed":false}'

# The paywall: --unlocked-through 4 means no prefetch item at all.
run tickets --film the-heiress-returns --episode 4 --unlocked-through 4 --json
expect_rc 0 "play only"
[ "$(grep -o '"intent":' out.txt | wc -l)" -eq 1 ] || { cat out.txt; fail "expected a single item"; }

# Past the last episode: the prefetches are not_ready, the play still decides the exit status.
run tickets --film the-heiress-returns --episode 12 --prefetch 2 --json
expect_rc 0 "last episode"
expect_out '"episode_no":13,"intent":"prefetch","outcome":"not_ready","status":404'

# A play that cannot be granted (unknown film): exit 1, the item says why.
run tickets --film no-such-film --episode 1
expect_rc 1 "unknown film"
expect_out "not_found"

# Only prefetch items: exit 0 only when every one was granted.
run tickets --film the-heiress-returns --episode 12 --intent prefetch --prefetch 1
expect_rc 1 "prefetch past the end"
run tickets --film the-heiress-returns --episode 2 --intent prefetch --prefetch 1
expect_rc 0 "prefetch only"

# A caller-chosen idempotency key: the repeat is a replay of the first result.
run tickets --film the-heiress-returns --episode 7 --idempotency-key order-20261130-0001 --json
expect_rc 0 "first with key"
first=$(grep -o '"ticket_id":"[^"]*"' out.txt | head -1)
run tickets --film the-heiress-returns --episode 7 --idempotency-key order-20261130-0001 --json
expect_rc 0 "repeat with key"
expect_out '"replayed":true'
grep -q -- "$first" out.txt || fail "the replay returned another ticket than $first"

# config: the organisation's limits.
run config --json
expect_rc 0 "config"
expect_out '"playback":6000'

# Usage errors exit 2 and name the problem; --help exits 0 on every command.
run tickets --film the-heiress-returns
expect_rc 2 "missing --episode"
expect_err "--episode is required"
run tickets --film the-heiress-returns --episode 0
expect_rc 2 "episode 0"
run tickets --film the-heiress-returns --episode 1 --user u-1
expect_rc 2 "partial viewer"
run tickets --film the-heiress-returns --episode 1 --idempotency-key "has space"
expect_rc 2 "invalid idempotency key"
run tickets --film the-heiress-returns --episode 1 --policy eager
expect_rc 2 "unknown policy"
run tickets --film the-heiress-returns --episode 1 --base-url ftp://127.0.0.1:1
expect_rc 2 "base URL that is not http(s)"
expect_err "base_url must be an http"
run tickets --film $'\xff' --episode 1
expect_rc 2 "film that is not UTF-8"
run tickets --film "" --episode 1
expect_rc 2 "empty film"
expect_err "wandura tickets: --film: must not be empty"
run tickets --film the-heiress-returns --episode 1 --viewer-ref ""
expect_rc 2 "empty viewer_ref"
expect_err "\-\-viewer-ref: must not be empty"
run config --api-key --json
expect_rc 2 "an option taken for --api-key's value"
expect_err "wandura config: --api-key: value missing: got the option --json"
run frobnicate
expect_rc 2 "unknown command"
run emulator
expect_rc 2 "emulator without --port"
for cmd in tickets config emulator; do
  run "$cmd" --help
  expect_rc 0 "$cmd --help"
  expect_out "usage: wandura $cmd"
done
run --help
expect_rc 0 "--help"
expect_out "usage: wandura \[options\] command"
run help
expect_rc 0 "help"
expect_out "usage: wandura \[options\] command"
# Usage errors read the same in every command: "PROGRAM: what is wrong", then where the options are.
run tickets --film the-heiress-returns --episode 1 --frobnicate
expect_rc 2 "unknown option"
expect_err "^wandura tickets: .*--frobnicate"
expect_err "^Run \"wandura tickets --help\" for its options."
run emulator --port 0 --threads 0
expect_rc 2 "emulator --threads 0"
expect_err "^wandura emulator: --threads: expected a whole number from 1 to 256, got \"0\""
# What the user typed is quoted with its control bytes and non-ASCII bytes as \xHH, never raw: an unknown option
# holding a terminal escape (retitle the window) and a byte that is not UTF-8, in each command and in the
# emulator's own command line, and a value that CLI11 quotes in its own words.
raw_bytes() { LC_ALL=C grep -q $'[\x1b\x07\xff]' err.txt; }
for cmd in config "tickets --film the-heiress-returns --episode 1" "emulator --port 0"; do
  # shellcheck disable=SC2086
  run $cmd $'--x\x1b]0;title\x07\xff'
  expect_rc 2 "$cmd with an option holding control bytes"
  ! raw_bytes || { cat -v err.txt >&2; fail "$cmd: argument bytes reached stderr raw"; }
  expect_err '^wandura [a-z]*: unexpected argument: --x\\x1b\]0;title\\x07\\xff$'
done
run tickets --film the-heiress-returns --episode 1 --policy $'\x1b[2J\xff'
expect_rc 2 "a --policy holding control bytes"
! raw_bytes || { cat -v err.txt >&2; fail "--policy: argument bytes reached stderr raw"; }
expect_err '^wandura tickets: --policy: .*\\x1b\[2J\\xff'
run help $'\x1b[2J'
expect_rc 2 "help of a command holding control bytes"
expect_err '^wandura: help: no command named "\\x1b\[2J"$'
( unset WANDURA_API_KEY; set +e; "$wandura" config >out.txt 2>err.txt; echo $? >rc.txt )
[ "$(cat rc.txt)" -eq 2 ] || fail "no API key: exit $(cat rc.txt), expected 2"
grep -q "no API key" err.txt || fail "no API key: message"

# A key with CR LF would add a header line of its own ("X: 1"): refused with exit 2, nothing reaches the server
# (the emulator counts every API response, 401s included).
responses() { curl -s "$WANDURA_BASE_URL/_emulator/stats" | grep -o '"responses":{[^}]*}'; }
before=$(responses)
run config --api-key $'k\r\nX: 1'
expect_rc 2 "key with CR LF"
expect_err "API key must not contain control characters"
# Any other control byte would reach the wire too and draw a 400: refused the same way.
run config --api-key $'k\x01X'
expect_rc 2 "key with a control byte"
expect_err "API key must not contain control characters"
( export WANDURA_API_KEY=$'k\nX: 1'; set +e; "$wandura" tickets --film the-heiress-returns --episode 1 >out.txt \
    2>err.txt; echo $? >rc.txt )
[ "$(cat rc.txt)" -eq 2 ] || { cat err.txt; fail "key with LF from the environment: exit $(cat rc.txt)"; }
run tickets --film the-heiress-returns --episode 1 --idempotency-key $'order-1\r\nX: 1'
expect_rc 2 "idempotency key with CR LF"
[ "$(responses)" = "$before" ] || fail "the server saw a request: $before -> $(responses)"

# An argument nobody takes is named, even when a required option or the command is missing too.
run tickets --frobnicate
expect_rc 2 "unknown option before the required ones"
expect_err "^wandura tickets: .*--frobnicate"
run --frobnicate
expect_rc 2 "unknown option without a command"
expect_err "^wandura: .*--frobnicate"
run frobnicate
expect_rc 2 "unknown command"
expect_err "^wandura: .*frobnicate"
# ... but never the value of an option: the key after a misplaced or mistyped --api-key stays off stderr.
for args in "--api-key s3cr3t-key config" "--api-key=s3cr3t-key config" "config --api-kye s3cr3t-key" \
  "config --api-kye=s3cr3t-key" "tickets --film the-heiress-returns --episode 1 -- --api-key s3cr3t-key"; do
  # shellcheck disable=SC2086
  run $args
  expect_rc 2 "$args"
  expect_err "--api-k"
  ! grep -q s3cr3t err.txt || { cat err.txt >&2; fail "$args: the key reached stderr"; }
done

# `wandura help COMMAND` is that command's help; an unknown command there is a usage error.
for cmd in tickets config emulator; do
  run help "$cmd"
  expect_rc 0 "help $cmd"
  expect_out "usage: wandura $cmd"
done
run help frobnicate
expect_rc 2 "help of an unknown command"
expect_err "^wandura: help: no command named \"frobnicate\""
run frobnicate --film x
expect_rc 2 "an unknown command"
expect_err "^wandura: no command named \"frobnicate\"$"
run $'\x1b[2J'
expect_rc 2 "a command name holding control bytes"
expect_err '^wandura: no command named "\\x1b\[2J"$'

# A connection flag given an empty value ("$UNSET_VARIABLE") is refused, never read as left out: the call would
# otherwise go to $WANDURA_BASE_URL, or the default server, with $WANDURA_API_KEY.
before=$(responses)
for flag in --base-url --api-key --ca-bundle; do
  run config "$flag" ""
  expect_rc 2 "empty $flag"
  expect_err "^wandura config: $flag: must not be empty"
done
[ "$(responses)" = "$before" ] || fail "an empty flag still sent a request: $before -> $(responses)"

# Output that cannot be written (a full disk, a closed stdout) fails the run: exit 1 and one line on stderr, never
# a silent 0 with the tickets lost.
for cmd in "tickets --film the-heiress-returns --episode 3" "config" "config --json" "--help"; do
  # shellcheck disable=SC2086
  set +e; "$wandura" $cmd >/dev/full 2>err.txt; rc=$?; set -e
  expect_rc 1 "$cmd to a full disk"
  expect_err "^wandura: cannot write the output to stdout: No space left on device"
  # shellcheck disable=SC2086
  set +e; "$wandura" $cmd >&- 2>err.txt; rc=$?; set -e
  expect_rc 1 "$cmd to a closed stdout"
  expect_err "^wandura: cannot write the output to stdout"
done

# The emulator's address line too: a script waiting for it must not wait for ever on a server nobody learns the
# port of. It stops at once, exit 1, one line on stderr (timeout's 124 if it went on serving).
set +e; timeout 20 "$wandura" emulator --port 0 >/dev/full 2>err.txt; rc=$?; set -e
expect_rc 1 "emulator to a full disk"
expect_err "^wandura emulator: cannot write the output to stdout: No space left on device"
[ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt >&2; fail "emulator to a full disk: expected one line on stderr"; }

# --version: the project's version from the build, then the libcurl and OpenSSL in use.
run --version
expect_rc 0 "--version"
expect_out "^wandura $version\$"
expect_out "^libcurl [0-9]"
expect_out "^OpenSSL [0-9]"
# `wandura emulator --version` is the emulator's own command line: the same version line, exit 0.
run emulator --version
expect_rc 0 "emulator --version"
expect_out "^wandura $version\$"

# What the server said about a failed call reaches the user: its text for humans and its request id on a line of
# their own (the code is on the error line), and in --json.
run config --api-key not-a-key
expect_rc 1 "unknown key"
expect_err "^wandura config: get_config: .*HTTP 401 code=unauthorized"
expect_err '^wandura config: the server said: Missing or unknown API key\. (request_id=req_[a-z0-9]*)$'
run config --api-key not-a-key --json
expect_rc 1 "unknown key, --json"
said='"reason":"","server_message":"Missing or unknown API key\.","request_id":"req_[a-z0-9]*"'
expect_out "\"error_code\":\"unauthorized\",$said,\"attempts\":1}}\$"

# Two scripted 503s (faults in the emulator's config file): two WARN lines on stderr, three attempts, exit 0.
cat >faults.json <<'JSON'
{"faults":[{"path":"/v1/playback/tickets","kind":"status","status":503,"retry_after":1,"count":2}]}
JSON
start_emulator --config faults.json
run tickets --film the-heiress-returns --episode 1 --unlocked-through 3 --json --base-url "$url"
expect_rc 0 "play after two 503s"
expect_err "^WARN retry 1/3 in [0-9]* ms: HTTP 503 code=service_unavailable"
expect_err "^WARN retry 2/3 in [0-9]* ms: HTTP 503 code=service_unavailable"
[ "$(grep -c '^WARN retry' err.txt)" -eq 2 ] || { cat err.txt; fail "expected exactly two WARN lines"; }
expect_out '"attempts":3,"replayed":false}'
expect_out '"episode_no":1,"intent":"play","outcome":"granted","status":200'

# A prefetch item the client cannot read (emulator fault unreadable_item): the item fails alone with the SDK's
# words for why, in the table and in --json; the play is granted, so the exit status is 0.
cat >unreadable.json <<'JSON'
{"faults":[{"path":"/v1/playback/tickets","kind":"unreadable_item","item":1,"count":2}]}
JSON
start_emulator --config unreadable.json
run tickets --film the-heiress-returns --episode 1 --unlocked-through 3 --base-url "$url"
expect_rc 0 "play granted, one prefetch unreadable"
expect_out '^the-heiress-returns *2  prefetch  failed *0  unreadable_item: items\[1\]\.status: '
[ "$(grep -c ' granted ' out.txt)" -eq 2 ] || { cat out.txt; fail "expected the play and one prefetch granted"; }
run tickets --film the-heiress-returns --episode 4 --unlocked-through 6 --json --base-url "$url"
expect_rc 0 "play granted, one prefetch unreadable, --json"
expect_out '"episode_no":5,"intent":"prefetch","outcome":"failed","status":0,"reused":false,"error_code":"unreadable_item","detail":"items\[1\]\.status: '

# Text from the server reaches the terminal without its control bytes: an organisation id holding ESC sequences
# (recolour, retitle the window) is printed as \x1b, and --json escapes it as JSON does.
cat >esc.json <<'JSON'
{"orgs":[{"id":"org\u001b[31mred\u001b]0;title\u0007","keys":["test-key"]}]}
JSON
start_emulator --config esc.json
run config --base-url "$url"
expect_rc 0 "config of an org id with ESC"
! grep -q $'\x1b' out.txt || { cat -v out.txt; fail "an ESC byte from the server reached the terminal"; }
expect_out '^organisation: org\\x1b\[31mred\\x1b\]0;title\\x07$'
run config --base-url "$url" --json
expect_rc 0 "config --json of an org id with ESC"
expect_out '"org_id":"org\\u001b\[31mred\\u001b\]0;title\\u0007"'

# What the server names (an organisation id, an error code) reaches the terminal one line each, control bytes
# (line breaks, a terminal escape) written as \xHH, while --json keeps the text as the server sent it.
cat >hostile.json <<'JSON'
{"orgs":[{"id":"org\u001b]0;title\u0007\nforged row","keys":["test-key"]}],
 "faults":[{"path":"/v1/config","kind":"status","status":503,"error_code":"x\nforged line","count":1}]}
JSON
start_emulator --config hostile.json
run config --base-url "$url"
expect_rc 0 "config after one 503"
expect_out '^organisation: org\\x1b\]0;title\\x07\\x0aforged row$'
! grep -q '^forged' out.txt || { cat out.txt; fail "a server's line break added a row to the table"; }
! grep -q $'\x1b' out.txt || { cat out.txt; fail "a server's terminal escape reached stdout"; }
expect_err '^WARN retry 1/[0-9]* in [0-9]* ms: HTTP 503 code=x\\x0aforged line'
! grep -q '^forged' err.txt || { cat err.txt; fail "a server's line break split a WARN line"; }
run config --json --base-url "$url"
expect_rc 0 "config --json"
expect_out '"org_id":"org\\u001b\]0;title\\u0007\\nforged row"'

# A server's error_code of 100 kB: the --json error line keeps its first 200 bytes and marks the cut with "...", as
# the text output does, and stays one bounded line of JSON.
zs() { head -c "$1" /dev/zero | tr '\0' z; }
printf '{"faults":[{"path":"/v1/config","kind":"status","status":400,"error_code":"%s","count":1}]}\n' "$(zs 100000)" \
  >big.json
start_emulator --config big.json
run config --json --base-url "$url"
expect_rc 1 "config --json of a 100 kB error_code"
[ "$(wc -l <out.txt)" -eq 1 ] || { cat out.txt; fail "the --json error is not one line"; }
[ "$(wc -c <out.txt)" -lt 2000 ] || fail "the --json error line is $(wc -c <out.txt) bytes"
said='"reason":"","server_message":"Injected by an emulator fault rule\.","request_id":"req_[a-z0-9]*"'
expect_out "^{\"error\":{.*,\"error_code\":\"$(zs 200)\.\.\.\",$said,\"attempts\":1}}\$"

echo "cli tickets: all checks passed"
