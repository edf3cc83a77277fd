#!/usr/bin/env bash
# Ops/scenarios/lifecycle.sh: `pushrelay serve` as systemd runs it (Ops/deploy/pushrelay.service), end to end.
#
#   PUSHRELAY_BIN=.build/debug/pushrelay bash Ops/scenarios/lifecycle.sh
#
# Steps, each checked:
#   1. an embedded PostgreSQL made by `admin migrate`, circl's key and credential, `pushrelay apns-sim` answering
#      after LIFECYCLE_LATENCY_MS (8000: longer than the 5 s between samples of
#      the pool gauges, which show when the send is in flight), a relay on its embedded cluster with an operator port
#   2. conventions: `pushrelay --version` is the version of the start log line and of pushrelay_build_info;
#      `promtool check metrics` on the live /metrics finds nothing; process_* and the request counters at zero
#   3. settings that cannot work stop a second `serve` at once, naming the setting: an operator port already
#      taken, a ready_file in a folder that does not exist, max_in_flight 0
#   4. SIGHUP: a tenant file added to the folder is applied, a bad one is logged and changes nothing; the relay
#      keeps running
#   5. SIGTERM to the relay's process only (KillMode=mixed): a SEND waited for is in flight at APNs; the relay
#      exits 0, the send is answered (delivered), and the embedded PostgreSQL the relay started is stopped
#
# Environment: PUSHRELAY_BIN (default .build/debug/pushrelay), LIFECYCLE_LATENCY_MS, LIFECYCLE_TIMEOUT (300 s).
set -euo pipefail

NAME="lifecycle"
TIMEOUT="${LIFECYCLE_TIMEOUT:-300}"
LATENCY_MS="${LIFECYCLE_LATENCY_MS:-8000}"
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fl_init
command -v promtool >/dev/null || fail "promtool is missing (Debian: prometheus; Ops/scripts/install-deps.sh)"
failures=0
RUN="lc$(date +%s)"

# --- 1. a relay on its embedded cluster ----------------------------------------------------------
step="setup"
log "embedded PostgreSQL, circl, the simulator at ${LATENCY_MS} ms, a relay with an operator port"
python_env
fl_setup_database
fl_start_simulator "$LATENCY_MS"
FL_RELAY_ARGS=(--metrics-listen 127.0.0.1:0)
# A soft open-files limit below the hard one, which the relay raises at start (checked in step 2).
own_soft_files="$(ulimit -Sn)"
soft_files="$own_soft_files"
[ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -le 1024 ] || soft_files=1024
ulimit -Sn "$soft_files"
fl_start_relay main
ulimit -Sn "$own_soft_files"
MAIN="${RELAY_PID[main]}"
METRICS="$(sed -n 's/^metrics //p' "$TMP/ready-main")"
[ -n "$METRICS" ] || fail "the ready file names no operator port"
fetch() { "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"; }

# --- 2. version, metrics -------------------------------------------------------------------------
step="conventions"
log "version and /metrics"
version="$("$BIN" --version)"
source_version="$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' "$ROOT/Sources/RelayServer/Operations/RelayVersion.swift")"
fetch "http://$METRICS/metrics" >"$TMP/metrics.txt"
check "pushrelay --version prints the version ($version)" eq "$version" "$source_version"
check "the start line carries it" grep -q "version=$version .*pushrelay: listening" "$TMP/relay-main.log"
check "pushrelay_build_info carries it" grep -qx "pushrelay_build_info{version=\"$version\"} 1" "$TMP/metrics.txt"
# The relay raises its open-files limit to the hard one it inherited, and says what it got.
hard_files="$(ulimit -Hn)"
[ "$hard_files" != unlimited ] || hard_files=18446744073709551615
files_line="$(grep -m1 "open files limit" "$TMP/relay-main.log" || true)"
check "the open-files limit raised from $soft_files to the hard limit and logged: ${files_line#*notice }" \
    eval '[[ "$files_line" == *"now=$hard_files"* && "$files_line" == *"was=$soft_files"* ]]'
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.txt" 2>&1 || true
check "promtool check metrics finds nothing ($(wc -l <"$TMP/promtool.txt") lines)" eq "$(cat "$TMP/promtool.txt")" ""
for family in process_cpu_seconds_total process_resident_memory_bytes process_open_fds process_start_time_seconds; do
    check "$family is there" grep -q "^$family " "$TMP/metrics.txt"
done
check "every request kind counted from zero (unsubscribe_results ok)" \
    grep -qx 'pushrelay_requests_total{method="unsubscribe_results",outcome="ok"} 0' "$TMP/metrics.txt"

