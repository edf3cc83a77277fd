#!/usr/bin/env bash
# Ops/scenarios/fault-postgres-restart.sh: the embedded PostgreSQL stopped and started again
# (pg_ctl, as the cluster's owner) while a fan-out runs and while a backend keeps sending: the relay
# reconnects by itself; sends made during the outage either wait (answered late) or get a typed error;
# nothing acknowledged is lost: every acknowledged job completes and every device is recorded.
#
#   bash Ops/scenarios/fault-postgres-restart.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. python client, embedded PostgreSQL with circl, `pushrelay apns-sim`, one relay (Ops/scenarios/lib.sh);
#      PG_DEVICES devices registered through the relay
#   2. a backend (Ops/scenarios/fault_tool.py sends) sending single-user Sends, 4 at a time on one connection, no
#      retry, each attempt written down (acked with its job id, or the typed error's code, or a lost connection)
#   3. one Send to every device (the fan-out); when the simulator has answered PG_STOP_PERCENT of it,
#      `pg_ctl stop -m fast`, PG_OUTAGE_SECONDS without a database, `pg_ctl start` with the relay's options
#   4. the backend keeps sending PG_AFTER_SECONDS after the restart, then stops; wait until the fan-out job
#      and every acknowledged single send's job are completed
#   5. the accounting, each line checked: the relay survived and answered sends again after the restart;
#      every send attempt acked or refused with a typed error (UNAVAILABLE or INTERNAL, no lost connection);
#      every acked job completed with its device delivered and recorded; the fan-out: every device recorded
#      once, delivered rows == tokens the simulator answered 200, duplicates within the fan-out's window;
#      and the relay stops gracefully on SIGTERM within 30 s afterwards
#
# Environment:
#   PUSHRELAY_BIN        the relay binary (default .build/debug/pushrelay)
#   PG_DEVICES           fan-out devices (default 6000; at most 10,000)
#   PG_LATENCY_MS        the simulator's answer delay (default 20)
#   PG_STOP_PERCENT      stop PostgreSQL when this share of the fan-out is answered (default 20)
#   PG_OUTAGE_SECONDS    seconds PostgreSQL stays down (default 8)
#   PG_AFTER_SECONDS     seconds the backend keeps sending after the restart (default 20: longer than the store's
#                        15 s call deadline, since a Send that arrived just as PostgreSQL stopped may wait for
#                        it (postgres-nio#657), and all four of the backend's Sends can be such Sends)
#   PG_LOG_LEVEL         the relay's log level (default info)
#   PG_TIMEOUT           seconds before the script gives up (default 600)
set -euo pipefail

NAME="fault-postgres-restart.sh"
TIMEOUT="${PG_TIMEOUT:-600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${PG_DEVICES:-6000}"
LATENCY_MS="${PG_LATENCY_MS:-20}"
STOP_PERCENT="${PG_STOP_PERCENT:-20}"
OUTAGE_SECONDS="${PG_OUTAGE_SECONDS:-8}"
AFTER_SECONDS="${PG_AFTER_SECONDS:-20}"
RUN="pgfault$(date +%s)$$"
fl_init
WINDOW="$(fl_duplicate_window)"

# Fails at once when the relay died, with its crash report (postgres-nio's pool trapped after the restart,
# "PoolStateMachine+ConnectionGroup.swift:163: Precondition failed", while the relay kept a minimum of
# pooled connections).
relay_alive() {
    kill -0 "${RELAY_PID[main]}" 2>/dev/null && return 0
    grep -m 1 -E "Precondition failed|Fatal error|Program crashed" "$TMP/relay-main.log" >&2 || true
    fail "the relay died after the PostgreSQL restart (see the crash report above)"
}

step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relay"
# No operator HTTP port: the default 127.0.0.1:9411 may belong to another relay on this machine.
FL_RELAY_ARGS=(--log-level "${PG_LOG_LEVEL:-info}" --metrics-listen "")
fl_start_relay main
ADDRESS="${RELAY_ADDRESS[main]}"
step="register"
log "registering $DEVICES devices through the relay"
fl_tool register --address "$ADDRESS" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" --out "$TMP/devices.tsv"

