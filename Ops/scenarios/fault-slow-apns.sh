#!/usr/bin/env bash
# Ops/scenarios/fault-slow-apns.sh: APNs (the simulator) answering every request after 500 ms
# during a fan-out, while a backend floods the relay with sends that wait for their outcome: the relay's
# memory stays bounded (VmRSS sampled), the APNs streams in flight stay bounded, and the back-pressure
# reaches the backend (the relay stops reading a connection at --max-in-flight requests, so the backend's
# answers come max_in_flight at a time); everything completes in the end, nothing is lost.
#
#   bash Ops/scenarios/fault-slow-apns.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. python client, embedded PostgreSQL with circl, `pushrelay apns-sim --latency-ms SLOW_LATENCY_MS`, one
#      relay with --max-in-flight SLOW_MAX_IN_FLIGHT and its metrics on a free port; SLOW_DEVICES devices
#   2. the relay's VmRSS (/proc/PID/status) sampled every 0.5 s, and its /metrics every second
#      (pushrelay_pool_streams_in_flight, pushrelay_pages_due), from before the fan-out to its end
#   3. one Send to every device (the fan-out), then, while it runs, SLOW_FLOOD single-user Sends with
#      wait (answered once APNs answered) written at once on one connection (Ops/scenarios/fault_tool.py flood)
#   4. the accounting, each line checked: the fan-out completed, every device recorded once, delivered rows
#      == tokens the simulator answered 200; every flood send acked and delivered; the flood's answers took
#      at least SLOW_FLOOD / max_in_flight x latency (the relay read at most max_in_flight at a time) and no
#      250 ms window held more than max_in_flight answers; APNs streams in flight never above the fan-out's
#      send window (pushrelay_fanout_send_window, sampled with them) plus max_in_flight; the RSS rose at most SLOW_RSS_LIMIT_MB
#      above the sample before the fan-out, and the last quarter of the samples no higher than the peak
#      of the first three quarters plus 10% (no steady growth)
#
# Environment:
#   PUSHRELAY_BIN          the relay binary (default .build/debug/pushrelay)
#   SLOW_DEVICES           fan-out devices (default 5000; at most 10,000)
#   SLOW_LATENCY_MS        the simulator's answer delay (default 500)
#   SLOW_MAX_IN_FLIGHT     the relay's --max-in-flight (default 16)
#   SLOW_FLOOD             waited single sends on one connection (default 320)
#   SLOW_RSS_LIMIT_MB      most RSS growth allowed (default 256)
#   SLOW_TIMEOUT           seconds before the script gives up (default 600)
set -euo pipefail

NAME="fault-slow-apns.sh"
TIMEOUT="${SLOW_TIMEOUT:-600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${SLOW_DEVICES:-5000}"
LATENCY_MS="${SLOW_LATENCY_MS:-500}"
MAX_IN_FLIGHT="${SLOW_MAX_IN_FLIGHT:-16}"
FLOOD="${SLOW_FLOOD:-320}"
RSS_LIMIT_MB="${SLOW_RSS_LIMIT_MB:-256}"
RUN="slowapns$(date +%s)$$"
fl_init
command -v curl >/dev/null || fail "curl is missing"

step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relay"
METRICS_PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
FL_RELAY_ARGS=(--max-in-flight "$MAX_IN_FLIGHT" --metrics-listen "127.0.0.1:$METRICS_PORT")
fl_start_relay main
ADDRESS="${RELAY_ADDRESS[main]}"
RELAY="${RELAY_PID[main]}"
step="register"
log "registering $DEVICES devices through the relay"
fl_tool register --address "$ADDRESS" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" --out "$TMP/devices.tsv"

# --- 2. samplers ---------------------------------------------------------------------------------
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$RELAY/status" 2>/dev/null || echo 0; }
RSS_BEFORE="$(rss_kb)"
(
    while kill -0 "$RELAY" 2>/dev/null; do
        echo "$(date +%s%3N) $(awk '/^VmRSS:/ {print $2}' "/proc/$RELAY/status" 2>/dev/null || echo 0)"
        sleep 0.5
    done
) >"$TMP/rss.txt" &
FL_OTHER_PIDS+=($!)
(
    while kill -0 "$RELAY" 2>/dev/null; do
        m="$(curl -s --max-time 2 "http://127.0.0.1:$METRICS_PORT/metrics" || true)"
        streams="$(printf '%s\n' "$m" | awk '/^pushrelay_pool_streams_in_flight/ {s += $NF} END {print s + 0}')"
        due="$(printf '%s\n' "$m" | awk '/^pushrelay_pages_due/ {s += $NF} END {print s + 0}')"
        window="$(printf '%s\n' "$m" | awk '/^pushrelay_fanout_send_window/ {s += $NF} END {print s + 0}')"
        echo "$(date +%s%3N) $streams $due $window"
        sleep 1
    done
) >"$TMP/metrics.txt" &
FL_OTHER_PIDS+=($!)

