#!/usr/bin/env bash
# Ops/bench/bench-loadtest.sh: THE benchmark of the relay, in one run (not a test: it judges nothing, it measures).
#
#   bash Ops/bench/bench-loadtest.sh
#
# Builds pushrelay in release mode and runs `pushrelay loadtest`: 1,000 idle connections, 2,000 single sends,
# 400 group sends, the engine alone (`pushrelay apns push` against the same APNs simulator) as the baseline,
# then the scaling steps: fan-outs of 10,000, 100,000 and 1,000,000 devices, each to a whole topic of
# its own tenant (the 10,000 one, a fraction of a second, five times: its figures are the run of median time,
# and every run's share is printed), then an FCM fan-out of 1,000,000 FCM devices and a mixed one of 1,000,000
# (half APNs, half FCM) of dispo through the FCM simulator, everything on this machine (relay, simulators,
# PostgreSQL, load generator). The FCM fan-out's relay CPU per notification is compared with the APNs fan-out of
# its size (target: at most 1.5 times). Prints the
# report, then the figures against the load-test targets and the ratios between the steps. The report is
# written to Ops/results/ (loadtest-report.json, .txt, .svg: meant to be committed).
#
# Environment:
#   LOADTEST_FANOUTS=10000,100000,1000000   fan-out sizes
#   LOADTEST_FCM_FANOUT=1000000             FCM fan-out size (0 skips it)
#   LOADTEST_MIXED_FANOUT=1000000           mixed fan-out size, half APNs and half FCM (0 skips it)
#   LOADTEST_ARGS="..."                     more `pushrelay loadtest` options (see --help)
#   PUSHRELAY_BIN                           use this binary instead of building one
#   LOADTEST_RESULTS=Ops/results            where the report goes
#   LOADTEST_APNS_LATENCIES=80,200          then the same fan-outs again with the simulator answering after each of
#                                           these round trips in ms ("" skips them), with LOADTEST_LATENT_SINGLES
#                                           (500) single sends: reports in $RESULTS/apns-<MS>ms/; each fan-out's
#                                           figure at every latency with its ratio to 0 ms, the single sends' p99s and
#                                           the simulator's strict counts, printed and written to
#                                           $RESULTS/loadtest-latency.txt
#   LOADTEST_APNS_JITTER_MS=0               up to this much more per answer in those runs
# (The latency runs are APNs's only: the FCM and mixed fan-outs run at loopback.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -d /opt/swift/usr/bin ]; then export PATH="/opt/swift/usr/bin:$PATH"; fi
RESULTS="${LOADTEST_RESULTS:-$ROOT/Ops/results}"
FANOUTS="${LOADTEST_FANOUTS:-10000,100000,1000000}"
FCM_FANOUT="${LOADTEST_FCM_FANOUT:-1000000}"
MIXED_FANOUT="${LOADTEST_MIXED_FANOUT:-1000000}"
LATENCIES="${LOADTEST_APNS_LATENCIES-80,200}"
JITTER_MS="${LOADTEST_APNS_JITTER_MS:-0}"
LATENT_SINGLES="${LOADTEST_LATENT_SINGLES:-500}"
if [ -z "${PUSHRELAY_BIN:-}" ]; then
    echo "bench-loadtest: building pushrelay (release)"
    swift build -c release --product pushrelay
    PUSHRELAY_BIN="$(swift build -c release --show-bin-path)/pushrelay"
fi
mkdir -p "$RESULTS"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain -- Sources Package.swift 2>/dev/null)" ]; then commit="$commit+uncommitted"; fi
# shellcheck disable=SC2086 # LOADTEST_ARGS is a list of options
"$PUSHRELAY_BIN" loadtest --fan-outs "$FANOUTS" --fcm-fan-out "$FCM_FANOUT" --mixed-fan-out "$MIXED_FANOUT" \
    --output "$RESULTS" ${LOADTEST_ARGS:-}
python3 - "$RESULTS/loadtest-report.json" "$commit" <<'PY' | tee "$RESULTS/loadtest-targets.txt"
import json, sys

report = json.load(open(sys.argv[1]))
print(f"\n# figures against the load-test targets (commit {sys.argv[2]}, {report['date']}, {report['machine']})")
engine = (report.get("engine_baseline") or {}).get("notifications_per_second", 0)
fan_outs = report["fan_outs"]
def line(name, value, target, met):
    print(f"{name:<52} {value:<28} target {target:<18} {'met' if met else 'NOT met'}")
