#!/usr/bin/env bash
# Ops/scenarios/outage-apns.sh: APNs (the simulator) stopped for OUTAGE_SECONDS in the middle of a 100,000-device
# fan-out, and the relay restarted (SIGTERM, then started again) during the outage: every accepted notification
# is held (durable in PostgreSQL across the restart), said to wait (JOB_STATUS, /status, /metrics), and delivered
# once APNs is back on the same port; none lost, duplicates within the documented window.
#
#   bash Ops/scenarios/outage-apns.sh
#
# Steps, each fatal, in a temporary folder; everything started is stopped on exit (also on failure):
#   1. embedded PostgreSQL with circl (its pace raised to 50,000/s in the run's copy of its tenant file, so the
#      fan-out runs at the relay's speed), a .p8 sealed under a fresh master key, a credential; `pushrelay
#      apns-sim` as its own process (latency OUTAGE_LATENCY_MS); `pushrelay serve` with its operator port
#   2. OUTAGE_DEVICES devices of circl written into the database (a bulk load); one Send per 10,000 of them
#      (max_recipients) through the relay
#   3. when the simulator has answered OUTAGE_STOP_PERCENT of the requests, it is stopped: the outage begins
#   4. during the outage: the held devices counted (job_pages), JOB_STATUS says running and waiting, /status
#      and /metrics show the held notifications; the relay stopped with SIGTERM (exit 0) and started again
#   5. after OUTAGE_SECONDS the simulator starts again on the same port; every job completes
#   6. the accounting, each line checked: every job completed with every device delivered; one delivered row per
#      device; every device answered 200 by a simulator (lost 0); devices answered 200 twice within the crash
#      window (sends in flight when APNs went away: their answers were lost with the connection); delivered rows
#      name exactly the tokens answered 200; notifications waited during the outage and were delivered after it
#
# Environment:
#   PUSHRELAY_BIN         the relay binary (default .build/debug/pushrelay)
#   OUTAGE_DEVICES        devices (default 100000)
#   OUTAGE_SECONDS        how long APNs is away (default 120)
#   OUTAGE_STOP_PERCENT   stop APNs when this share of the requests is answered (default 30)
#   OUTAGE_LATENCY_MS     the simulator's answer delay (default 5)
#   OUTAGE_TIMEOUT        seconds before the script gives up (default 1500)
set -euo pipefail

NAME="outage-apns.sh"
TIMEOUT="${OUTAGE_TIMEOUT:-1500}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${OUTAGE_DEVICES:-100000}"
OUTAGE_SECONDS="${OUTAGE_SECONDS:-120}"
STOP_PERCENT="${OUTAGE_STOP_PERCENT:-30}"
LATENCY_MS="${OUTAGE_LATENCY_MS:-5}"
PER_SEND=10000
RUN="outage$(date +%s)$$"
fl_init

# --- 1. setup ------------------------------------------------------------------------------------
step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
sed -i 's/^  notifications_per_second: [0-9]*$/  notifications_per_second: 50000/' "$TMP/tenants/circl.yaml"
grep -q "notifications_per_second: 50000" "$TMP/tenants/circl.yaml" || fail "circl's pace was not raised"
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relay"
METRICS_PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
FL_RELAY_ARGS=(--metrics-listen "127.0.0.1:$METRICS_PORT")
fl_start_relay main
operator() { curl -s --max-time 5 "http://127.0.0.1:$METRICS_PORT$1" || true; }

# --- 2. devices and sends ------------------------------------------------------------------------
step="register"
log "$DEVICES devices of circl written straight into the database (a bulk load: the wire is not what this run measures)"
# The same tokens and users as fanout_tool.py register writes (sha256 of "RUN-i", users RUN-u00000...), with circl's
# token policy's slot (one device per token).
fl_psql "INSERT INTO devices (tenant_id, slot, user_id, token, platform, environment, topics, registered_at)
         SELECT 'circl', '[\"token\",\"' || token || '\"]', user_id, token, 'ios', 'production', '{}', now()
         FROM (SELECT encode(sha256(convert_to('$RUN-' || i, 'UTF8')), 'hex') AS token,
                      '$RUN-u' || lpad(i::text, 5, '0') AS user_id
               FROM generate_series(0, $DEVICES - 1) AS i) AS d" >/dev/null
fl_psql "SELECT token || E'\t' || user_id FROM devices WHERE tenant_id = 'circl' AND user_id LIKE '$RUN-u%' ORDER BY user_id" \
    >"$TMP/devices.tsv"