# --- 2. the backend's single sends ---------------------------------------------------------------
step="backend"
log "a backend sending single-user Sends (4 at a time, no retry) until told to stop"
(cd "$TMP" && exec "$PY" "$ROOT/Ops/scenarios/fault_tool.py" sends --address "$ADDRESS" --credential "$CREDENTIAL" \
    --devices "$TMP/devices.tsv" --run "$RUN-single" --stop-file "$TMP/stop-sends" --out "$TMP/sends.tsv" \
    --max-seconds "$TIMEOUT" >"$TMP/sends.txt" 2>&1) &
SENDER_PID=$!
FL_OTHER_PIDS+=("$SENDER_PID")
sleep 2

# --- 3. the fan-out and the outage ---------------------------------------------------------------
step="send"
log "one Send to $DEVICES users; PostgreSQL stopped at ${STOP_PERCENT}% of it answered, for ${OUTAGE_SECONDS}s"
stop_at=$((DEVICES * STOP_PERCENT / 100))
JOB="$(fl_tool send --address "$ADDRESS" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "fan-out job $JOB accepted"
while [ "$(fl_sim_requests "$RUN\\\"")" -lt "$stop_at" ]; do
    check_deadline
    kill -0 "${RELAY_PID[main]}" 2>/dev/null || fail "the relay exited during the fan-out"
    sleep 0.05
done
step="outage"
PG_PID_BEFORE="$(fl_postgres_pid)"
PG_BIN="$(fl_pg_bin)"
outage_start_ms=$(date +%s%3N)
fl_as_pg_owner "$PG_BIN/pg_ctl" stop -D "$TMP/pg" -m fast -w -t 60 -s || fail "pg_ctl stop failed"
answered_at_stop="$(fl_sim_requests "$RUN\\\"")"
say "PostgreSQL (pid $PG_PID_BEFORE) stopped; fan-out answered $answered_at_stop of $DEVICES"
sleep "$OUTAGE_SECONDS"
relay_restarted_it=no
if [ -n "$(fl_postgres_pid)" ]; then
    relay_restarted_it=yes
    say "PostgreSQL is running again without us (pid $(fl_postgres_pid))"
else
    fl_as_pg_owner "$PG_BIN/pg_ctl" start -D "$TMP/pg" -l "$TMP/pg/restart.log" \
        -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='$TMP/pg'" -w -t 60 -s ||
        fail "pg_ctl start failed: $(tail -n 20 "$TMP/pg/restart.log" 2>/dev/null)"
fi
outage_end_ms=$(date +%s%3N)
answered_at_start="$(fl_sim_requests "$RUN\\\"")"
say "PostgreSQL started again (pid $(fl_postgres_pid)) after $(((outage_end_ms - outage_start_ms) / 1000))s;" \
    "fan-out answered $answered_at_start of $DEVICES"
sleep "$AFTER_SECONDS"
relay_alive
touch "$TMP/stop-sends"
step="backend-stop"
while kill -0 "$SENDER_PID" 2>/dev/null; do
    check_deadline
    relay_alive
    sleep 0.2
done
wait "$SENDER_PID" 2>/dev/null || fail "the backend (fault_tool.py sends) failed: $(cat "$TMP/sends.txt")"
FL_OTHER_PIDS=()

# --- 4. everything acknowledged completes --------------------------------------------------------
step="wait-completed"
# Not fl_wait_job_completed: it would wait for the deadline if the relay died.
while :; do
    check_deadline
    relay_alive
    state="$(fl_psql "SELECT state FROM jobs WHERE id = '$JOB'" || true)"
    case "$state" in
    completed) break ;;
    failed | cancelled) fail "job $JOB ended $state" ;;
    esac
    sleep 0.2
