#!/usr/bin/env bash
# Ops/bench/bench-noisy-neighbour.sh: the noisy-neighbour benchmark: a victim tenant's ack
# latency measured alone and while an attacker tenant floods the relay each way a tenant can within the limits, in one run.
#
#   bash Ops/bench/bench-noisy-neighbour.sh            # full: 300 rounds per phase (about 10-15 minutes)
#   bash Ops/bench/bench-noisy-neighbour.sh --quick    # 15 rounds per phase, shorter floods (2-4 minutes; CI's log)
#   bash Ops/bench/bench-noisy-neighbour.sh --write    # also write Ops/results/noisy-neighbour-latest.txt
#   bash Ops/bench/bench-noisy-neighbour.sh --check    # exit 1 when a phase missed the target
#   bash Ops/bench/bench-noisy-neighbour.sh --only a,d # the alone phase, then only these floods
#
# Steps, each fatal, in a temporary folder; everything started is stopped on exit (also on failure):
#   1. the relay binary copied into the folder (others may rebuild .build/debug while this runs; a binary that is
#      missing or still being written is waited for, a minute at a time); a virtualenv with ./Protocol/python
#      (and zstandard) as the scenarios make it (Ops/scenarios/lib.sh)
#   2. a fresh embedded PostgreSQL: migrate, the tenant files of circl (the attacker) and familyportal (the
#      victim) synced, a credential for each; `pushrelay serve --apns-simulator` on a free port with every other
#      setting at its default (rate limits, connection caps, frame limits: the limits the floods stay within)
#   3. written straight into the database (a bulk load, as Ops/scenarios/outage-apns.sh does): NOISY_USERS circl
#      users with one device each (nn-u00000 ...), and NOISY_DELIVERIES delivery rows over the last 47 hours (nine
#      in ten circl's, one in ten familyportal's) for the heavy reads; then ANALYZE
#   4. Ops/bench/noisy_neighbour.py: the victim registers its devices, measures alone, then during each flood in
#      turn (a: a job backlog, b: SEND(wait)s in flight, c: SENDs to 10,000 users, d: heavy reads, e: registrations,
#      i: 2,000 idle connections, f: inflating frames, g: inflating PINGs, h: SENDs of ~2.1 million loc_args), each
#      flood stopped and the relay drained before the next, then alone again; then the relay must answer a HELLO again
#      (within 120 s).
#      Its docstring says each flood, the phases' timing and the target
#   5. SIGTERM to the relay (it must exit 0); the embedded PostgreSQL is stopped
#
# Output: the relay's and the run's description, a line per phase as it ends, then the table: per phase, each
# victim operation's p50/p99 (ms) and its p99's ratio to alone, the relay's RSS peak and bound, the relay's and
# PostgreSQL's CPU, and whether the target held (p99 <= 3 x alone, no failed request, SEND(wait) < 1 s, RSS within
# the bound); a line per phase on the attacker's answers and the misses. With --write the same report goes to
# Ops/results/noisy-neighbour-latest.txt (or NOISY_RESULTS).
#
# Exit status: 0 when the run completed, whether targets were met or not (the figures are the product); 1 with
# --check when a phase missed the target; 2 when the relay crashed, did not answer again within 120 s of the last
# flood, did not stop cleanly on SIGTERM, or the harness failed (1 when a setup step failed).
#
# Environment:
#   PUSHRELAY_BIN       the relay binary (default .build/debug/pushrelay; this script never builds it)
#   PYTHON              the python to build the virtualenv from (default python3)
#   NOISY_USERS         the attacker's users with a device (default 10000)
#   NOISY_DELIVERIES    delivery rows written for the heavy reads (default 200000)
#   NOISY_RESULTS       the report file of --write (default Ops/results/noisy-neighbour-latest.txt)
#   NOISY_ARGS          more arguments of noisy_neighbour.py (--rounds N, --window S, --ratio R, --floor-ms M, ...)
#   NOISY_BIN_WAIT      minutes to wait for a binary that is missing or being written (default 10)
#   NOISY_KEEP_DIR      copy the relay log there at the end
set -euo pipefail

