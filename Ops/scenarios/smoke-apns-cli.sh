#!/usr/bin/env bash
# Ops/scenarios/smoke-apns-cli.sh: checks the two engine commands end to end, as an operator runs them:
# `pushrelay apns-sim` in the background and `pushrelay apns push` against it.
#
#   bash Ops/scenarios/smoke-apns-cli.sh [PUSHRELAY_BINARY]     (default: the debug build)
#
# It asserts exit statuses and the outcome lines, never timings:
#   1. 2,000 notifications over 2 connections: exit 0, "delivered 2000".
#   2. a token the simulator knows as unregistered: exit 1, "token_dead Unregistered 1".
#   3. a .p8 file that is not a key: exit non-zero and a message that says what is wrong.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BIN="${1:-$(swift build --show-bin-path)/pushrelay}"
TMP="$(mktemp -d)"
SIM_PID=""
cleanup() {
    if [ -n "$SIM_PID" ]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "smoke-apns-cli: FAIL: $*" >&2; exit 1; }

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/key.p8" 2>/dev/null
DEAD="$(printf 'de%.0s' {1..32})"
"$BIN" apns-sim --port 0 --cert-dir "$TMP/sim" --key "KEY1234567:TEAM123456:$TMP/key.p8" \
    --topic com.example.app --unregistered "$DEAD:1700000000000" >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 100); do
    PORT="$(sed -n 's|.*listening on https://127.0.0.1:\([0-9]*\).*|\1|p' "$TMP/sim.log" | head -n 1)"
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "${PORT:-}" ] || fail "apns-sim did not start: $(cat "$TMP/sim.log")"

push() {
    "$BIN" apns push --endpoint "127.0.0.1:$PORT" --ca-file "$TMP/sim/ca.pem" --key-id KEY1234567 \
        --team-id TEAM123456 --topic com.example.app "$@"
}

set +e
push --p8 "$TMP/key.p8" --token "$(printf 'ab%.0s' {1..32})" --token "$(printf 'cd%.0s' {1..40})" \
    --alert "smoke test" --count 2000 --connections 2 >"$TMP/ok.txt" 2>&1
ok_status=$?
push --p8 "$TMP/key.p8" --token "$DEAD" --payload '{"aps":{"alert":"x"}}' >"$TMP/dead.txt" 2>&1
dead_status=$?
echo "not a key" >"$TMP/bad.p8"
push --p8 "$TMP/bad.p8" --token "$DEAD" --alert x >"$TMP/bad.txt" 2>&1
bad_status=$?
set -e

cat "$TMP/ok.txt"
[ "$ok_status" -eq 0 ] || fail "2000 sends: exit $ok_status"
grep -Eq '^delivered +2000$' "$TMP/ok.txt" || fail "2000 sends: no 'delivered 2000' line"
grep -q 'notifications/s:' "$TMP/ok.txt" || fail "2000 sends: no rate line"
[ "$dead_status" -eq 1 ] || fail "dead token: exit $dead_status, expected 1"
grep -Eq '^token_dead Unregistered +1$' "$TMP/dead.txt" || fail "dead token: $(cat "$TMP/dead.txt")"
[ "$bad_status" -ne 0 ] || fail "bad key file: exit 0"
grep -q 'key is not PEM' "$TMP/bad.txt" || fail "bad key file: unclear error: $(cat "$TMP/bad.txt")"
echo "smoke-apns-cli: OK (delivered 2000 with exit 0; dead token exit 1; bad key: $(tail -n 1 "$TMP/bad.txt"))"
