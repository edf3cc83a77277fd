#!/usr/bin/env python3
"""Ops/bench/check-loadtest-report.py REPORT.json [REPORT.svg]: is a `pushrelay loadtest` report complete and
consistent? No timing is judged, only that every figure is there and that the counts add up:

- every section the run asked for is present, with its figures (rates, latencies, RSS, CPU, rows/s);
- accepted = single sends + group recipients + fan-out sizes, and recorded == accepted;
- each fan-out: job status delivered + failed + skipped == delivery rows == size; a short fan-out (at most
  10,000 devices) ran `short_fan_out_runs` times, each run with a row per device, and its figures are those of
  the run of median time;
- the FCM fan-out (`fcm_fan_out`) and the mixed one (`mixed_fan_out`), when asked for, likewise, with their FCM
  devices (all, and the larger half) and their relay CPU ratio to the APNs fan-out of their size when the run had
  one;
- the outcomes' rows sum to the recorded rows; every job completed; no problem listed;
- the timeline is non-empty and its answered counts sum to the answered rows (outcomes but skipped);
- the chart is an SVG document with one polyline per series.
Prints what it checked; exit status 1 with the first failures otherwise.
"""
import json
import sys
import xml.etree.ElementTree as ET

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def check_fan_out(name, fan_out, config):
    """Checks one fan-out's figures and runs; returns how many runs (jobs) it had."""
    runs = fan_out.get("runs") or []
    expected_runs = config["short_fan_out_runs"] if fan_out["size"] <= 10_000 else 1
    check(max(len(runs), 1) == expected_runs, f"{name}: {len(runs)} runs listed, expected {expected_runs}")
    if runs:
        check(all(run["rows"] == fan_out["size"] for run in runs), f"{name}: a run's rows differ from its size")
        times = sorted(run["seconds"] for run in runs)
        check(fan_out["seconds"] == times[len(times) // 2], f"{name}: its seconds are not the median run's")
        check(fan_out["job_id"] in [run["job_id"] for run in runs], f"{name}: its job is not one of its runs")
    counted = fan_out["delivered"] + fan_out["failed"] + fan_out["skipped"]
    check(counted == fan_out["rows"] == fan_out["size"], f"{name}: job status {counted}, rows {fan_out['rows']}")
    for key in ["seconds", "notifications_per_second", "relay_cpu_seconds_per100k", "relay_peak_rss_mi_b",
                "postgres_rows_per_second"]:
        check(fan_out.get(key, 0) > 0, f"{name}: {key} missing or zero")
    return max(len(runs), 1)


def main():
    report = json.load(open(sys.argv[1]))
    config = report["configuration"]
    for key in ["date", "machine", "configuration", "fan_outs", "relay", "outcomes", "accounting", "timeline"]:
        check(key in report, f"missing {key}")
    if config["baseline_count"] > 0:
        baseline = report.get("engine_baseline") or {}
        check(baseline.get("notifications_per_second", 0) > 0, "engine baseline without a rate")
        check(baseline.get("delivered") == config["baseline_count"], "engine baseline did not deliver everything")
    if config["singles"] > 0:
        singles = report.get("singles") or {}
        check(singles.get("count") == config["singles"], f"singles {singles.get('count')} != {config['singles']}")
        for key in ["ack_milliseconds", "apns_milliseconds"]:
            latency = singles.get(key) or {}
            check(all(k in latency for k in ["p50", "p99", "p999", "max"]), f"singles.{key} incomplete")
        check(singles.get("without_receipt") == 0, f"{singles.get('without_receipt')} single sends without receipt")
    if config["groups"] > 0:
        groups = report.get("groups") or {}
        check(groups.get("count") == config["groups"], "group count")
        check(groups.get("recipients") == config["groups"] * config["group_size"], "group recipients")
    if config["idle_connections"] > 0:
        idle = report.get("idle_connections") or {}
        check(idle.get("count") == config["idle_connections"], "idle connection count")
        check("kib_per_connection" in idle, "idle connections without their cost")
    sizes = [f["size"] for f in report["fan_outs"]]
    check(sizes == sorted(config["fan_out_sizes"]), f"fan-outs {sizes} != {config['fan_out_sizes']}")
    # (name, fan-out, runs) of every fan-out measured: each run is a job of `size` notifications.
    measured = [(f"fan-out {f['size']}", f, check_fan_out(f"fan-out {f['size']}", f, config))
                for f in report["fan_outs"]]
    apns_sizes = set(sizes)
    for key, label, fcm_devices in [("fcm_fan_out", "FCM", lambda n: n), ("mixed_fan_out", "mixed", lambda n: n - n // 2)]:
        size = config.get(key) or 0
        fan_out = report.get(key)
        name = f"{label} fan-out {size}"
        if size == 0:
            check(fan_out is None, f"{name} reported but not asked for")
            continue
        if fan_out is None:
            check(False, f"{name} of {size} asked for but not reported")
            continue
        check(fan_out["size"] == size, f"{name}: size {fan_out['size']} != {size}")
        check(fan_out.get("fcm_devices") == fcm_devices(size),
              f"{name}: {fan_out.get('fcm_devices')} FCM devices, expected {fcm_devices(size)}")
        check(fan_out["tenant"] == config.get("fcm_tenant"), f"{name}: tenant {fan_out['tenant']} is not the FCM tenant")
        ratio = fan_out.get("apns_cpu_ratio")
        check((ratio is not None and ratio > 0) == (size in apns_sizes),
              f"{name}: CPU ratio to APNs {ratio}, APNs fan-outs {sorted(apns_sizes)}")
        measured.append((name, fan_out, check_fan_out(name, fan_out, config)))
    accounting = report["accounting"]
    expected = config["singles"] + config["groups"] * config["group_size"] + sum(
        f["size"] * runs for _, f, runs in measured)
    check(accounting["accepted"] == expected, f"accepted {accounting['accepted']} != sent {expected}")
    check(accounting["recorded"] == accounting["accepted"],
          f"recorded {accounting['recorded']} != accepted {accounting['accepted']}")
    check(accounting["jobs"] == accounting["jobs_completed"], "jobs not completed")
    check(accounting["jobs"] == config["singles"] + config["groups"] + sum(runs for _, _, runs in measured),
          "job count")
    check(not accounting["problems"], f"problems: {accounting['problems']}")
    outcome_rows = sum(o["rows"] for o in report["outcomes"])
    check(outcome_rows == accounting["recorded"], f"outcome rows {outcome_rows} != recorded {accounting['recorded']}")
    answered_rows = sum(o["rows"] for o in report["outcomes"] if o["outcome"] != "skipped")
    timeline_answered = sum(p["answered"] for p in report["timeline"])
    check(report["timeline"], "empty timeline")
    check(timeline_answered == answered_rows, f"timeline answered {timeline_answered} != rows {answered_rows}")
    check(report["relay"]["peak_rss_mi_b"] > 0 and report["relay"]["cpu_seconds"] > 0, "relay figures missing")
    if len(sys.argv) > 2:
        svg = ET.parse(sys.argv[2]).getroot()
        check(svg.tag.endswith("svg"), "the chart is not an SVG document")
        lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
        check(len(lines) >= 4, f"the chart has {len(lines)} series, expected 4 (answered, p50, p99, RSS)")
    if failures:
        for failure in failures[:20]:
            print(f"check-loadtest-report: FAIL: {failure}")
        sys.exit(1)
    print(f"check-loadtest-report: OK: {accounting['accepted']} accepted = {accounting['recorded']} recorded "
          f"in {accounting['jobs']} completed jobs; fan-outs {[name for name, _, _ in measured]} each fully "
          f"accounted for; "
          f"{len(report['timeline'])} timeline seconds; chart checked" if len(sys.argv) > 2 else "")


main()
