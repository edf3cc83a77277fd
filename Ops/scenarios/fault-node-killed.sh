#!/usr/bin/env bash
# Ops/scenarios/fault-node-killed.sh: three relays on one PostgreSQL behind HAProxy (as
# Ops/scenarios/three-relays.sh), one of them killed with SIGKILL in the middle of a fan-out: the other two finish
# it once the killed relay's page leases (30 s) run out. Nothing accepted is lost.
#
#   bash Ops/scenarios/fault-node-killed.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. python client, embedded PostgreSQL, circl key and credential; `pushrelay apns-sim`; relays A, B and C
#      and HAProxy in front of them (Ops/scenarios/three-relays.sh's setup); the three heartbeats seen
#   2. NODE_DEVICES devices registered through HAProxy, one Send to their users through HAProxy
#   3. when the simulator has answered NODE_KILL_PERCENT of the job's requests, the relay holding the most page
#      leases is killed with SIGKILL (the embedded PostgreSQL, started by A, outlives it); its leased pages are noted
#   4. the two others go on; the job completes after the killed relay's leases ran out (psql)
#   5. the accounting, each line checked (as Ops/scenarios/crash-test.sh): every token received at least once, nothing
#      else; tokens received twice within the fan-out's window (the send window at its floor + 2 x recordBatch x pageLoops of FanOutTuning); no
#      token more than twice; one delivered row per token, exactly the tokens the simulator answered 200; the
#      job completed with every device delivered (psql, and JobStatus through HAProxy); the killed relay's
#      pages were taken over by the survivors, and every page ended done
#
# Environment:
#   PUSHRELAY_BIN       the relay binary (default .build/debug/pushrelay)
#   NODE_DEVICES        devices (default 6000; at most 10,000)
#   NODE_LATENCY_MS     the simulator's answer delay (default 20)
#   NODE_KILL_PERCENT   kill when this share of the job's requests is answered (default 30)
#   NODE_TIMEOUT        seconds before the script gives up (default 900)
set -euo pipefail

NAME="fault-node-killed.sh"
TIMEOUT="${NODE_TIMEOUT:-900}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${NODE_DEVICES:-6000}"
LATENCY_MS="${NODE_LATENCY_MS:-20}"
KILL_PERCENT="${NODE_KILL_PERCENT:-30}"
RUN="node$(date +%s)$$"
fl_init
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || fail "haproxy is missing (bash Ops/scripts/install-deps.sh)"
HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)"

# --- 1. setup, 2. simulator, 3. three relays and HAProxy ----------------------------------------
step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relays"
# No operator HTTP port: the default 127.0.0.1:9411 may belong to another relay on this machine.
FL_RELAY_ARGS=(--metrics-listen "")
fl_start_relays_behind_haproxy

# --- 2. devices and the send, through HAProxy -----------------------------------------------------
WINDOW="$(fl_duplicate_window)"
step="register"
log "registering $DEVICES devices through HAProxy"
fl_tool register --address "$LB" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" --out "$TMP/devices.tsv"
step="send"
log "one Send to $DEVICES users through HAProxy; a relay killed at ${KILL_PERCENT}% of the job's requests answered"
kill_at=$((DEVICES * KILL_PERCENT / 100))
[ "$kill_at" -ge 1 ] && [ "$kill_at" -lt "$DEVICES" ] || fail "NODE_KILL_PERCENT must leave some but not all"
send_started=$(date +%s%3N)
JOB="$(fl_tool send --address "$LB" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "job $JOB accepted"

# --- 3. the kill ---------------------------------------------------------------------------------
step="kill"
# Pages leased by relay `$1` right now.
leased_by() {
    fl_psql "SELECT count(*) FROM job_pages WHERE job_id = '$JOB' AND state = 'leased'
             AND lease_owner LIKE '%-${RELAY_PID[$1]}-%'"
}
victim=""
while [ -z "$victim" ]; do
    check_deadline
    answered="$(fl_sim_requests "$RUN")"
    if [ "${answered:-0}" -ge "$kill_at" ]; then
        best=0
        for name in A B C; do
            n="$(leased_by "$name")"
            if [ "$n" -gt "$best" ]; then
                best="$n"
                victim="$name"
            fi
        done
        [ "${answered:-0}" -lt "$DEVICES" ] || fail "the whole job was answered before a relay held a lease to kill"
    fi
    [ -n "$victim" ] || sleep 0.05
done
VICTIM_PID="${RELAY_PID[$victim]}"
kill -KILL "$VICTIM_PID"
wait "$VICTIM_PID" 2>/dev/null || true
unset "RELAY_PID[$victim]"
killed_ms=$(($(date +%s%3N) - send_started))
fl_psql "SELECT page FROM job_pages WHERE job_id = '$JOB' AND state = 'leased' AND lease_owner LIKE '%-$VICTIM_PID-%'" \
    >"$TMP/victim-pages.txt"
victim_pages="$(wc -l <"$TMP/victim-pages.txt")"
answered_at_kill="$(fl_sim_requests "$RUN")"
say "relay $victim (pid $VICTIM_PID) killed with SIGKILL $((killed_ms / 1000)).$((killed_ms % 1000 / 100))s after the send," \
    "$answered_at_kill of $DEVICES answered; it held $victim_pages page lease(s)"
[ "$victim_pages" -ge 1 ] || fail "the killed relay held no lease"