NAME="bench-noisy-neighbour.sh"
QUICK=""
CHECK=""
WRITE=""
ONLY=""
while [ "$#" -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --check) CHECK=1 ;;
    --write) WRITE=1 ;;
    --only) ONLY="$2"; shift ;;
    --only=*) ONLY="${1#--only=}" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$NAME: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$QUICK" ]; then TIMEOUT="${NOISY_TIMEOUT:-900}"; else TIMEOUT="${NOISY_TIMEOUT:-2400}"; fi
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scenarios/lib.sh"
cd "$ROOT"
USERS="${NOISY_USERS:-10000}"
DELIVERIES="${NOISY_DELIVERIES:-200000}"
RESULTS="${NOISY_RESULTS:-$ROOT/Ops/results/noisy-neighbour-latest.txt}"
SOURCE_BIN="$BIN"

# --- 1. the binary (a copy), python ----------------------------------------------------------------
step="binary"
# Waits until SOURCE_BIN exists and has not changed for 3 s (a link in progress rewrites it).
wait_for_binary() {
    local waited=0 before after
    while :; do
        if [ -x "$SOURCE_BIN" ]; then
            before="$(stat -c '%s:%Y' "$SOURCE_BIN" 2>/dev/null || true)"
            sleep 3
            after="$(stat -c '%s:%Y' "$SOURCE_BIN" 2>/dev/null || true)"
            if [ -n "$before" ] && [ "$before" = "$after" ]; then return 0; fi
        fi
        [ "$waited" -lt "${NOISY_BIN_WAIT:-10}" ] ||
            fail "no finished relay binary at $SOURCE_BIN after ${waited} minutes (build it, or set PUSHRELAY_BIN)"
        say "the relay binary at $SOURCE_BIN is missing or being written; waiting a minute"
        sleep 60
        waited=$((waited + 1))
    done
}
wait_for_binary
fl_init
keep_log() {
    if [ -n "${NOISY_KEEP_DIR:-}" ] && [ -n "${TMP:-}" ]; then
        mkdir -p "$NOISY_KEEP_DIR"
        cp "$TMP"/relay-*.log "$NOISY_KEEP_DIR"/ 2>/dev/null || true
    fi
}
for attempt in 1 2 3; do
    BUILT="$(date -u -r "$SOURCE_BIN" +%FT%H:%MZ)"
    cp "$SOURCE_BIN" "$TMP/pushrelay"
    if VERSION="$("$TMP/pushrelay" --version 2>/dev/null)"; then break; fi
    [ "$attempt" -lt 3 ] || fail "the copy of $SOURCE_BIN does not run (--version failed three times)"
    say "the copy of $SOURCE_BIN does not run yet (a build in progress?); waiting a minute"
    sleep 60
    wait_for_binary
