#!/usr/bin/env bash
# Ops/scenarios/two-relays.sh: two `pushrelay serve` processes on one database share one fan-out: a job accepted
# by one of them is sent page by page under leases by whichever relay claims each page (a relay takes up
# to 8 pages at once, so a small job may go to one), every device exactly once.
#
#   bash Ops/scenarios/two-relays.sh
#
# Steps, each fatal, all in a temporary folder; everything started is stopped on exit (also on failure):
#   1. a virtualenv with the Python client; an embedded PostgreSQL in $TMP/pg with circl's tenant file,
#      a fresh P-256 .p8 stored sealed under a fresh master key, a credential
#   2. `pushrelay apns-sim` as its own process, trusting the same .p8, answering after TWO_LATENCY_MS and
#      logging every request to $TMP/sim.jsonl
#   3. relay A, then relay B, both `pushrelay serve --data-dir $TMP/pg`: A starts the cluster, B reuses the
#      running one (EmbeddedPostgres shares a data folder between processes)
#   4. 5,000 devices registered through A by the Python client; one Send to their users through A
#   5. while the job runs, job_pages.lease_owner is sampled (psql) every 0.2 s: an owner is
#      "<host>-<pid>-<id>", so each page is attributed to the relay process that leased it
#   6. the accounting, each line checked: every page leased by exactly one of the two relays (each page
#      claimed once; whether both relays sent pages is shown); every token received exactly once (no crash: 0
#      duplicates); delivered rows == tokens received, the same tokens; the job completed with the right
#      counts (psql, and JobStatus asked of relay B, which did not accept the job)
#
# Environment:
#   PUSHRELAY_BIN     the relay binary (default .build/debug/pushrelay)
#   TWO_DEVICES       devices (default 5000; at most 10,000)
#   TWO_LATENCY_MS    the simulator's answer delay (default 500)
#   TWO_TIMEOUT       seconds before the script gives up (default 600)
set -euo pipefail

NAME="two-relays.sh"
TIMEOUT="${TWO_TIMEOUT:-600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICES="${TWO_DEVICES:-5000}"
LATENCY_MS="${TWO_LATENCY_MS:-500}"
RUN="two$(date +%s)$$"
fl_init

# --- 1. setup, 2. simulator, 3. two relays -------------------------------------------------------
step="setup"
log "python client, embedded PostgreSQL, circl key and credential"
python_env
fl_setup_database
step="simulator"
fl_start_simulator "$LATENCY_MS"
step="relays"
log "relay A and relay B on one cluster"
fl_start_relay A
fl_start_relay B
[ "${RELAY_PID[A]}" != "${RELAY_PID[B]}" ] || fail "one relay process?"

# --- 4. devices and the send ---------------------------------------------------------------------
step="register"
log "registering $DEVICES devices through relay A"
fl_tool register --address "${RELAY_ADDRESS[A]}" --credential "$CREDENTIAL" --count "$DEVICES" --run "$RUN" \
    --out "$TMP/devices.tsv"
step="send"
log "one Send to $DEVICES users through relay A"
send_started=$(date +%s%3N)
JOB="$(fl_tool send --address "${RELAY_ADDRESS[A]}" --credential "$CREDENTIAL" --devices "$TMP/devices.tsv" \
    --run "$RUN")"
