#!/usr/bin/env bash
# Ops/scenarios/hostile-clients.sh: hostile clients against a real `pushrelay serve`, with accounting.
#
#   bash Ops/scenarios/hostile-clients.sh
#
# Steps, each fatal:
#   1. a virtualenv in a temporary folder with ./Protocol/python installed (as Ops/scenarios/test-python.sh makes it;
#      falls back to the system python3 when venv is unavailable)
#   2. a relay on a fresh embedded PostgreSQL: tenant sync, a credential for circl, `pushrelay serve
#      --apns-simulator --write-stall-timeout 5` on a free port
#   3. Ops/scenarios/hostile_clients.py against it: integer extremes and control characters in every field of every
#      request, malformed frames, lying zstd bodies, floods that never read (100 MiB after HELLO, 50 MiB
#      before it), a credential revoked while its connection is open, log forging. After each attack the
#      relay must still answer a fresh HELLO + PING; a relay that died is restarted for the next attack
#      (and the run fails). Then every job a SEND accepted must finish within 60 s.
#   4. SIGTERM to the relay; the embedded PostgreSQL is stopped
#
# Output: one line `attack NAME: held|NOT HELD (detail)` per attack, then the accounting (attacks tried,
# held, failed; relay RSS before / peak / after; relay deaths; every accepted job finished) and a last
# line `hostile: N passed, N failed`. The exit status is non-zero when an attack was not held, the relay
# died, or an accepted job did not finish.
#
# Environment:
#   PUSHRELAY_BIN        the relay binary (default .build/debug/pushrelay; build it first)
#   PYTHON               the python to build the virtualenv from (default python3)
#   HOSTILE_KEEP_DIR     copy the relay logs there at the end
#   HOSTILE_ONLY         comma-separated attack names to run (debugging; see ATTACKS in hostile_clients.py)
#   HOSTILE_VERBOSE      non-empty: one line per case of every attack
set -euo pipefail

NAME=hostile-clients.sh
TIMEOUT=600
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
STALL_TIMEOUT=5
# The Python part keeps itself within ATTACK_BUDGET seconds of attacks (later ones are skipped), then
# waits up to 60 s for jobs; PYTHON_TIMEOUT is the hard stop around it.
ATTACK_BUDGET=200
PYTHON_TIMEOUT=290

TMP="$(mktemp -d)"
# The embedded PostgreSQL runs as an unprivileged user when we are root: it must reach $TMP/pg.
chmod 755 "$TMP"
SUMMARY=""

# Makes the relay that hostile_clients.py restarted after a death (its pid in relay.pid) the one relay_stop
# stops, after collecting our own first relay, which died.
adopt_restarted_relay() {
    [ -s "$TMP/relay.pid" ] || return 0
    wait "${RELAY_PID[main]}" 2>/dev/null || true
    RELAY_PID[main]="$(head -n 1 "$TMP/relay.pid")"
    rm -f "$TMP/relay.pid"
}