done
BIN="$TMP/pushrelay"
case "$SOURCE_BIN" in */release/*) BUILD=release ;; */debug/*) BUILD=debug ;; *) BUILD="unknown build" ;; esac
say "relay: $VERSION ($BUILD build, copied from $SOURCE_BIN)"

step="python-env"
log "python client"
python_env
(cd "$TMP" && "$PY" -c 'import pushrelay_client, zstandard; print("pushrelay_client", pushrelay_client.__version__, "zstandard", zstandard.__version__)')

# --- 2. the relay ----------------------------------------------------------------------------------
step="relay-setup"
log "embedded PostgreSQL, circl and familyportal, a credential each, the relay"
mkdir -p "$TMP/tenants"
cp Tenants/circl.yaml Tenants/familyportal.yaml "$TMP/tenants/"
fl_admin migrate >/dev/null
fl_admin tenant sync "$TMP/tenants"
ATTACKER_SECRET="$(fl_admin credential issue circl --name noisy-attacker --secret-only)"
VICTIM_SECRET="$(fl_admin credential issue familyportal --name noisy-victim --secret-only)"
[[ "$ATTACKER_SECRET" =~ ^prk_[A-Za-z0-9_-]+$ ]] && [[ "$VICTIM_SECRET" =~ ^prk_[A-Za-z0-9_-]+$ ]] ||
    fail "credential issue --secret-only printed no bare secret"
step="relay-start"
relay_start main --apns-simulator --sim-dir "$TMP/sim" --data-dir "$TMP/pg" --tenants "$TMP/tenants" --metrics-listen ""
address="${RELAY_ADDRESS[main]}"

# --- 3. the attacker's users and the delivery history, in bulk ------------------------------------
step="bulk-load"
log "$USERS circl users with a device, $DELIVERIES delivery rows (a bulk load)"
load_started=$(date +%s)
fl_psql "INSERT INTO devices (tenant_id, slot, user_id, token, platform, environment, topics, registered_at)
         SELECT 'circl', '[\"token\",\"' || token || '\"]', user_id, token, 'ios', 'production', '{}', now()
         FROM (SELECT encode(sha256(convert_to('nn-' || i, 'UTF8')), 'hex') AS token,
                      'nn-u' || lpad(i::text, 5, '0') AS user_id
               FROM generate_series(0, $USERS - 1) AS i) AS d" >/dev/null
fl_psql "SELECT pushrelay_ensure_delivery_partition((now() AT TIME ZONE 'UTC')::date - k) FROM generate_series(0, 2) AS k" \
    >/dev/null
fl_psql "INSERT INTO deliveries (tenant_id, job_id, user_id, token, provider_message_id, outcome, attempt, sent_at, answered_at,
                                 latency_ms, notification_type)
         SELECT tenant, md5(tenant || (i / 1000))::uuid::text, user_id,
                encode(sha256(convert_to(user_id, 'UTF8')), 'hex'), md5(i::text)::uuid::text, 'delivered', 1,
                sent_at, sent_at + interval '3 milliseconds', 3,
                CASE WHEN tenant = 'circl' THEN 'message' ELSE 'chat_message' END
         FROM (SELECT i, CASE WHEN i % 10 = 9 THEN 'familyportal' ELSE 'circl' END AS tenant,
                      CASE WHEN i % 10 = 9 THEN 'fp-old-' || (i % 1000) ELSE 'nn-u' || lpad((i % $USERS)::text, 5, '0') END
                          AS user_id,
                      now() - interval '47 hours' * (1 - i::float8 / $DELIVERIES) AS sent_at
               FROM generate_series(0, $DELIVERIES - 1) AS i) AS r" >/dev/null
fl_psql "ANALYZE devices; ANALYZE deliveries" >/dev/null
counts="$(fl_psql "SELECT (SELECT count(*) FROM devices WHERE tenant_id = 'circl'), (SELECT count(*) FROM deliveries)")"
say "loaded in $(($(date +%s) - load_started))s: circl devices and delivery rows: $counts"

# --- 4. the benchmark ------------------------------------------------------------------------------
step="bench"
log "Ops/bench/noisy_neighbour.py against $address"
# What was measured: the binary's own time (it may be older than HEAD, or built from a tree with changes not committed).
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
changed="$(git -C "$ROOT" status --porcelain -- Sources Package.swift 2>/dev/null | wc -l)"
label="$VERSION, $BUILD build of $BUILT (HEAD $commit$([ "$changed" -eq 0 ] || echo ", $changed files changed under Sources/ then")), run $(date -u +%FT%H:%MZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
bench_args=(--address "$address" --relay-pid "${RELAY_PID[main]}" --pg-pid-file "$TMP/pg/postmaster.pid"
    --psql "host=$TMP/pg port=5432 user=pushrelay dbname=pushrelay"
    --attacker-credential "$ATTACKER_SECRET" --victim-credential "$VICTIM_SECRET" --users "$USERS" --label "$label")
[ -n "$QUICK" ] && bench_args+=(--quick)
[ -n "$CHECK" ] && bench_args+=(--check)
[ -n "$WRITE" ] && bench_args+=(--results "$RESULTS")
[ -n "$ONLY" ] && bench_args+=(--only "$ONLY")
# shellcheck disable=SC2206
[ -n "${NOISY_ARGS:-}" ] && bench_args+=(${NOISY_ARGS})
set +e
(cd "$TMP" && timeout --kill-after=10 "$(time_left)" "$PY" "$ROOT/Ops/bench/noisy_neighbour.py" "${bench_args[@]}")
bench_rc=$?
set -e
[ "$bench_rc" -ne 124 ] || echo "$NAME: the benchmark ran into the script's ${TIMEOUT}s deadline" >&2

# --- 5. stop ---------------------------------------------------------------------------------------
step="relay-stop"
keep_log
relay_stop main 60
relay_status="${RELAY_STATUS[main]}"
cluster_stop
if [ -n "$relay_status" ] && [ "$relay_status" -ne 0 ]; then
    echo "$NAME: the relay exited with status $relay_status after SIGTERM (expected 0)" >&2
    [ "$bench_rc" -ne 0 ] || bench_rc=2
fi
if [ "$bench_rc" -eq 0 ]; then step="done"; else step="bench"; fi
printf '\n%s: %s in %ds\n' "$NAME" "$([ "$bench_rc" -eq 0 ] && echo OK || echo "FAILED (exit $bench_rc)")" "$(elapsed)"
exit "$bench_rc"