# --- 4. the others finish ------------------------------------------------------------------------
step="wait-completed"
survivors=()
for name in A B C; do [ "$name" = "$victim" ] || survivors+=("$name"); done
while :; do
    check_deadline
    for name in "${survivors[@]}"; do
        kill -0 "${RELAY_PID[$name]}" 2>/dev/null || fail "relay $name exited during the fan-out"
    done
    state="$(fl_psql "SELECT state FROM jobs WHERE id = '$JOB'" || true)"
    case "$state" in
    completed) break ;;
    failed | cancelled) fail "job $JOB ended $state" ;;
    esac
    sleep 0.2
done
completed_ms=$(($(date +%s%3N) - send_started))
after_kill="$(((completed_ms - killed_ms) / 1000)).$(((completed_ms - killed_ms) % 1000 / 100))"
say "job completed ${after_kill}s after the kill"

# --- 5. accounting -------------------------------------------------------------------------------
step="accounting"
log "accounting"
fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
rows_total="$(fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
read -r pages pages_done pages_taken_over <<<"$(fl_psql \
    "SELECT count(*), count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE claims > 1)
     FROM job_pages WHERE job_id = '$JOB' AND page > 0")"
victim_list="$(paste -sd, "$TMP/victim-pages.txt")"
# The killed relay's pages: each claimed again, and finished by a survivor.
read -r victim_reclaimed victim_by_survivor <<<"$(fl_psql \
    "SELECT count(*) FILTER (WHERE claims > 1), count(*) FILTER (WHERE lease_owner NOT LIKE '%-$VICTIM_PID-%' OR lease_owner IS NULL)
     FROM job_pages WHERE job_id = '$JOB' AND page IN ($victim_list)")"
wire="$(fl_tool status --address "$LB" --credential "$CREDENTIAL" --job "$JOB")"

failures=0

echo "fault-node-killed accounting (run $RUN, job $JOB, $(date -u +%F)):"
echo "  relays                                A, B, C behind HAProxy $LB; $victim (pid $VICTIM_PID) killed with SIGKILL"
echo "  devices registered                    $DEVICES"
echo "  answered at the SIGKILL               $answered_at_kill (killed at >= $kill_at)"
echo "  pages                                 $pages ($pages_done done, $pages_taken_over claimed more than once)"
echo "  pages the killed relay held           $victim_pages ($victim_reclaimed claimed again, $victim_by_survivor last owned by a survivor)"
echo "  simulator requests for the job        ${ACC[requests]} (${ACC[status_200]} answered 200, ${ACC[status_other]} other)"
echo "  distinct tokens received              ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]})"
echo "  tokens received twice                 ${ACC[duplicate_tokens]} (window $WINDOW; most sends to one token ${ACC[most_sends_to_one_token]})"
echo "  delivered rows of the job             ${ACC[db_delivered_rows]} (${ACC[db_delivered_distinct]} distinct tokens; $rows_total rows in all)"
echo "  job (psql)                            $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
echo "  job (JobStatus through HAProxy)       $wire"
echo "  finished after the kill               ${after_kill}s (lease 30 s)"
check "every device got it at least once: distinct tokens == $DEVICES" eq "${ACC[distinct_tokens]}" "$DEVICES"
check "no token missing, none unexpected" eq "${ACC[missing_tokens]}:${ACC[unexpected_tokens]}" "0:0"
check "every request answered 200" eq "${ACC[status_other]}" 0
check "duplicates ${ACC[duplicate_tokens]} <= window $WINDOW" le "${ACC[duplicate_tokens]}" "$WINDOW"
check "no token received more than twice" le "${ACC[most_sends_to_one_token]}" 2
check "delivered rows == distinct tokens received" eq "${ACC[db_delivered_rows]}" "${ACC[distinct_tokens]}"
check "one delivered row per token" eq "${ACC[db_delivered_distinct]}" "${ACC[db_delivered_rows]}"
check "delivered rows name exactly the tokens the simulator answered 200" eq "${ACC[db_matches_sim]}" yes
check "no other delivery rows for the job" eq "$rows_total" "$DEVICES"
check "job completed with $DEVICES devices delivered, none failed or skipped" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
check "JobStatus through HAProxy agrees" eq "$wire" "state=COMPLETED devices=$DEVICES delivered=$DEVICES failed=0 skipped=0"
check "every page done" eq "$pages_done" "$pages"
check "the killed relay's $victim_pages page(s) claimed again and finished by a survivor" \
    eq "$victim_reclaimed:$victim_by_survivor" "$victim_pages:$victim_pages"
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"

step="stop"
fl_stop_pid "${FL_OTHER_PIDS[0]}" 10
FL_OTHER_PIDS=()
for name in C B A; do
    [ -n "${RELAY_PID[$name]:-}" ] || continue
    relay_stop "$name" 30
done
step="done"
printf '\n%s: OK: %d devices through HAProxy, relay %s killed (SIGKILL) at %s/%d answered holding %d page(s), the other two finished the job %ss later; %d/%d tokens received, %d duplicates (window %d), %d delivered rows == distinct tokens, in %ds\n' \
    "$NAME" "$DEVICES" "$victim" "$answered_at_kill" "$DEVICES" "$victim_pages" "$after_kill" "${ACC[distinct_tokens]}" "$DEVICES" \
    "${ACC[duplicate_tokens]}" "$WINDOW" "${ACC[db_delivered_rows]}" "$(elapsed)"