on_exit() {
    local rc=$? file
    trap - EXIT
    if [ -n "${RELAY_PID[main]:-}" ]; then
        adopt_restarted_relay
        relay_stop main
    fi
    cluster_stop
    if [ -n "${HOSTILE_KEEP_DIR:-}" ]; then
        mkdir -p "$HOSTILE_KEEP_DIR"
        cp "$TMP"/relay*.log "$TMP"/hostile.txt "$HOSTILE_KEEP_DIR"/ 2>/dev/null || true
    fi
    if [ "$rc" -ne 0 ]; then
        # The first relay's log and the last restarted one's (if any).
        for file in "$TMP/relay-main.log" "$(ls -v "$TMP"/relay-[0-9]*.log 2>/dev/null | tail -n 1)"; do
            [ -f "$file" ] || continue
            # cat -v: the log may hold the attacks' control characters.
            printf '\nhostile-clients.sh: last lines of %s:\n' "$(basename "$file")" >&2
            tail -n 15 "$file" | cut -c 1-300 | cat -v >&2
        done
        printf '\nhostile-clients.sh: FAILED at step "%s" (exit %d) after %ds\n' "$step" "$rc" "$(elapsed)" >&2
    fi
    rm -rf "$TMP"
    # The summary is the last line of the output, whatever happened before it.
    if [ -n "$SUMMARY" ]; then echo "$SUMMARY"; fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. python environment -----------------------------------------------------------------------
step="python-env"
log "$step"
python_env
# Run from $TMP so Python imports the installed package, not the source folder.
(cd "$TMP" && "$PY" -c 'import pushrelay_client, zstandard, sys; print("pushrelay_client", pushrelay_client.__version__, "zstandard", zstandard.__version__, "on python", sys.version.split()[0])')

# --- 2. a relay ----------------------------------------------------------------------------------
step="relay-setup"
log "relay: tenants, credential, serve"
[ -x "$BIN" ] || fail "no relay binary at $BIN (swift build first, or set PUSHRELAY_BIN)"
"$BIN" admin migrate --data-dir "$TMP/pg"
"$BIN" admin tenant sync "$ROOT/Tenants" --data-dir "$TMP/pg"
CIRCL_SECRET="$("$BIN" admin credential issue circl --name hostile-clients --secret-only --data-dir "$TMP/pg")"
[[ "$CIRCL_SECRET" =~ ^prk_[A-Za-z0-9_-]+$ ]] || fail "credential issue circl --secret-only printed no bare secret"
# The well-behaved client's own credential: a flood spends its credential's request limit, not another's.
PROBE_SECRET="$("$BIN" admin credential issue circl --name hostile-probe --secret-only --data-dir "$TMP/pg")"

step="relay-start"
# No operator HTTP port: the default 127.0.0.1:9411 may belong to another relay on this machine.
SERVE_ARGS=(--apns-simulator --sim-dir "$TMP/sim" --data-dir "$TMP/pg" --tenants "$ROOT/Tenants" --metrics-listen ""
    --write-stall-timeout "$STALL_TIMEOUT")
stall_arg="$STALL_TIMEOUT"
# For restarts by the Python part after a death: the argv relay_start runs, NUL-separated (an argument may be
# empty).
printf '%s\0' "$BIN" serve --listen 127.0.0.1:0 --ready-file "$TMP/ready-main" "${SERVE_ARGS[@]}" >"$TMP/serve.args"
relay_start main "${SERVE_ARGS[@]}"
address="${RELAY_ADDRESS[main]}"

# --- 3. the attacks ------------------------------------------------------------------------------
step="attacks"
log "Ops/scenarios/hostile_clients.py against $address"
set +e
(cd "$TMP" && timeout --kill-after=10 "$PYTHON_TIMEOUT" "$PY" "$ROOT/Ops/scenarios/hostile_clients.py" \
    --address "$address" --tenant circl --credential "$CIRCL_SECRET" --probe-credential "$PROBE_SECRET" \
    --relay-pid "${RELAY_PID[main]}" --relay-log "$TMP/relay-main.log" --pid-file "$TMP/relay.pid" \
    --serve-args "$TMP/serve.args" --bin "$BIN" --data-dir "$TMP/pg" \
    --write-stall-timeout "$stall_arg" --budget "$ATTACK_BUDGET" ${HOSTILE_ONLY:+--only "$HOSTILE_ONLY"} ${HOSTILE_VERBOSE:+--verbose}) |
    tee "$TMP/hostile.txt"
attacks_rc=${PIPESTATUS[0]}
set -e
SUMMARY="$(grep -E '^hostile: [0-9]+ passed, [0-9]+ failed$' "$TMP/hostile.txt" | tail -n 1 || true)"
if [ -z "$SUMMARY" ]; then
    [ "$attacks_rc" -eq 124 ] && echo "hostile-clients.sh: the attacks ran into the ${PYTHON_TIMEOUT}s limit" >&2
    SUMMARY="hostile: 0 passed, 1 failed"
    [ "$attacks_rc" -ne 0 ] || attacks_rc=1
fi

# --- 4. stop -------------------------------------------------------------------------------------
step="relay-stop"
log "stopping the relay"
adopt_restarted_relay
relay_stop main
relay_status="${RELAY_STATUS[main]}"
if [ -n "$relay_status" ] && [ "$relay_status" -ne 0 ]; then
    echo "hostile-clients.sh: the relay exited with status $relay_status after SIGTERM (expected 0)" >&2
    passed="$(sed -E 's/^hostile: ([0-9]+) passed.*/\1/' <<<"$SUMMARY")"
    failed="$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$SUMMARY")"
    SUMMARY="hostile: $passed passed, $((failed + 1)) failed"
    [ "$attacks_rc" -ne 0 ] || attacks_rc=1
elif [ -n "$relay_status" ]; then
    echo "hostile-clients.sh: the relay stopped cleanly after SIGTERM"
else
    echo "hostile-clients.sh: the relay restarted by hostile_clients.py stopped (its exit status is not ours to collect)"
fi
cluster_stop

if [ "$attacks_rc" -eq 0 ]; then step="done"; else step="attacks"; fi
printf '\nhostile-clients.sh: %s in %ds\n' "$([ "$attacks_rc" -eq 0 ] && echo OK || echo "FAILED (exit $attacks_rc)")" \
    "$(elapsed)"
exit "$attacks_rc"