done
awk -F'\t' '$3 == "acked" {print $4}' "$TMP/sends.tsv" | sort -u >"$TMP/acked-jobs.txt"
acked_jobs="$(wc -l <"$TMP/acked-jobs.txt")"
job_list="$(awk '{printf "%s'\''%s'\''", (NR > 1 ? "," : ""), $1}' "$TMP/acked-jobs.txt")"
[ -n "$job_list" ] || fail "no single send was acknowledged"
while :; do
    check_deadline
    relay_alive
    open="$(fl_psql "SELECT count(*) FROM jobs WHERE id IN ($job_list) AND state NOT IN ('completed', 'failed', 'cancelled')")"
    [ "$open" = 0 ] && break
    sleep 0.5
done
kill -0 "${RELAY_PID[main]}" 2>/dev/null || fail "the relay exited"

# --- 5. accounting -------------------------------------------------------------------------------
step="accounting"
log "accounting"
# The single sends: by result, and which of them overlapped the outage.
read -r attempts acked acked_during waited unavailable internal_errors lost other_errors acked_after <<<"$(awk -F'\t' \
    -v s="$outage_start_ms" -v e="$outage_end_ms" '
    { n++; end = $5 + $6; during = ($5 < e && end > s) }
    $3 == "acked" { a++; if (during) { ad++; if ($6 >= 1000) w++ } if ($5 > e) aa++ }
    $3 == "UNAVAILABLE" { u++ } $3 == "INTERNAL" { i++ } $3 == "CONNECTION" || $3 == "TIMEOUT" { l++ }
    $3 != "acked" && $3 != "UNAVAILABLE" && $3 != "INTERNAL" && $3 != "CONNECTION" && $3 != "TIMEOUT" { o++ }
    END { printf "%d %d %d %d %d %d %d %d %d\n", n, a, ad, w, u, i, l, o, aa }' "$TMP/sends.tsv")"
longest_wait_ms="$(awk -F'\t' '$3 == "acked" && $6 > m { m = $6 } END { print m + 0 }' "$TMP/sends.tsv")"
read -r single_completed single_delivered <<<"$(fl_psql \
    "SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'completed' AND devices = 1 AND delivered = 1)
     FROM jobs WHERE id IN ($job_list)")"
single_rows="$(fl_psql "SELECT count(DISTINCT job_id) FROM deliveries WHERE tenant_id = 'circl' AND job_id IN ($job_list) AND outcome = 'delivered'")"
# The fan-out.
fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
read -r rows_total rows_distinct <<<"$(fl_psql \
    "SELECT count(*), count(DISTINCT token) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
wire="$(fl_tool status --address "$ADDRESS" --credential "$CREDENTIAL" --job "$JOB")"
reconnect_lines="$(grep -ciE 'database|postgres|PSQL' "$TMP/relay-main.log" || true)"

failures=0

outage_s="$(((outage_end_ms - outage_start_ms) / 1000)).$(((outage_end_ms - outage_start_ms) % 1000 / 100))"
echo "fault-postgres-restart accounting (run $RUN, fan-out job $JOB, $(date -u +%F)):"
echo "  outage                                ${outage_s}s (pg_ctl stop -m fast .. start; restarted by the relay itself: $relay_restarted_it)"
echo "  fan-out answered at stop / at start   $answered_at_stop / $answered_at_start of $DEVICES"
echo "  single sends attempted                $attempts"
echo "    acked                               $acked ($acked_during overlapping the outage, $waited of them waited >= 1 s; longest ${longest_wait_ms} ms; $acked_after sent after it)"
echo "    typed errors                        UNAVAILABLE $unavailable, INTERNAL $internal_errors, other codes $other_errors"
echo "    connection lost or timed out        $lost"
echo "  acked single-send jobs                $acked_jobs: $single_completed completed, $single_delivered delivered to their device, $single_rows with a delivered row"
echo "  fan-out simulator requests            ${ACC[requests]} (${ACC[status_200]} answered 200, ${ACC[status_other]} other)"
echo "  fan-out distinct tokens received      ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]}, twice ${ACC[duplicate_tokens]}, window $WINDOW)"
echo "  fan-out delivery rows                 $rows_total ($rows_distinct distinct tokens, ${ACC[db_delivered_rows]} delivered)"
echo "  fan-out job (psql)                    $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
echo "  fan-out job (JobStatus)               $wire"
echo "  relay log lines naming the database   $reconnect_lines"
check "the relay survived the outage (same process)" eq "$(kill -0 "${RELAY_PID[main]}" 2>/dev/null && echo yes)" yes
check "the relay acked sends again after the restart ($acked_after)" ge "$acked_after" 1
check "sends during the outage waited or got a typed error (acked during it: $acked_during, UNAVAILABLE $unavailable, INTERNAL $internal_errors)" \
    ge "$((acked_during + unavailable + internal_errors))" 1