# --- 3. the fan-out and the flood ----------------------------------------------------------------
step="send"
log "one Send to $DEVICES users, APNs answering after ${LATENCY_MS} ms; $FLOOD waited sends on one connection"
send_started=$(date +%s%3N)
JOB="$(fl_tool send --address "$ADDRESS" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "fan-out job $JOB accepted"
step="flood"
head -n "$FLOOD" "$TMP/devices.tsv" >"$TMP/flood-devices.tsv"
fl_read_accounting "$(cd "$TMP" && timeout "$(time_left)" "$PY" "$ROOT/Ops/scenarios/fault_tool.py" flood --address "$ADDRESS" \
    --credential "$CREDENTIAL" --devices "$TMP/flood-devices.tsv" --run "$RUN-flood" --count "$FLOOD" --wait)"
declare -A FLOODACC=()
for key in "${!ACC[@]}"; do FLOODACC[$key]="${ACC[$key]}"; done
say "flood: ${FLOODACC[answers]} answers (${FLOODACC[codes]}), p50 ${FLOODACC[latency_p50_ms]} ms, max ${FLOODACC[latency_max_ms]} ms"
step="wait-completed"
fl_wait_job_completed "$JOB"
fanout_ms=$(($(date +%s%3N) - send_started))
sleep 1.5 # one more sample of each after the end
for pid in "${FL_OTHER_PIDS[@]}"; do fl_stop_pid "$pid" 5; done
FL_OTHER_PIDS=()

# --- 4. accounting -------------------------------------------------------------------------------
step="accounting"
log "accounting"
fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
ACC=()
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
read -r rows_total rows_distinct <<<"$(fl_psql \
    "SELECT count(*), count(DISTINCT token) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
# The flood's jobs (idempotency keys RUN-flood-f<i>): completed and delivered.
read -r flood_jobs flood_done <<<"$(fl_psql \
    "SELECT count(*), count(*) FILTER (WHERE j.state = 'completed' AND j.delivered = 1)
     FROM jobs j WHERE j.tenant_id = 'circl' AND j.idempotency_key LIKE '$RUN-flood-f%'" 2>/dev/null || echo "? ?")"
# (the payload is a JSON string inside the log's JSON line: its quotes are escaped)
flood_sim="$(grep -c -F "\\\"fanout_run\\\":\\\"$RUN-flood\\\"" "$TMP/sim.jsonl" || true)"
read -r rss_samples rss_peak rss_last rss_head_peak rss_tail_peak <<<"$(awk '
    { v[NR] = $2; if ($2 > p) p = $2 }
    END { q = int(NR * 3 / 4); for (i = 1; i <= NR; i++) { if (i <= q) { if (v[i] > h) h = v[i] } else if (v[i] > t) t = v[i] }
          printf "%d %d %d %d %d\n", NR, p, v[NR], h, t }' "$TMP/rss.txt")"
# Each sample's streams against the largest send window seen up to it (the fan-out's sends in flight stay within
# the window, SendWindow) plus max_in_flight: the samples above that bound are counted.
read -r streams_max due_max metric_samples window_max over_bound <<<"$(awk -v extra="$MAX_IN_FLIGHT" '
    { if ($2 > s) s = $2; if ($3 > d) d = $3; if ($4 > w) w = $4; if ($2 > w + extra) o++ }
    END { printf "%d %d %d %d %d\n", s, d, NR, w, o }' "$TMP/metrics.txt")"
# The flood's answers, max_in_flight at a time, each after at least one APNs latency.
flood_floor_ms=$((FLOOD / MAX_IN_FLIGHT * LATENCY_MS))

failures=0