[[ "$JOB" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the send answered no job id: $JOB"
say "job $JOB accepted by relay A"

# --- 5. watch the leases until the job completes -------------------------------------------------
step="wait-completed"
: >"$TMP/leases.txt"
while :; do
    check_deadline
    for name in A B; do
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
read -r pages pages_claimed_once pages_claimed_more <<<"$(fl_psql \
    "SELECT count(*), count(*) FILTER (WHERE claims = 1), count(*) FILTER (WHERE claims > 1)
     FROM job_pages WHERE job_id = '$JOB' AND page > 0")"
pages_seen="$(cut -d' ' -f1 "$TMP/page-owners.txt" | sort -u | wc -l)"
pages_two_owners="$(cut -d' ' -f1 "$TMP/page-owners.txt" | uniq -d | wc -l)"
pages_a="$(awk -v pid="${RELAY_PID[A]}" '$2 == pid' "$TMP/page-owners.txt" | wc -l)"
pages_b="$(awk -v pid="${RELAY_PID[B]}" '$2 == pid' "$TMP/page-owners.txt" | wc -l)"
pages_other="$(awk -v a="${RELAY_PID[A]}" -v b="${RELAY_PID[B]}" '$2 != a && $2 != b' "$TMP/page-owners.txt" | wc -l)"
devices_of() { # devices in the pages leased by pid $1
    local list
    list="$(awk -v pid="$1" '$2 == pid { print $1 }' "$TMP/page-owners.txt" | paste -sd, -)"
    [ -n "$list" ] || {
        echo 0
        return
    }
    fl_psql "SELECT coalesce(sum(coalesce(range_devices, cardinality(tokens))), 0) FROM job_pages WHERE job_id = '$JOB' AND page IN ($list)"
}
devices_a="$(devices_of "${RELAY_PID[A]}")"
devices_b="$(devices_of "${RELAY_PID[B]}")"

fl_psql "SELECT token FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB' AND outcome = 'delivered'" \
    >"$TMP/delivered.txt"
fl_read_accounting "$(fl_tool account --log "$TMP/sim.jsonl" --run "$RUN" --devices "$TMP/devices.tsv" \
    --delivered "$TMP/delivered.txt")"
read -r job_state job_devices job_delivered job_failed job_skipped <<<"$(fl_psql \
    "SELECT state, devices, delivered, failed, skipped FROM jobs WHERE id = '$JOB'")"
rows_total="$(fl_psql "SELECT count(*) FROM deliveries WHERE tenant_id = 'circl' AND job_id = '$JOB'")"
wire="$(fl_tool status --address "${RELAY_ADDRESS[B]}" --credential "$CREDENTIAL" --job "$JOB")"

failures=0

echo "two-relays accounting (run $RUN, job $JOB, $(date -u +%F)):"
echo "  devices registered                    $DEVICES"
echo "  pages                                 $pages (claimed once $pages_claimed_once, more than once $pages_claimed_more)"
echo "  pages leased by relay A               $pages_a ($devices_a devices; pid ${RELAY_PID[A]})"
echo "  pages leased by relay B               $pages_b ($devices_b devices; pid ${RELAY_PID[B]})"
echo "  simulator requests for the job        ${ACC[requests]} (${ACC[status_200]} answered 200, ${ACC[status_other]} other) on ${ACC[sim_connections]} connections"
echo "  distinct tokens received              ${ACC[distinct_tokens]} (missing ${ACC[missing_tokens]}, unexpected ${ACC[unexpected_tokens]})"
echo "  tokens received twice                 ${ACC[duplicate_tokens]}"
echo "  delivered rows of the job             ${ACC[db_delivered_rows]} (${ACC[db_delivered_distinct]} distinct tokens; $rows_total rows in all)"
echo "  job (psql)                            $job_state devices=$job_devices delivered=$job_delivered failed=$job_failed skipped=$job_skipped"
echo "  job (JobStatus via relay B)           $wire"
echo "  fan-out time                          ${fanout_s}s"
check "every page seen leased ($pages_seen of $pages), each by one owner" eq "$pages_seen:$pages_two_owners" "$pages:0"
check "every page claimed exactly once" eq "$pages_claimed_once" "$pages"
check "pages leased only by relay A or relay B" eq "$pages_other" 0
# Not a check: a relay claims up to FanOutTuning.pageLoops (8) pages at once, so a job of a few pages may be
# sent by one relay (Ops/scenarios/fault-node-killed.sh shows the others finishing what a relay left).
echo "  both relays sent pages                $( [ "$pages_a" -gt 0 ] && [ "$pages_b" -gt 0 ] && echo yes || echo "no (A $pages_a, B $pages_b)")"
check "pages of A and B cover the job's $DEVICES devices" eq "$((devices_a + devices_b))" "$DEVICES"
check "every device got it: distinct tokens == $DEVICES" eq "${ACC[distinct_tokens]}" "$DEVICES"
check "no token missing, none unexpected" eq "${ACC[missing_tokens]}:${ACC[unexpected_tokens]}" "0:0"
check "exactly once: 0 duplicates, requests == $DEVICES" eq "${ACC[duplicate_tokens]}:${ACC[requests]}" "0:$DEVICES"
check "every request answered 200" eq "${ACC[status_other]}" 0
check "delivered rows == distinct tokens received" eq "${ACC[db_delivered_rows]}" "${ACC[distinct_tokens]}"
check "one delivered row per token" eq "${ACC[db_delivered_distinct]}" "${ACC[db_delivered_rows]}"
check "delivered rows name exactly the tokens the simulator answered 200" eq "${ACC[db_matches_sim]}" yes
check "no other delivery rows for the job" eq "$rows_total" "$DEVICES"
check "job completed with $DEVICES devices delivered, none failed or skipped" \
    eq "$job_state $job_devices $job_delivered $job_failed $job_skipped" "completed $DEVICES $DEVICES 0 0"
check "JobStatus via relay B agrees" eq "$wire" "state=COMPLETED devices=$DEVICES delivered=$DEVICES failed=0 skipped=0"
[ "$failures" -eq 0 ] || fail "$failures accounting check(s) failed"

step="stop"
for name in B A; do
    relay_stop "$name" 30
done
step="done"
printf '\n%s: OK: %d devices, one job accepted by A, pages A %d (%d devices) + B %d (%d devices), every page claimed once, %d/%d tokens received exactly once, %d delivered rows, fan-out %ss, in %ds\n' \
    "$NAME" "$DEVICES" "$pages_a" "$devices_a" "$pages_b" "$devices_b" "${ACC[distinct_tokens]}" "$DEVICES" \
    "${ACC[db_delivered_rows]}" "$fanout_s" "$(elapsed)"
