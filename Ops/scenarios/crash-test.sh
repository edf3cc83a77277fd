#!/usr/bin/env bash
# Ops/scenarios/crash-test.sh: a relay killed with SIGKILL in the middle of a 10,000-device fan-out, then started
# again: every device gets the notification, the duplicates stay within the fan-out's window, and the
# deliveries table agrees with what APNs (the simulator) received.
#
#   bash Ops/scenarios/crash-test.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. a virtualenv with the Python client (Protocol/python); an embedded PostgreSQL in $TMP/pg with
#      circl's tenant file, a fresh P-256 .p8 stored sealed under a fresh master key, a credential
#   2. `pushrelay apns-sim` as its own process (it outlives the relay), trusting the same .p8, answering
#      each request after CRASH_LATENCY_MS, one JSON line per answered request in $TMP/sim.jsonl
#   3. `pushrelay serve` sending to it; 10,000 devices registered through the relay by the Python client
#      (RegisterDevice pipelined on 4 connections), one user each
#   4. one Send to the 10,000 users (one job, at most max_recipients), its payload carrying this run's
#      id; when the simulator has answered CRASH_KILL_PERCENT of the job's requests, `kill -9` the relay
#   5. the relay started again on the same cluster (left running by the killed relay, reused) and the
#      same simulator; wait until the job is completed (psql)
#   6. the accounting, each line checked: every registered token received at least once, nothing else;
#      tokens received twice within the send window at its floor + 2 x recordBatch x pageLoops (FanOutTuning, fl_duplicate_window), and
#      exactly the devices answered before the kill but not yet recorded; delivered rows of the job ==
#      distinct tokens received, the same tokens; the job completed with every device delivered
#
# Environment:
#   PUSHRELAY_BIN        the relay binary (default .build/debug/pushrelay)
#   CRASH_DEVICES        devices (default 10000; at most the relay's 10,000 recipients per Send)
#   CRASH_LATENCY_MS     the simulator's answer delay (default 500)
#   CRASH_KILL_PERCENT   kill when this share of the job's requests is answered (default 30)
#   CRASH_TIMEOUT        seconds before the script gives up (default 600)
set -euo pipefail

NAME="crash-test.sh"
TIMEOUT="${CRASH_TIMEOUT:-600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${CRASH_DEVICES:-10000}"
LATENCY_MS="${CRASH_LATENCY_MS:-500}"
KILL_PERCENT="${CRASH_KILL_PERCENT:-30}"
RUN="crash$(date +%s)$$"
fl_init
WINDOW="$(fl_duplicate_window)"

# --- 1. setup ------------------------------------------------------------------------------------
step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database

# --- 2. the simulator, 3. the relay and the devices ----------------------------------------------
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relay-1"
fl_start_relay first
PG_PID_BEFORE="$(fl_postgres_pid)"
[ -n "$PG_PID_BEFORE" ] || fail "no running PostgreSQL in $TMP/pg"
step="register"
log "registering $DEVICES devices through the relay"
fl_tool register --address "${RELAY_ADDRESS[first]}" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" \
    --out "$TMP/devices.tsv"
registered="$(fl_psql "SELECT count(*) FROM devices WHERE tenant_id = 'circl' AND active AND user_id LIKE '$RUN-%'")"
[ "$registered" -eq "$DEVICES" ] || fail "$registered active devices in the database, expected $DEVICES"

# --- 4. the fan-out and the crash ----------------------------------------------------------------
step="send"
log "one Send to $DEVICES users, relay killed at ${KILL_PERCENT}% of the job's requests answered"
kill_at=$((DEVICES * KILL_PERCENT / 100))
[ "$kill_at" -ge 1 ] && [ "$kill_at" -lt "$DEVICES" ] || fail "CRASH_KILL_PERCENT must leave some but not all"
send_started=$(date +%s%3N)
JOB="$(fl_tool send --address "${RELAY_ADDRESS[first]}" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" \
    --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "job $JOB accepted by relay first"
answered=0
while [ "$answered" -lt "$kill_at" ]; do
    check_deadline
    kill -0 "${RELAY_PID[first]}" 2>/dev/null || fail "relay first exited during the fan-out"
    sleep 0.05
    answered="$(fl_sim_requests "$RUN")"
    answered="${answered:-0}"
done
kill -KILL "${RELAY_PID[first]}"
wait "${RELAY_PID[first]}" 2>/dev/null || true
unset 'RELAY_PID[first]'
killed_after_ms=$(($(date +%s%3N) - send_started))
step="after-kill"
# The simulator logs an answer once it is written; once it sees the killed relay's connections close,
# nothing more comes (answers still waiting for their latency are dropped, unlogged). A statement the
# relay had already sent to PostgreSQL may still commit. Wait until both counts hold still for 1.5 s.
answered_before_restart=-1
recorded_at_kill=-1
stable=0
while [ "$stable" -lt 3 ]; do
    check_deadline
    sleep 0.5
    now_answered="$(fl_sim_requests "$RUN")"
    now_recorded="$(fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
    if [ "$now_answered" = "$answered_before_restart" ] && [ "$now_recorded" = "$recorded_at_kill" ]; then
        stable=$((stable + 1))
    else
        stable=0
    fi
    answered_before_restart="$now_answered"
    recorded_at_kill="$now_recorded"