if fan_outs:
    best = max(fan_outs, key=lambda f: f["notifications_per_second"])
    largest = fan_outs[-1]
    for f in fan_outs:
        line(f"fan-out {f['size']:,}: notifications/s end to end", f"{f['notifications_per_second']:,.0f}/s",
             ">= 25,000/s", f["notifications_per_second"] >= 25000)
        if engine:
            runs = f.get("runs") or []
            line(f"fan-out {f['size']:,}: share of the engine alone ({engine:,.0f}/s)"
                 + (f", median of {len(runs)} runs" if runs else ""),
                 f"{100 * f['notifications_per_second'] / engine:.1f}%", ">= 50%",
                 f["notifications_per_second"] >= engine / 2)
            if runs:
                shares = [100 * run["notifications_per_second"] / engine for run in runs]
                print(f"{'':<4}its runs: {', '.join(f'{share:.1f}%' for share in shares)} "
                      f"({sum(share >= 50 for share in shares)} of {len(runs)} at 50% or more)")
    for previous, f in zip(fan_outs, fan_outs[1:]):
        ratio = f["seconds"] / previous["seconds"]
        size_ratio = f["size"] / previous["size"]
        line(f"time {f['size']:,} / time {previous['size']:,} (sizes x{size_ratio:.0f})", f"{ratio:.2f}",
             f"<= {1.2 * size_ratio:.0f}", ratio <= 1.2 * size_ratio)
    line(f"relay peak RSS in the {largest['size']:,} fan-out", f"{largest['relay_peak_rss_mi_b']:.1f} MiB",
         "<= 300 MB", largest["relay_peak_rss_mi_b"] * 1.048576 <= 300)
    for f in fan_outs:
        print(f"{'':<4}fan-out {f['size']:,}: relay CPU {f['relay_cpu_seconds_per100k']:.2f} s/100k, "
              f"PostgreSQL {f['postgres_rows_per_second']:,.0f} rows/s ({f['delivery_rows_per_second']:,.0f} "
              f"delivery rows/s)")
for name, key in [("FCM", "fcm_fan_out"), ("mixed", "mixed_fan_out")]:
    f = report.get(key)
    if not f:
        continue
    ratio = f.get("apns_cpu_ratio")
    fcm = f.get("fcm_devices", f["size"])
    print(f"{'':<4}{name} fan-out {f['size']:,} ({f['size'] - fcm:,} APNs + {fcm:,} FCM): "
          f"{f['seconds']:.2f} s, {f['notifications_per_second']:,.0f}/s, relay CPU "
          f"{f['relay_cpu_seconds_per100k']:.2f} s/100k, peak RSS {f['relay_peak_rss_mi_b']:.1f} MiB")
    if ratio is None:
        print(f"{'':<4}{name} fan-out {f['size']:,}: no APNs fan-out of its size to compare its CPU with")
    elif name == "FCM":
        line(f"FCM fan-out {f['size']:,}: relay CPU per notification / APNs's", f"{ratio:.2f}x",
             "<= 1.5x at 1,000,000", ratio <= 1.5)
    else:
        print(f"{'':<4}mixed fan-out {f['size']:,}: relay CPU per notification {ratio:.2f}x the APNs fan-out's")
singles = report.get("singles")
if singles:
    line("single send p99 to the ack", f"{singles['ack_milliseconds']['p99']:.2f} ms", "<= 10 ms",
         singles["ack_milliseconds"]["p99"] <= 10)
    line("single send p99 to the APNs answer", f"{singles['apns_milliseconds']['p99']:.2f} ms", "<= 25 ms",
         singles["apns_milliseconds"]["p99"] <= 25)
idle = report.get("idle_connections")
if idle:
    line(f"{idle['count']:,} idle connections: relay memory each", f"{idle['kib_per_connection']:.1f} KiB",
         "<= 64 KiB", idle["kib_per_connection"] <= 64)
accounting = report["accounting"]
print(f"accounting: {accounting['accepted']:,} accepted, {accounting['recorded']:,} recorded, "
      f"{'consistent' if not accounting['problems'] and accounting['accepted'] == accounting['recorded'] else 'INCONSISTENT'}")
PY
echo "bench-loadtest: report in ${RESULTS#"$ROOT"/}/loadtest-report.{json,txt,svg}, targets in loadtest-targets.txt"
[ -n "$LATENCIES" ] || exit 0