[ "$(wc -l <"$TMP/devices.tsv")" -eq "$DEVICES" ] || fail "$(wc -l <"$TMP/devices.tsv") devices written, expected $DEVICES"
split -l "$PER_SEND" -d -a 3 "$TMP/devices.tsv" "$TMP/part-"
step="send"
stop_at=$((DEVICES * STOP_PERCENT / 100))
[ "$stop_at" -ge 1 ] && [ "$stop_at" -lt "$DEVICES" ] || fail "OUTAGE_STOP_PERCENT must leave some but not all"
jobs=()
for part in "$TMP"/part-*; do
    run="$RUN-$(basename "$part")"
    job="$(fl_tool send --address "${RELAY_ADDRESS[main]}" --credential "$CREDENTIAL" --devices "$part" --run "$run")"
    [[ "$job" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $job"
    jobs+=("$job")
    echo "$job $part $run" >>"$TMP/jobs.txt"
done
say "${#jobs[@]} job(s) accepted for $DEVICES devices"

# --- 3. the outage -------------------------------------------------------------------------------
step="outage"
log "APNs stopped once $stop_at requests are answered, for ${OUTAGE_SECONDS}s"
answered=0
while [ "$answered" -lt "$stop_at" ]; do
    check_deadline
    sleep 0.05
    answered="$(fl_sim_requests "$RUN")"
    answered="${answered:-0}"
done
fl_stop_pid "$SIM_PID" 10
SIM_PID=""
outage_started=$(date +%s)
answered_before="$(fl_sim_requests "$RUN")"
say "APNs stopped after $answered_before answered requests"

# Devices in held pages not done (distinct: a page being sent has written its devices' next page already).
held_devices() {
    fl_psql "SELECT count(DISTINCT token) FROM job_pages, unnest(tokens) AS token
             WHERE tenant_id = 'circl' AND retry_round > 0 AND state IN ('pending', 'leased')"
}
delivered_rows() {
    fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND outcome = 'delivered'"
}
# Waits until the fan-out has held every device it did not deliver (nothing more is sent while APNs is away).
held_max=0
wait_all_held() {
    local held delivered
    while :; do
        check_deadline
        held="$(held_devices)"
        delivered="$(delivered_rows)"
        [ "$held" -gt "$held_max" ] && held_max="$held"
        [ $((held + delivered)) -ge "$DEVICES" ] && return 0
        sleep 0.5
    done
}
step="outage-held"
wait_all_held
held_before_restart="$(held_devices)"
delivered_before="$(delivered_rows)"
status_line="$(fl_tool status --address "${RELAY_ADDRESS[main]}" --credential "$CREDENTIAL" --job "${jobs[-1]}")"
say "during the outage: $held_before_restart held, $delivered_before delivered; last job: $status_line"
# The gauges are sampled every 5 s: wait for a sample taken once every device was held.
metrics_held=0
for _ in $(seq 1 30); do
    metrics_held="$(operator /metrics | awk '/^pushrelay_notifications_held\{/ { sum += $2 } END { print sum + 0 }')"
    [ "$metrics_held" -eq "$held_before_restart" ] && break
    sleep 0.5
done
status_unreachable="$(operator /status | "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
circl = [t for t in doc["tenants"] if t["tenant"] == "circl"][0]
print(sum(h["devices"] for e in circl["environments"] for h in e["held"]))')"
admin_status="$(fl_admin status 2>&1 || true)"
admin_held="$(grep -cE '^circl +production .*HELD [0-9]+ \((connect_failed|connection_lost)\)' <<<"$admin_status" || true)"
say "pushrelay admin status during the outage:"
printf '%s\n' "$admin_status"
ready_during="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$METRICS_PORT/readyz" || true)"

step="restart"
log "relay restarted during the outage"
relay_stop main 60
restart_status="${RELAY_STATUS[main]}"
fl_start_relay main
step="outage-after-restart"
wait_all_held
held_after_restart="$(held_devices)"
say "after the restart: $held_after_restart held, $(delivered_rows) delivered"
while [ $(($(date +%s) - outage_started)) -lt "$OUTAGE_SECONDS" ]; do
    check_deadline
    held="$(held_devices)"
    [ "$held" -gt "$held_max" ] && held_max="$held"
    sleep 1
done

# --- 5. APNs back --------------------------------------------------------------------------------
step="apns-back"
outage_seconds=$(($(date +%s) - outage_started))
log "APNs back on port $SIM_PORT after ${outage_seconds}s"
fl_start_simulator "$LATENCY_MS"
back_at=$(date +%s)
for job in "${jobs[@]}"; do fl_wait_job_completed "$job"; done
drained_seconds=$(($(date +%s) - back_at))
answered_after=$(($(fl_sim_requests "$RUN") - answered_before))

# --- 6. the accounting ---------------------------------------------------------------------------
step="accounting"
failures=0
ok_tokens=0
missing=0
unexpected=0
twice=0
matches=yes
while read -r job part run; do
    fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$job' AND outcome = 'delivered'" \
        >"$TMP/delivered-job.txt"
    ACC=()
    fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$run" --devices "$part" \
        --delivered "$TMP/delivered-job.txt")"
    ok_tokens=$((ok_tokens + ACC[distinct_tokens] - ACC[missing_tokens]))
    missing=$((missing + ACC[missing_tokens]))
    unexpected=$((unexpected + ACC[unexpected_tokens]))
    twice=$((twice + ACC[tokens_200_twice]))
    [ "${ACC[db_matches_sim]}" = yes ] || matches=no
done <"$TMP/jobs.txt"
job_list="$(awk '{printf "%s'\''%s'\''", (NR > 1 ? "," : ""), $1}' "$TMP/jobs.txt")"
read -r jobs_completed job_devices job_delivered job_failed <<<"$(fl_psql \
    "SELECT count(*) FILTER (WHERE state = 'completed'), sum(devices), sum(delivered), sum(failed)
     FROM jobs WHERE id IN ($job_list)")"
read -r rows rows_distinct rows_delivered rows_expired <<<"$(fl_psql \
    "SELECT count(*), count(DISTINCT token), count(*) FILTER (WHERE outcome = 'delivered'),
            count(*) FILTER (WHERE outcome = 'expired')
     FROM deliveries WHERE tenant_id = 'circl' AND job_id IN ($job_list)")"
window="$(fl_duplicate_window)"
lost=$((DEVICES - rows_delivered))
echo "outage-apns accounting (run $RUN, $(date -u +%F), $DEVICES devices, APNs away ${outage_seconds}s):"
echo "  accepted                               $DEVICES notifications in ${#jobs[@]} job(s)"
echo "  answered before the outage             $answered_before requests"
echo "  waiting during the outage              $held_before_restart held before the restart, $held_after_restart after it (most $held_max)"
echo "  said to wait                           JOB_STATUS: $status_line; /metrics held $metrics_held; /status held $status_unreachable; /readyz $ready_during"
echo "  relay restart during the outage        exit $restart_status (SIGTERM)"
echo "  delivered after the outage             $answered_after requests answered in ${drained_seconds}s after APNs came back"
echo "  delivery rows                          $rows ($rows_distinct distinct tokens): $rows_delivered delivered, $rows_expired expired"
echo "  duplicates (answered 200 twice)        $twice (window $window: the sends in flight when APNs went away)"
echo "  lost                                   $lost"
check "every job completed" eq "$jobs_completed" "${#jobs[@]}"
check "job counters: devices == delivered == accepted, failed 0" eq "$job_devices:$job_delivered:$job_failed" "$DEVICES:$DEVICES:0"
check "one delivered row per device, none expired" eq "$rows:$rows_distinct:$rows_delivered:$rows_expired" "$DEVICES:$DEVICES:$DEVICES:0"
check "lost 0: every device answered 200 by APNs, nothing unexpected" eq "$ok_tokens:$missing:$unexpected:$lost" "$DEVICES:0:0:0"
check "delivered rows name exactly the tokens answered 200" eq "$matches" yes
check "duplicates within the window ($twice <= $window)" le "$twice" "$window"
check "notifications waited during the outage ($held_before_restart)" ge "$held_before_restart" 1
check "the held notifications survived the restart ($held_after_restart == $held_before_restart)" eq "$held_after_restart" "$held_before_restart"
check "JOB_STATUS said running and waiting" eq "$(grep -cE 'state=RUNNING .*waiting=[1-9]' <<<"$status_line")" 1
check "/metrics, /status and pushrelay admin status showed them ($metrics_held, $status_unreachable)" \
    eq "$((metrics_held > 0 && status_unreachable > 0)):$admin_held" 1:1
check "the relay stayed ready during the outage" eq "$ready_during" 200
check "the restart during the outage was graceful" eq "$restart_status" 0
check "notifications were delivered after the outage ($answered_after)" ge "$answered_after" "$held_before_restart"
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"
step="done"
say "OK in $(elapsed)s"