done
pages_at_kill="$(fl_psql "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'leased'),
    count(*) FILTER (WHERE state = 'pending') FROM job_pages WHERE job_id = '$JOB' AND page > 0")"
read -r pages_done pages_leased pages_pending <<<"$pages_at_kill"
say "SIGKILL $((killed_after_ms / 1000)).$((killed_after_ms % 1000 / 100))s after the send: simulator answered $answered_before_restart of $DEVICES," \
    "deliveries recorded $recorded_at_kill; pages done $pages_done, leased $pages_leased, pending $pages_pending"
[ "$answered_before_restart" -lt "$DEVICES" ] || fail "the whole job was answered before the kill"
[ "$pages_leased" -ge 1 ] || fail "no page was being sent at the kill"
[ "$(fl_psql "SELECT state FROM jobs WHERE id = '$JOB'")" = running ] || fail "the job is not running after the kill"

# --- 5. restart ----------------------------------------------------------------------------------
step="relay-2"
log "relay started again on the same cluster and simulator"
[ "$(fl_postgres_pid)" = "$PG_PID_BEFORE" ] || fail "PostgreSQL did not survive the relay's SIGKILL"
restarted=$(date +%s%3N)
fl_start_relay second
[ "$(fl_postgres_pid)" = "$PG_PID_BEFORE" ] || fail "the restarted relay did not reuse the running PostgreSQL"
step="wait-completed"
fl_wait_job_completed "$JOB"
completed_after_ms=$(($(date +%s%3N) - restarted))
completed_after="$((completed_after_ms / 1000)).$((completed_after_ms % 1000 / 100))"
say "job completed ${completed_after}s after the restart (pages of the killed relay wait for their 30 s lease)"

# --- 6. accounting -------------------------------------------------------------------------------
step="accounting"
log "accounting"
fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
rows_total="$(fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
read -r pages pages_taken_over <<<"$(fl_psql \
    "SELECT count(*), count(*) FILTER (WHERE claims > 1) FROM job_pages WHERE job_id = '$JOB' AND page > 0")"
wire="$(fl_tool status --address "${RELAY_ADDRESS[second]}" --credential "$CREDENTIAL" --job "$JOB")"
unrecorded=$((answered_before_restart - recorded_at_kill))

failures=0

echo "crash-test accounting (run $RUN, job $JOB, $(date -u +%F)):"
echo "  devices registered                    $DEVICES"
echo "  simulator requests for the job        ${ACC[requests]} (${ACC[status_200]} answered 200, ${ACC[status_other]} other)"
echo "  answered before the SIGKILL           $answered_before_restart (killed at >= $kill_at)"
echo "  deliveries recorded at the SIGKILL    $recorded_at_kill"
echo "  pages                                 $pages ($pages_taken_over taken over after the crash)"
echo "  distinct tokens received              ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]})"
echo "  tokens received twice                 ${ACC[duplicate_tokens]} (window $WINDOW; most sends to one token ${ACC[most_sends_to_one_token]})"
echo "  delivered rows of the job             ${ACC[db_delivered_rows]} (${ACC[db_delivered_distinct]} distinct tokens; $rows_total rows in all)"
echo "  job (psql)                            $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
echo "  job (JobStatus via the new relay)     $wire"
check "every device got it at least once: distinct tokens == $DEVICES" eq "${ACC[distinct_tokens]}" "$DEVICES"
check "no token missing, none unexpected" eq "${ACC[missing_tokens]}:${ACC[unexpected_tokens]}" "0:0"
check "every request answered 200" eq "${ACC[status_other]}" 0
check "duplicates ${ACC[duplicate_tokens]} <= window $WINDOW" le "${ACC[duplicate_tokens]}" "$WINDOW"
check "no token received more than twice" le "${ACC[most_sends_to_one_token]}" 2
check "duplicates == answered before the kill - recorded at the kill ($unrecorded)" \
    eq "${ACC[duplicate_tokens]}" "$unrecorded"
check "delivered rows == distinct tokens received" eq "${ACC[db_delivered_rows]}" "${ACC[distinct_tokens]}"
check "one delivered row per token" eq "${ACC[db_delivered_distinct]}" "${ACC[db_delivered_rows]}"
check "delivered rows name exactly the tokens the simulator answered 200" eq "${ACC[db_matches_sim]}" yes
check "no other delivery rows for the job" eq "$rows_total" "$DEVICES"
check "job completed with $DEVICES devices delivered, none failed or skipped" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
check "JobStatus agrees" eq "$wire" "state=COMPLETED devices=$DEVICES delivered=$DEVICES failed=0 skipped=0"
check "the crash hit pages being sent (taken over: $pages_taken_over)" ge "$pages_taken_over" 1
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"

step="stop"
relay_stop second 30
step="done"
printf '\n%s: OK: %d devices, relay killed at %d/%d answered, restarted, job completed %ss later; %d/%d tokens received, %d duplicates (window %d), %d delivered rows == distinct tokens, in %ds\n' \
    "$NAME" "$DEVICES" "$answered_before_restart" "$DEVICES" "$completed_after" "${ACC[distinct_tokens]}" "$DEVICES" \
    "${ACC[duplicate_tokens]}" "$WINDOW" "${ACC[db_delivered_rows]}" "$(elapsed)"