# The same fan-outs against an APNs that answers after Apple's round trips, with single sends (no groups or idle
# connections: their figures are the loopback run's). The simulator's own counts, from its log in the kept work
# folder, say whether the relay kept within its stream limits and made one provider token per connection.
LATENT_REPORTS=()
for LATENCY_MS in ${LATENCIES//,/ }; do
    LATENT="$RESULTS/apns-${LATENCY_MS}ms"
    WORK="$(mktemp -d /tmp/pushrelay-bench-XXXXXX)"
    chmod 755 "$WORK" # the embedded PostgreSQL runs as its own user
    mkdir -p "$LATENT"
    echo "bench-loadtest: the fan-outs again, the APNs simulator answering after ${LATENCY_MS} ms (+ up to ${JITTER_MS} ms)"
    # shellcheck disable=SC2086 # LOADTEST_ARGS is a list of options
    "$PUSHRELAY_BIN" loadtest --fan-outs "$FANOUTS" --output "$LATENT" --apns-latency-ms "$LATENCY_MS" \
        --apns-latency-jitter-ms "$JITTER_MS" --singles "$LATENT_SINGLES" --groups 0 --idle-connections 0 \
        --short-fan-out-runs 1 --work-dir "$WORK/run" --keep-work-dir ${LOADTEST_ARGS:-}
    grep -E '^(connections accepted|requests received|  |provider tokens seen|streams refused|streams over)' \
        "$WORK/run/apns-sim.log" >"$LATENT/simulator-counts.txt" || true
    rm -rf "$WORK"
    LATENT_REPORTS+=("$LATENT")
done
python3 - "$RESULTS/loadtest-report.json" "$commit" "${LATENT_REPORTS[@]}" <<'PY' | tee "$RESULTS/loadtest-latency.txt"
import json, os, re, sys

loopback = json.load(open(sys.argv[1]))
commit, folders = sys.argv[2], sys.argv[3:]
at_loopback = {f["size"]: f for f in loopback["fan_outs"]}
print(f"\n# fan-outs at 0 ms and at Apple's round trips (commit {commit}, {loopback['date']}, {loopback['machine']})")
print("targets: 1,000,000 at 80 ms >= 90% of 0 ms and at 200 ms >= 75%; relay peak RSS <= 300 MB; single sends' ack p99"
      " <= 10 ms and APNs answer p99 <= round trip + 20 ms; no stream over the limit, one provider token a connection")
print(f"{'round trip':<11} {'fan-out':<10} {'0 ms notif/s':>13} {'notif/s':>9} {'ratio':>7} {'peak RSS MiB':>13}")
for folder in folders:
    latent = json.load(open(os.path.join(folder, "loadtest-report.json")))
    latency = latent["configuration"].get("apns_latency_milliseconds", 0)
    jitter = latent["configuration"].get("apns_latency_jitter_milliseconds", 0)
    name = f"{latency} ms" + (f" +{jitter}" if jitter else "")
    for f in latent["fan_outs"]:
        base = at_loopback.get(f["size"])
        if not base:
            continue
        ratio = f["notifications_per_second"] / base["notifications_per_second"]
        target = 0.90 if latency <= 80 else 0.75
        met = "" if f["size"] != 1_000_000 else ("  met" if ratio >= target else "  NOT met")
        print(f"{name:<11} {f['size']:<10,} {base['notifications_per_second']:>13,.0f} {f['notifications_per_second']:>9,.0f} "
              f"{100 * ratio:>6.1f}% {f['relay_peak_rss_mi_b']:>13.1f}{met}")
    singles = latent.get("singles")
    if singles:
        ack, answer = singles["ack_milliseconds"]["p99"], singles["apns_milliseconds"]["p99"]
        print(f"{name:<11} {singles['count']} single sends: ack p99 {ack:.2f} ms ({'met' if ack <= 10 else 'NOT met'}), "
              f"APNs answer p99 {answer:.2f} ms ({'met' if answer <= latency + jitter + 20 else 'NOT met'} "
              f"<= {latency + jitter + 20} ms), {singles['without_receipt']} without receipt")
    counts = open(os.path.join(folder, "simulator-counts.txt")).read()
    number = lambda pattern: int((re.search(pattern, counts) or [None, "-1"])[1])
    over, refused = number(r"streams over the announced limit: (\d+)"), number(r"streams refused: (\d+)")
    tokens = re.search(r"provider tokens seen: (\d+) on (\d+) connections", counts)
    churn = int((re.search(r"(?i)toomanyprovidertokenupdates: (\d+)", counts) or [None, "0"])[1])
    one_each = bool(tokens) and tokens[1] == tokens[2]
    print(f"{name:<11} simulator: {over} streams over its limit, {refused} refused, provider tokens "
          f"{tokens[1] if tokens else '?'} on {tokens[2] if tokens else '?'} connections, {churn} TooManyProviderTokenUpdates"
          f" ({'met' if over == 0 and one_each and churn == 0 else 'NOT met'})")
    accounting = latent["accounting"]
    print(f"{name:<11} accounting: {accounting['accepted']:,} accepted, {accounting['recorded']:,} recorded, "
          f"{'consistent' if not accounting['problems'] and accounting['accepted'] == accounting['recorded'] else 'INCONSISTENT'}")
PY
