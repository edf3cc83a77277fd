#!/usr/bin/env bash
# Ops/scenarios/fault-apns-errors.sh: a fan-out while APNs (the simulator) fails: ~5% of the
# requests answered 500 or 503, REFUSED_STREAM every 50th stream, and per connection either GOAWAY after
# 100 requests or the TCP connection dropped after 100 requests. Nothing accepted is lost: every device
# ends with exactly one delivery row with a final outcome, delivered + failed = accepted, the delivered
# rows are exactly the tokens the simulator answered 200, and the retries are counted.
#
#   FAULT_DEVICES=3000 bash Ops/scenarios/fault-apns-errors.sh
#
# One `pushrelay apns-sim` instance cannot both send GOAWAY and drop a connection (one connection fault
# each), so the run has two phases on the same devices, each one Send to every device (one job each):
#   phase "goaway": --rate-500 R --rate-503 R --goaway-after 100 --refuse-stream-every 50
#   phase "drop":   --rate-500 R --rate-503 R --drop-after 100   --refuse-stream-every 50
# The simulator is restarted between them on the same port (the relay's pools reconnect by themselves).
# A Send carries at most the relay's max_recipients (10,000) users, so more devices are sent in several
# jobs per phase; every job is accounted for.
#
# Accounting per phase, each line checked: every job completed; job rows devices == delivered + failed +
# skipped == its recipients; one delivery row per device with a final outcome (delivered, token_dead,
# retry_later, configuration_fault), none missing; every device reached the simulator, nothing unexpected;
# delivered rows == tokens the simulator answered 200; the simulator's answers with 500/503 were retried
# (each delivered token's last answer was 200; in the GOAWAY phase, which loses no answer, recorded attempts
# - rows >= answered non-200 of delivered tokens; a dropped connection can take answers with it, which the
# relay sends again without counting an attempt); the faults happened (GOAWAYs sent,
# connections dropped, streams refused, from the simulator's own statistics).
#
# Environment:
#   PUSHRELAY_BIN        the relay binary (default .build/debug/pushrelay)
#   FAULT_DEVICES        devices (default 100000, the issue's size; CI runs 3000)
#   FAULT_ERROR_RATE     probability of 500 and of 503 each (default 0.025: 5% together)
#   FAULT_LATENCY_MS     the simulator's answer delay (default 5)
#   FAULT_SEED           the simulator's fault seed (default 7)
#   FAULT_TIMEOUT        seconds before the script gives up (default 3600)
set -euo pipefail

NAME="fault-apns-errors.sh"
TIMEOUT="${FAULT_TIMEOUT:-3600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${FAULT_DEVICES:-100000}"
ERROR_RATE="${FAULT_ERROR_RATE:-0.025}"
LATENCY_MS="${FAULT_LATENCY_MS:-5}"
SEED="${FAULT_SEED:-7}"
PER_SEND=10000
RUN="apnsfault$(date +%s)$$"
fl_init

step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database

COMMON_FAULTS=(--rate-500 "$ERROR_RATE" --rate-503 "$ERROR_RATE" --refuse-stream-every 50 --seed "$SEED")
step="simulator"
FL_SIM_ARGS=("${COMMON_FAULTS[@]}" --goaway-after 100)
fl_start_simulator "$LATENCY_MS"
step="relay"
# No operator HTTP port: the default 127.0.0.1:9411 may belong to another relay on this machine.
FL_RELAY_ARGS=(--metrics-listen "")
fl_start_relay main

step="register"
log "registering $DEVICES devices through the relay"
fl_tool register --address "${RELAY_ADDRESS[main]}" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" \
    --out "$TMP/devices.tsv"
split -l "$PER_SEND" -d -a 3 "$TMP/devices.tsv" "$TMP/part-"

failures=0

# The simulator's statistics line `$1` (printed when it stops), from its newest block in sim.log.
sim_stat() { grep -F "$1" "$TMP/sim.log" | tail -n 1 | grep -oE '[0-9]+$' || echo 0; }