# A send must be answered: acked (perhaps late) or refused with a typed error. Before the store call
# deadline, a Send arriving just as PostgreSQL stopped was sometimes never answered (TIMEOUT after 120 s).
check "every send answered: none lost its connection or timed out without an answer ($lost)" eq "$lost" 0
check "no error other than UNAVAILABLE or INTERNAL ($other_errors)" eq "$other_errors" 0
check "every acked single send's job completed ($single_completed of $acked_jobs)" eq "$single_completed" "$acked_jobs"
check "every acked single send delivered to its device and recorded" eq "$single_delivered:$single_rows" "$acked_jobs:$acked_jobs"
check "fan-out: every device reached the simulator, nothing unexpected" \
    eq "${ACC[distinct_tokens]}:${ACC[missing_tokens]}:${ACC[unexpected_tokens]}" "$DEVICES:0:0"
check "fan-out: duplicates ${ACC[duplicate_tokens]} <= window $WINDOW" le "${ACC[duplicate_tokens]}" "$WINDOW"
check "fan-out: one delivery row per device" eq "$rows_total:$rows_distinct" "$DEVICES:$DEVICES"
check "fan-out: delivered rows name exactly the tokens the simulator answered 200" eq "${ACC[db_matches_sim]}" yes
check "fan-out job completed with every device delivered" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
check "JobStatus agrees" eq "$wire" "state=COMPLETED devices=$DEVICES delivered=$DEVICES failed=0 skipped=0"
# The relay stops gracefully (SIGTERM) after the outage, as it does without one: within 30 s.
step="stop"
stop_started=$(date +%s%3N)
kill -TERM "${RELAY_PID[main]}"
while kill -0 "${RELAY_PID[main]}" 2>/dev/null && [ $(($(date +%s%3N) - stop_started)) -lt 30000 ]; do sleep 0.1; done
stopped=yes
kill -0 "${RELAY_PID[main]}" 2>/dev/null && stopped=no
stop_ms=$(($(date +%s%3N) - stop_started))
if [ "$stopped" = no ]; then
    echo "  relay after SIGTERM                   still running after 30 s; last lines of its log:"
    tail -n 5 "$TMP/relay-main.log" | cut -c1-200 | sed 's/^/      /'
fi
# Before the store call deadline, the fan-out worker's graceful shutdown sometimes never ended after the outage.
check "the relay stops gracefully on SIGTERM within 30 s after the outage (${stop_ms} ms)" eq "$stopped" yes
relay_stop main 5
result=OK
[ "$failures" -eq 0 ] || result="FAIL ($failures check(s) failed)"
step="done"
printf '\n%s: %s: PostgreSQL down %ss during a %d-device fan-out and %d single sends; %d acked (%d during the outage, longest wait %d ms), %d UNAVAILABLE, %d INTERNAL, %d lost; acked jobs completed and recorded %d/%d; fan-out %d/%d devices recorded, %d duplicates (window %d), graceful stop %d ms, in %ds\n' \
    "$NAME" "$result" "$outage_s" "$DEVICES" "$attempts" "$acked" "$acked_during" "$longest_wait_ms" "$unavailable" "$internal_errors" \
    "$lost" "$single_rows" "$acked_jobs" "${ACC[db_delivered_rows]}" "$DEVICES" "${ACC[duplicate_tokens]}" "$WINDOW" "$stop_ms" "$(elapsed)"
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"