mb() { echo "$(($1 / 1024))"; }
fanout_s="$((fanout_ms / 1000)).$((fanout_ms % 1000 / 100))"
echo "fault-slow-apns accounting (run $RUN, job $JOB, $(date -u +%F)):"
echo "  APNs latency / relay max_in_flight    ${LATENCY_MS} ms / $MAX_IN_FLIGHT (HELLO_OK says ${FLOODACC[relay_max_in_flight]})"
echo "  relay RSS                             $(mb "$RSS_BEFORE") MB before the fan-out, peak $(mb "$rss_peak") MB, last $(mb "$rss_last") MB ($rss_samples samples; peak of the first 3/4 $(mb "$rss_head_peak") MB, of the last 1/4 $(mb "$rss_tail_peak") MB)"
echo "  APNs streams in flight (metrics)      max $streams_max (bound: the send window, at most $window_max, + $MAX_IN_FLIGHT; $over_bound samples above it); pages due max $due_max ($metric_samples samples)"
echo "  flood                                 $FLOOD waited sends on one connection: ${FLOODACC[answers]} answers (${FLOODACC[codes]})"
echo "    answer latency                      p50 ${FLOODACC[latency_p50_ms]} ms, p90 ${FLOODACC[latency_p90_ms]} ms, last ${FLOODACC[latency_max_ms]} ms (floor $FLOOD / $MAX_IN_FLIGHT x ${LATENCY_MS} ms = ${flood_floor_ms} ms)"
echo "    answers per 250 ms                  most ${FLOODACC[most_answers_in_250ms]}: ${FLOODACC[waves]}"
echo "    flood jobs (psql)                   $flood_jobs, $flood_done completed and delivered; simulator requests $flood_sim"
echo "  fan-out                               ${fanout_s}s; simulator requests ${ACC[requests]} (${ACC[status_200]} answered 200)"
echo "  fan-out distinct tokens received      ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]}, twice ${ACC[duplicate_tokens]})"
echo "  fan-out delivery rows                 $rows_total ($rows_distinct distinct tokens, ${ACC[db_delivered_rows]} delivered)"
echo "  fan-out job (psql)                    $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
check "the relay announced max_in_flight $MAX_IN_FLIGHT" eq "${FLOODACC[relay_max_in_flight]}" "$MAX_IN_FLIGHT"
check "every flood send acked after its outcome" eq "${FLOODACC[codes]}" "acked:$FLOOD"
check "the flood's jobs completed and delivered" eq "$flood_jobs:$flood_done" "$FLOOD:$FLOOD"
check "back-pressure: the flood took >= $FLOOD / $MAX_IN_FLIGHT x ${LATENCY_MS} ms (${FLOODACC[latency_max_ms]} ms)" \
    ge "${FLOODACC[latency_max_ms]}" "$flood_floor_ms"
check "back-pressure: at most max_in_flight answers in any 250 ms (${FLOODACC[most_answers_in_250ms]})" \
    le "${FLOODACC[most_answers_in_250ms]}" "$MAX_IN_FLIGHT"
check "APNs streams in flight sampled and within the send window + $MAX_IN_FLIGHT ($streams_max, window at most $window_max)" \
    eq "$((streams_max > 0 && window_max > 0 && over_bound == 0))" 1
check "RSS growth $(mb $((rss_peak - RSS_BEFORE))) MB <= ${RSS_LIMIT_MB} MB" le "$((rss_peak - RSS_BEFORE))" "$((RSS_LIMIT_MB * 1024))"
check "no steady RSS growth: last quarter's peak <= first three quarters' peak + 10%" \
    le "$rss_tail_peak" "$((rss_head_peak * 110 / 100))"
check "fan-out: every device reached the simulator once, nothing unexpected" \
    eq "${ACC[distinct_tokens]}:${ACC[missing_tokens]}:${ACC[unexpected_tokens]}:${ACC[duplicate_tokens]}" "$DEVICES:0:0:0"
check "fan-out: one delivery row per device, exactly the tokens the simulator answered 200" \
    eq "$rows_total:$rows_distinct:${ACC[db_matches_sim]}" "$DEVICES:$DEVICES:yes"
check "fan-out job completed with every device delivered" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"

step="stop"
relay_stop main 30
step="done"
printf '\n%s: OK: APNs at %d ms, %d-device fan-out in %ss plus %d waited sends on one connection (max_in_flight %d): answers at most %d per 250 ms, the last after %d ms (floor %d ms); APNs streams max %d; RSS %d MB before, peak %d MB, last %d MB; every device and send delivered and recorded, in %ds\n' \
    "$NAME" "$LATENCY_MS" "$DEVICES" "$fanout_s" "$FLOOD" "$MAX_IN_FLIGHT" "${FLOODACC[most_answers_in_250ms]}" \
    "${FLOODACC[latency_max_ms]}" "$flood_floor_ms" "$streams_max" "$(mb "$RSS_BEFORE")" "$(mb "$rss_peak")" "$(mb "$rss_last")" "$(elapsed)"