declare -A SUMMARY=()
# run_phase NAME: one Send per part of the devices, wait for every job, stop the simulator, account.
run_phase() {
    local phase="$1" part run job jobs=() started_ms
    step="send-$phase"
    log "phase $phase: simulator ${FL_SIM_ARGS[*]}"
    started_ms=$(date +%s%3N)
    : >"$TMP/delivered-$phase.txt"
    for part in "$TMP"/part-*; do
        run="$RUN-$phase-$(basename "$part")"
        job="$(fl_tool send --address "${RELAY_ADDRESS[main]}" --credential "$CREDENTIAL" --devices "$part" --run "$run")"
        [[ "$job" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $job"
        jobs+=("$job")
        echo "$job $part $run" >>"$TMP/jobs-$phase.txt"
    done
    say "phase $phase: ${#jobs[@]} job(s) accepted for $DEVICES devices"
    step="wait-$phase"
    for job in "${jobs[@]}"; do fl_wait_job_completed "$job"; done
    local fanout_ms=$(($(date +%s%3N) - started_ms))
    # Stop the simulator: it prints its statistics (GOAWAYs, drops, refused streams) into sim.log.
    fl_stop_pid "$SIM_PID" 10
    SIM_PID=""
    step="accounting-$phase"
    local requests=0 distinct=0 missing=0 unexpected=0 ok=0 other=0 s500=0 s503=0 twice=0 matches=yes
    local non200_delivered=0 not_last200=0
    while read -r job part run; do
        fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$job' AND outcome = 'delivered'" \
            >"$TMP/delivered-job.txt"
        cat "$TMP/delivered-job.txt" >>"$TMP/delivered-$phase.txt"
        ACC=()
        fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$run" --devices "$part" \
            --delivered "$TMP/delivered-job.txt")"
        requests=$((requests + ACC[requests]))
        distinct=$((distinct + ACC[distinct_tokens]))
        missing=$((missing + ACC[missing_tokens]))
        unexpected=$((unexpected + ACC[unexpected_tokens]))
        ok=$((ok + ACC[status_200]))
        other=$((other + ACC[status_other]))
        s500=$((s500 + ACC[status_500]))
        s503=$((s503 + ACC[status_503]))
        twice=$((twice + ACC[tokens_200_twice]))
        [ "${ACC[db_matches_sim]}" = yes ] || matches=no
        # Non-200 answers the simulator logged for tokens that ended delivered, and those of these tokens
        # whose last answer was not 200 (a non-200 answer not followed by a resend that got 200).
        read -r job_non200 job_not_last200 <<<"$("$PY" - "$TMP/sim.jsonl" "$run" "$TMP/delivered-job.txt" <<'PY'
import json, sys
log, run, delivered = sys.argv[1:]
marker = f'"fanout_run":"{run}"'
tokens = {line.strip() for line in open(delivered) if line.strip()}
count, last = 0, {}
for line in open(log):
    if run in line:
        entry = json.loads(line)
        token = entry.get("deviceToken")
        if marker in entry.get("payload", "").replace(" ", "") and token in tokens:
            last[token] = entry.get("status")
            if entry.get("status") != 200:
                count += 1
print(count, sum(1 for status in last.values() if status != 200))
PY
        )"
        non200_delivered=$((non200_delivered + job_non200))
        not_last200=$((not_last200 + job_not_last200))
    done <"$TMP/jobs-$phase.txt"
    local job_list
    job_list="$(awk '{printf "%s'\''%s'\''", (NR > 1 ? "," : ""), $1}' "$TMP/jobs-$phase.txt")"
    local jobs_completed rows rows_distinct rows_final rows_delivered rows_failed attempts max_attempt
    local job_devices job_delivered job_failed job_skipped
    read -r jobs_completed job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
        "SELECT count(*) FILTER (WHERE state = 'completed'), sum(devices), sum(delivered), sum(failed), sum(skipped)
         FROM jobs WHERE id IN ($job_list)")"
    read -r rows rows_distinct rows_final rows_delivered rows_failed attempts max_attempt <<<"$(fl_psql \
        "SELECT count(*), count(DISTINCT token),
                count(*) FILTER (WHERE outcome IN ('delivered', 'token_dead', 'retry_later', 'configuration_fault')),
                count(*) FILTER (WHERE outcome = 'delivered'), count(*) FILTER (WHERE outcome <> 'delivered'),
                coalesce(sum(attempt), 0), coalesce(max(attempt), 0)
         FROM deliveries WHERE tenant_id = 'circl' AND job_id IN ($job_list)")"
    local goaways drops refused
    goaways="$(sim_stat "GOAWAYs sent:")"
    drops="$(sim_stat "connections dropped:")"
    refused="$(sim_stat "streams refused:")"
    local retries=$((attempts - rows))
    local fanout_s="$((fanout_ms / 1000)).$((fanout_ms % 1000 / 100))"
    echo "fault-apns-errors accounting, phase $phase (run $RUN, $(date -u +%F)):"
    echo "  accepted                              $DEVICES devices in ${#jobs[@]} job(s), fan-out ${fanout_s}s"
    echo "  simulator requests for the jobs       $requests: $ok answered 200, $s500 500, $s503 503, $((other - s500 - s503)) other"
    echo "  simulator faults (its statistics)     $goaways GOAWAYs, $drops connections dropped, $refused streams refused"
    echo "  distinct tokens received              $distinct (missing $missing, unexpected $unexpected, answered 200 twice $twice)"
    echo "  delivery rows                         $rows ($rows_distinct distinct tokens, $rows_final with a final outcome)"
    echo "  delivered / failed rows               $rows_delivered / $rows_failed"
    echo "  jobs (psql)                           $jobs_completed completed; devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
    echo "  retries recorded (attempts - rows)    $retries (most attempts for one device $max_attempt); non-200 answers to delivered tokens $non200_delivered"
    check "every job completed" eq "$jobs_completed" "${#jobs[@]}"
    check "exactly one delivery row per device, each with a final outcome" eq "$rows:$rows_distinct:$rows_final" "$DEVICES:$DEVICES:$DEVICES"
    check "delivered + failed == accepted ($rows_delivered + $rows_failed == $DEVICES)" eq "$((rows_delivered + rows_failed))" "$DEVICES"
    check "job counters agree: devices == delivered + failed + skipped == accepted, delivered == delivered rows" \
        eq "$job_devices:$((job_delivered + job_failed + job_skipped)):$job_delivered" "$DEVICES:$DEVICES:$rows_delivered"
    check "every device reached the simulator, nothing unexpected" eq "$distinct:$missing:$unexpected" "$DEVICES:0:0"
    check "delivered rows name exactly the tokens the simulator answered 200" eq "$matches" yes
    check "the simulator answered 500 and 503 ($s500, $s503)" ge "$((s500 > 0 && s503 > 0))" 1
    check "every delivered device's last answer from the simulator was 200 (each 500/503 was followed by a resend)" \
        eq "$not_last200" 0
    if [ "$phase" = goaway ]; then
        # GOAWAY loses no answer, so every non-200 answer reached the relay and was counted as an attempt.
        check "every non-200 answer to a delivered device was counted as an attempt ($retries >= $non200_delivered)" \
            ge "$retries" "$non200_delivered"
    else
        # A dropped connection can take answers with it (the simulator's last answers before the drop),
        # which the relay never saw: it sends those requests again without counting an attempt.
        check "retries were recorded ($retries)" ge "$retries" 1
    fi
    check "streams were refused ($refused)" ge "$refused" 1
    if [ "$phase" = goaway ]; then
        check "GOAWAYs were sent ($goaways)" ge "$goaways" 1
    else
        check "connections were dropped ($drops)" ge "$drops" 1
    fi
    SUMMARY[$phase]="$rows_delivered delivered + $rows_failed failed of $DEVICES, $s500/$s503 500/503 and $refused refused streams retried ($retries retries), $goaways GOAWAYs, $drops drops"
}

run_phase goaway
step="simulator-drop"
FL_SIM_ARGS=("${COMMON_FAULTS[@]}" --drop-after 100)
fl_start_simulator "$LATENCY_MS"
run_phase drop

[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"
step="stop"
relay_stop main 30
step="done"
printf '\n%s: OK: %d devices per phase; goaway phase: %s; drop phase: %s; in %ds\n' \
    "$NAME" "$DEVICES" "${SUMMARY[goaway]}" "${SUMMARY[drop]}" "$(elapsed)"
