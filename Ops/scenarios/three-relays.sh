#!/usr/bin/env bash
# Ops/scenarios/three-relays.sh: three `pushrelay serve` processes on one PostgreSQL behind HAProxy (TCP), all on
# loopback: backends connect to HAProxy only; the relays share the fan-out through page leases and each
# tenant's notifications_per_second through their heartbeats in relay_nodes.
#
#   bash Ops/scenarios/three-relays.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. a virtualenv with the Python client; an embedded PostgreSQL in $TMP/pg with circl's tenant file
#      (notifications_per_second 500), a fresh .p8 sealed under a fresh master key, a credential
#   2. `pushrelay apns-sim` as its own process, trusting the same .p8, logging every request
#   3. relays A, B and C (`pushrelay serve --data-dir $TMP/pg`, free ports), then HAProxy in front of them
#      (mode tcp, round robin, TCP health checks) on a free port of 127.0.0.1; the script waits until each
#      relay has seen the three heartbeats (it logs "live relays changed ... relays=3")
#   4. THREE_DEVICES devices registered through HAProxy (4 connections, spread over the relays), one Send
#      to their users through HAProxy
#   5. while the job runs, job_pages.lease_owner is sampled, so each page is attributed to its relay
#   6. the accounting, each line checked: every relay got client connections through HAProxy and sent
#      pages; every page claimed once; every token received exactly once; delivered rows == tokens received;
#      the job completed (psql, and JobStatus through HAProxy); three live relays in relay_nodes; and the
#      three together sent at most circl's 500 notifications/s, and at least 80% of it (each paced at its share
#      of the pages leased for circl, or at 500 / 3 before its heartbeat saw one), with APNs 80 ms away
#
# Environment:
#   PUSHRELAY_BIN       the relay binary (default .build/debug/pushrelay)
#   THREE_DEVICES       devices (default 6000: pages of 250, 2,000, 2,000 and 1,750; at most 10,000)
#   THREE_LATENCY_MS    the simulator's answer delay (default 80, a round trip to Apple)
#   THREE_TIMEOUT       seconds before the script gives up (default 600)
set -euo pipefail

NAME="three-relays.sh"
TIMEOUT="${THREE_TIMEOUT:-600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${THREE_DEVICES:-6000}"
LATENCY_MS="${THREE_LATENCY_MS:-80}"
RATE=500 # circl's notifications_per_second (Tenants/circl.yaml)
RUN="three$(date +%s)$$"
fl_init
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || fail "haproxy is missing (bash Ops/scripts/install-deps.sh)"
HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)"
grep -q "notifications_per_second: $RATE\$" Tenants/circl.yaml || fail "circl's rate is not $RATE any more"

# --- 1. setup, 2. simulator, 3. three relays and HAProxy ----------------------------------------
step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relays"
fl_start_relays_behind_haproxy

# --- 4. devices and the send, through HAProxy -----------------------------------------------------
step="register"
log "registering $DEVICES devices through HAProxy"
fl_tool register --address "$LB" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" --out "$TMP/devices.tsv"
step="send"
log "one Send to $DEVICES users through HAProxy"
send_started=$(date +%s%3N)
JOB="$(fl_tool send --address "$LB" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "job $JOB accepted"

# --- 5. watch the leases until the job completes -------------------------------------------------
step="wait-completed"
: >"$TMP/leases.txt"
while :; do
    check_deadline
    for name in A B C; do
        kill -0 "${RELAY_PID[$name]}" 2>/dev/null || fail "relay $name exited during the fan-out"
    done
    fl_psql "SELECT page, lease_owner FROM job_pages WHERE job_id = '$JOB' AND lease_owner IS NOT NULL" \
        >>"$TMP/leases.txt" || true
    state="$(fl_psql "SELECT state FROM jobs WHERE id = '$JOB'" || true)"
    case "$state" in
    completed) break ;;
    failed | cancelled) fail "job $JOB ended $state" ;;
    esac
    sleep 0.2
done
fanout_ms=$(($(date +%s%3N) - send_started))
fanout_s="$((fanout_ms / 1000)).$((fanout_ms % 1000 / 100))"
say "job completed ${fanout_s}s after the send"

# --- 6. accounting -------------------------------------------------------------------------------
step="accounting"
log "accounting"
# page -> the pid in its lease owner ("<host>-<pid>-<8 characters>").
sort -u "$TMP/leases.txt" | while read -r page owner; do
    [ -n "$page" ] || continue
    rest="${owner%-*}"
    echo "$page ${rest##*-}"
done | sort -k1,1n -k2,2n -u >"$TMP/page-owners.txt"
read -r pages pages_claimed_once <<<"$(fl_psql \
    "SELECT count(*), count(*) FILTER (WHERE claims = 1) FROM job_pages WHERE job_id = '$JOB' AND page > 0")"
pages_seen="$(cut -d' ' -f1 "$TMP/page-owners.txt" | sort -u | wc -l)"
pages_two_owners="$(cut -d' ' -f1 "$TMP/page-owners.txt" | uniq -d | wc -l)"
declare -A PAGES=() CONNECTIONS=()
relays_with_pages=0
relays_with_clients=0
for name in A B C; do
    PAGES[$name]="$(awk -v pid="${RELAY_PID[$name]}" '$2 == pid' "$TMP/page-owners.txt" | wc -l)"
    CONNECTIONS[$name]="$(grep -c "\] authenticated" "$TMP/relay-$name.log" || true)"
    [ "${PAGES[$name]}" -gt 0 ] && relays_with_pages=$((relays_with_pages + 1))
    [ "${CONNECTIONS[$name]}" -gt 0 ] && relays_with_clients=$((relays_with_clients + 1))