# --- 3. settings that cannot work ----------------------------------------------------------------
step="refused-settings"
log "settings that cannot work"
# refused NAME EXPECTED ARGS...: `serve ARGS` exits non-zero, saying EXPECTED, without listening.
refused() {
    local label="$1" expected="$2" status=0
    shift 2
    timeout "$(time_left)" "$BIN" serve --listen 127.0.0.1:0 --data-dir "$TMP/pg" --tenants "" "$@" \
        >"$TMP/refused.log" 2>&1 || status=$?
    check "$label: exit $status, '$expected'" eval '[ "$status" -ne 0 ] && grep -qF -- "$expected" "$TMP/refused.log" && ! grep -q "pushrelay: listening" "$TMP/refused.log"'
}
refused "operator port taken" "metrics_listen $METRICS cannot be opened: address already in use" \
    --metrics-listen "$METRICS"
refused "ready_file unwritable" "ready_file $TMP/no-such-folder/ready cannot be written" \
    --metrics-listen "" --ready-file "$TMP/no-such-folder/ready"
refused "max_in_flight 0" "--max-in-flight: '0' is not a whole number of at least 1" --max-in-flight 0
check "the relay still runs" kill -0 "$MAIN"

# --- 4. SIGHUP -----------------------------------------------------------------------------------
step="sighup"
log "SIGHUP: the tenant files again"
cp "$ROOT/Tenants/familyportal.yaml" "$TMP/tenants/"
kill -HUP "$MAIN"
until grep -q "created=1 .*tenants applied" "$TMP/relay-main.log"; do
    check_deadline
    kill -0 "$MAIN" 2>/dev/null || fail "the relay died of SIGHUP: $(tail -n 5 "$TMP/relay-main.log")"
    sleep 0.2
done
check "a tenant file added is applied on SIGHUP" eval 'fl_admin tenant list | grep -q "^familyportal "'
printf 'id: broken\nnot: [valid\n' >"$TMP/tenants/broken.yaml"
kill -HUP "$MAIN"
until grep -q "tenant files not applied" "$TMP/relay-main.log"; do
    check_deadline
    kill -0 "$MAIN" 2>/dev/null || fail "the relay died of SIGHUP: $(tail -n 5 "$TMP/relay-main.log")"
    sleep 0.2
done
rm "$TMP/tenants/broken.yaml"
check "a bad tenant file is logged, and the relay runs on" kill -0 "$MAIN"

# --- 5. SIGTERM to the main process only ---------------------------------------------------------
step="sigterm"
log "SIGTERM to the relay alone, a SEND in flight"
fl_tool register --address "${RELAY_ADDRESS[main]}" --credential "$CREDENTIAL" --count 1 --run "$RUN" \
    --out "$TMP/devices.tsv" >/dev/null
postgres_before="$(fl_postgres_pid)"
[ -n "$postgres_before" ] || fail "no embedded PostgreSQL running under the relay"
PUSHRELAY_CREDENTIAL="$CREDENTIAL" timeout "$(time_left)" "$BIN" send --relay "${RELAY_ADDRESS[main]}" \
    --tenant circl --type message --user "$RUN-u00000" --value circle_id=7 --value channel_id=3 --title "$RUN" \
    --body "in flight" --wait >"$TMP/send.txt" 2>&1 &
send_pid=$!
# In flight at APNs: the pool's stream gauge (sampled every 5 s, within the simulator's LATENCY_MS) shows it.
until [ "$(fetch "http://$METRICS/metrics" |
    sed -n 's/^pushrelay_pool_streams_in_flight{tenant="circl",environment="production"} \([0-9]*\).*/\1/p')" = 1 ]; do
    check_deadline
    kill -0 "$send_pid" 2>/dev/null || fail "the send ended before it was in flight: $(cat "$TMP/send.txt")"
    sleep 0.3
done
kill -TERM "$MAIN"
status=0
wait "$MAIN" || status=$?
unset "RELAY_PID[main]"
send_status=0
wait "$send_pid" || send_status=$?
check "the relay exits 0 after SIGTERM" eq "$status" 0
check "the send in flight is answered: delivered (exit $send_status)" eval '[ "$send_status" -eq 0 ] && grep -q delivered "$TMP/send.txt"'
# Running, not a zombie (a container's init may not reap the postmaster pg_ctl detached).
running() { ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; }
check "the relay stopped the embedded PostgreSQL it started" \
    eval '[ ! -e "$TMP/pg/postmaster.pid" ] && ! running "$postgres_before"'

step="done"
[ "$failures" -eq 0 ] || fail "$failures checks failed"
printf '\n%s: OK: version, promtool-clean metrics, refused settings, SIGHUP, graceful SIGTERM in %ds\n' "$NAME" "$(elapsed)"