done
pages_other="$(awk -v a="${RELAY_PID[A]}" -v b="${RELAY_PID[B]}" -v c="${RELAY_PID[C]}" \
    '$2 != a && $2 != b && $2 != c' "$TMP/page-owners.txt" | wc -l)"

fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
rows_total="$(fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
# The three relays' joint send rate: delivered rows over the time between the first and the last send.
send_rate="$(fl_psql "SELECT round((count(*) - 1) / greatest(extract(epoch FROM max(sent_at) - min(sent_at)), 0.001))
    FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'")"
wire="$(fl_tool status --address "$LB" --credential "$CREDENTIAL" --job "$JOB")"

failures=0

echo "three-relays accounting (run $RUN, job $JOB, $(date -u +%F)):"
echo "  HAProxy                               $LB -> ${RELAY_ADDRESS[A]} ${RELAY_ADDRESS[B]} ${RELAY_ADDRESS[C]}"
echo "  live relays in relay_nodes            $live_nodes (circl's $RATE/s shared by the pages each relay holds)"
for name in A B C; do
    printf '  relay %s (pid %s)                   %s client connections, %s pages\n' "$name" "${RELAY_PID[$name]}" \
        "${CONNECTIONS[$name]}" "${PAGES[$name]}"
done
echo "  devices registered                    $DEVICES"
echo "  pages                                 $pages (claimed once $pages_claimed_once)"
echo "  simulator requests for the job        ${ACC[requests]} (${ACC[status_200]} answered 200, ${ACC[status_other]} other)"
echo "  distinct tokens received              ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]}, twice ${ACC[duplicate_tokens]})"
echo "  delivered rows of the job             ${ACC[db_delivered_rows]} ($rows_total rows in all)"
echo "  job (psql)                            $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
echo "  job (JobStatus through HAProxy)       $wire"
echo "  joint send rate                       ${send_rate}/s (circl's limit $RATE/s)"
echo "  fan-out time                          ${fanout_s}s"
check "three live relays in relay_nodes" eq "$live_nodes" 3
check "every relay got client connections through HAProxy" eq "$relays_with_clients" 3
# Not a check: a relay claims up to FanOutTuning.pageLoops (8) pages at once, so a job of a few pages may be
# sent by one relay; Ops/scenarios/fault-node-killed.sh shows the others finishing what a relay left.
echo "  relays that sent pages                ${relays_with_pages} of 3"
check "every page seen leased ($pages_seen of $pages), each by one owner" eq "$pages_seen:$pages_two_owners" "$pages:0"
check "every page claimed exactly once" eq "$pages_claimed_once" "$pages"
check "pages leased only by the three relays" eq "$pages_other" 0
check "every device got it exactly once: $DEVICES tokens, 0 duplicates, $DEVICES requests" \
    eq "${ACC[distinct_tokens]}:${ACC[duplicate_tokens]}:${ACC[requests]}" "$DEVICES:0:$DEVICES"
check "no token missing, none unexpected, every request answered 200" \
    eq "${ACC[missing_tokens]}:${ACC[unexpected_tokens]}:${ACC[status_other]}" "0:0:0"
check "delivered rows name exactly the tokens the simulator answered 200" eq "${ACC[db_matches_sim]}" yes
check "no other delivery rows for the job" eq "$rows_total" "$DEVICES"
check "job completed with $DEVICES devices delivered, none failed or skipped" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
check "JobStatus through HAProxy agrees" eq "$wire" "state=COMPLETED devices=$DEVICES delivered=$DEVICES failed=0 skipped=0"
# 5% above the rate for the pacers' 50 ms bursts and the rounding of the measured window.
check "the three relays together stayed within circl's $RATE/s (${send_rate}/s)" le "$send_rate" $((RATE * 105 / 100))
# And near it: the pacing, not the round trip to APNs or the send window, sets the rate.
check "the three relays together sent at 80% of circl's $RATE/s or more (${send_rate}/s)" ge "$send_rate" $((RATE * 80 / 100))
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"

step="stop"
fl_stop_pid "${FL_OTHER_PIDS[0]}" 10
FL_OTHER_PIDS=()
for name in C B; do
    relay_stop "$name" 30
done
# A stopped relay removes its heartbeat row (relay A runs the embedded cluster: it stops last).
left="$(fl_psql "SELECT count(*) FROM relay_nodes")"
[ "$left" = 1 ] || fail "relay_nodes holds $left rows after relays B and C stopped (1 expected: A's)"
relay_stop A 30
step="done"
printf '\n%s: OK: %d devices through HAProxy, pages A %d + B %d + C %d, every page claimed once, %d/%d tokens received exactly once, %d delivered rows, %s/s jointly (limit %d), fan-out %ss, stopped relays left relay_nodes, in %ds\n' \
    "$NAME" "$DEVICES" "${PAGES[A]}" "${PAGES[B]}" "${PAGES[C]}" "${ACC[distinct_tokens]}" "$DEVICES" \
    "${ACC[db_delivered_rows]}" "$send_rate" "$RATE" "$fanout_s" "$(elapsed)"
