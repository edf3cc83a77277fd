#!/usr/bin/env bash
# Ops/scripts/test.sh: THE test command of pushrelay.
#
#   bash Ops/scripts/test.sh                    # everything
#   bash Ops/scripts/test.sh --filter APNsTests # extra arguments go to `swift test`
#
# Steps, each fatal:
#   1. Ops/scripts/install-deps.sh (fast no-op when everything is installed)
#   2. swift build --build-tests, failing on any compiler warning in our own code
#      (Sources/, Tests/, Package.swift); warnings from dependencies (.build/checkouts) are ignored
#   3. swift format lint --strict with the repo's .swift-format (any finding fails); Package.swift's dependency
#      edges equal the imports (Ops/scripts/check-package-edges.py); no hand-written Swift file over 600 lines;
#      `systemd-analyze verify` finds nothing to say about Ops/deploy/pushrelay.service (a copy whose ExecStart
#      is the binary just built, since verify wants the program to exist); `promtool test rules` fires every alert
#      of Ops/deploy/prometheus-alerts.yml on the series of Ops/deploy/prometheus-alerts.test.yml
#   4. swift test "$@" (the in-process fuzzer, Tests/PushRelayProtocolTests/FuzzTests.swift, prints its
#      totals as `fuzz: ...` lines)
#   5. Ops/scenarios/smoke-apns-cli.sh: `pushrelay apns-sim` and `pushrelay apns push` run as an operator would
#   6. Ops/scenarios/test-python.sh: the Python client's tests, then the client against `pushrelay serve`;
#      Ops/scenarios/hostile-clients.sh: hostile clients against `pushrelay serve`, with its accounting;
#      Ops/scenarios/admin-cli.sh: `admin` on a missing cluster, a schema behind, logins PostgreSQL refuses;
#      Ops/scenarios/lifecycle.sh: `serve` as the unit runs it (version, `promtool check metrics` on /metrics,
#      settings refused, SIGHUP, SIGTERM to the main process with a send in flight)
#   7. Ops/scenarios/crash-test.sh (a relay killed with SIGKILL mid fan-out and restarted: every device served,
#      duplicates within the window, deliveries agree with APNs), Ops/scenarios/two-relays.sh (two relays
#      on one database share one fan-out, every device exactly once) and Ops/scenarios/three-relays.sh (three
#      relays behind HAProxy, the tenant's rate shared)
#   8. Ops/scenarios/smoke-loadtest.sh: `pushrelay loadtest` with a few thousand devices, APNs fan-outs, an FCM and a
#      mixed one; its report is checked for completeness and consistency (every accepted notification accounted
#      for), not for speed
#   9. the fault runs, small: Ops/scenarios/fault-apns-errors.sh (500/503, GOAWAY, dropped connections,
#      refused streams; 3,000 devices), Ops/scenarios/fault-postgres-restart.sh (PostgreSQL restarted during a
#      fan-out and single sends), Ops/scenarios/fault-slow-apns.sh (APNs at 500 ms: RSS, back-pressure; 3,000
#      devices) and Ops/scenarios/fault-node-killed.sh (one of three relays killed; 3,000 devices), each printing
#      and checking its accounting (Ops/scenarios/crash-test.sh in step 7 is point 8)
#  10. the outage runs: Ops/scenarios/outage-apns.sh (APNs stopped for 2 minutes in the middle of a 100,000-device
#      fan-out, the relay restarted during the outage: every notification held, then delivered, none lost, with
#      its accounting) and Ops/scenarios/silent-failures.sh (a wrong key id, a tenant without a key, a wrong master
#      key: each in /status, a metric, a log line and an alert fired by a real Prometheus)
#  11. Ops/bench/bench-noisy-neighbour.sh --quick: the noisy-neighbour figures in the log; a missed target
#      does not fail the run, a relay that crashes or stops answering does
#
# Environment:
#   PUSHRELAY_SCRATCH_PATH  build directory to use instead of ./.build (passed as --scratch-path)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -d /opt/swift/usr/bin ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

started=$(date +%s)
step="start"
build_log=""
log() { printf '\n==> test.sh: %s\n' "$*"; }
on_exit() {
    local rc=$?
    if [ -n "$build_log" ]; then rm -f "$build_log"; fi
    if [ "$rc" -ne 0 ]; then
        printf '\ntest.sh: FAILED at step "%s" (exit %d) after %ds\n' "$step" "$rc" "$(($(date +%s) - started))"
    fi
}
trap on_exit EXIT

scratch=()
if [ -n "${PUSHRELAY_SCRATCH_PATH:-}" ]; then
    scratch=(--scratch-path "$PUSHRELAY_SCRATCH_PATH")
fi

step="install-deps"
log "$step"
bash "$ROOT/Ops/scripts/install-deps.sh"

# --- 2. build with tests, no warnings from our own code -------------------------------------------
step="build"
log "swift build --build-tests"
# An incremental build prints the warnings only of the files it recompiles, so a warning in an
# unchanged file would slip through a second run. Deleting the object files of our own targets
# (never those of dependencies) makes the compiler recompile, and re-diagnose, all of our code.
# (Only the .o files: SwiftPM does not rewrite the rest of <target>.build, e.g. the output file map.)
bin_path="$(swift build "${scratch[@]}" --show-bin-path)"
for dir in Sources/*/ Tests/*/; do
    target_dir="${bin_path:?}/$(basename "$dir").build"
    if [ -d "$target_dir" ]; then
        find "$target_dir" -maxdepth 1 -type f -name '*.o' -delete
    fi
done

build_log="$(mktemp)"
set +e
swift build "${scratch[@]}" --build-tests 2>&1 | tee "$build_log"
build_rc=${PIPESTATUS[0]}
set -e
if [ "$build_rc" -ne 0 ]; then
    echo "test.sh: swift build failed (exit $build_rc)" >&2
    exit "$build_rc"
fi
# A warning of ours is a compiler line naming a file under this repo's Sources/ or Tests/, or
# Package.swift (absolute path, the compiler's usual form, or relative), or a SwiftPM line about
# one of our targets (e.g. "warning: 'APNs': found 1 file(s) which are unhandled").
root_re="$(printf '%s' "$ROOT" | sed 's/[][\.*^$+?(){}|]/\\&/g')"
targets_re="$(cd "$ROOT" && ls -d Sources/*/ Tests/*/ 2>/dev/null | xargs -n1 basename | paste -sd'|' -)"
own_warnings="$(grep -E "warning:" "$build_log" \
    | grep -E "^(${root_re}/)?(Sources/|Tests/|Package\.swift)|warning: '(${targets_re:-pushrelay})':" \
    | sort -u || true)"
if [ -n "$own_warnings" ]; then
    printf '\ntest.sh: compiler warnings in our own code (fix them; they fail the build):\n%s\n' \
        "$own_warnings" >&2
    exit 1
fi
echo "test.sh: build clean (no warnings in Sources/, Tests/ or Package.swift)"

# --- 3. format lint ------------------------------------------------------------------------------
step="format-lint"
log "swift format lint --strict"
if ! swift format --help >/dev/null 2>&1; then
    echo "test.sh: 'swift format' is not available in this toolchain (Swift 6+ ships it)" >&2
    exit 1
fi
swift format lint --strict --parallel --recursive --configuration "$ROOT/.swift-format" \
    Sources Tests Package.swift
echo "test.sh: format lint clean"
step="shape"
log "package edges and file sizes"
python3 "$ROOT/Ops/scripts/check-package-edges.py"
oversized="$(find Sources -name '*.swift' -not -path '*/Generated/*' -exec wc -l {} + | awk '$2 != "total" && $1 > 600')"
[ -z "$oversized" ] || { echo "test.sh: hand-written Swift files over 600 lines:" >&2; echo "$oversized" >&2; exit 1; }
echo "test.sh: Package.swift's edges equal the imports; no hand-written Swift file over 600 lines"
step="unit-verify"
log "systemd-analyze verify Ops/deploy/pushrelay.service"
unit_dir="$(mktemp -d)"
sed "s|^ExecStart=/usr/local/bin/pushrelay |ExecStart=$(swift build "${scratch[@]}" --show-bin-path)/pushrelay |" \
    Ops/deploy/pushrelay.service >"$unit_dir/pushrelay.service"
unit_findings="$(systemd-analyze verify "$unit_dir/pushrelay.service" 2>&1 || echo "systemd-analyze verify failed")"
rm -rf "$unit_dir"
[ -z "$unit_findings" ] || { echo "test.sh: systemd-analyze verify on the unit:" >&2; echo "$unit_findings" >&2; exit 1; }
echo "test.sh: systemd-analyze verify accepts Ops/deploy/pushrelay.service"
step="alert-rules"
log "promtool test rules Ops/deploy/prometheus-alerts.test.yml"
promtool check rules Ops/deploy/prometheus-alerts.yml
promtool test rules Ops/deploy/prometheus-alerts.test.yml

# --- 4. tests ------------------------------------------------------------------------------------
step="swift-test"
log "swift test${*:+ $*}"
if [ "$#" -eq 0 ]; then
    # The engine's tests time PINGs, reconnects and retries against a simulator; with every other suite
    # starting PostgreSQL clusters beside them on 2 cores, their timing is not theirs. They run first, alone
    # (a few seconds), then everything else.
    swift test "${scratch[@]}" --filter APNsTests
    swift test "${scratch[@]}" --skip APNsTests
else
    swift test "${scratch[@]}" "$@"
fi

# --- 5. the engine's commands end to end -------------------------------------------------------
step="smoke-apns-cli"
log "Ops/scenarios/smoke-apns-cli.sh"
bash "$ROOT/Ops/scenarios/smoke-apns-cli.sh" "$(swift build "${scratch[@]}" --show-bin-path)/pushrelay"

# --- 6. the Python client, against a running relay -----------------------------------------------
step="python-client"
log "Ops/scenarios/test-python.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/test-python.sh"
step="hostile-clients"
log "Ops/scenarios/hostile-clients.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/hostile-clients.sh"
step="admin-cli"
log "Ops/scenarios/admin-cli.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/admin-cli.sh"
step="lifecycle"
log "Ops/scenarios/lifecycle.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/lifecycle.sh"

# --- 7. durable fan-out: a crash mid fan-out, two relays on one database -------------------------
step="fan-out-crash"
log "Ops/scenarios/crash-test.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/crash-test.sh"
step="fan-out-two-relays"
log "Ops/scenarios/two-relays.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/two-relays.sh"
step="fan-out-three-relays"
log "Ops/scenarios/three-relays.sh"
PUSHRELAY_BIN="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay" bash "$ROOT/Ops/scenarios/three-relays.sh"

# --- 8. the load test, small ---------------------------------------------------------------------
step="smoke-loadtest"
log "Ops/scenarios/smoke-loadtest.sh"
bash "$ROOT/Ops/scenarios/smoke-loadtest.sh" "$(swift build "${scratch[@]}" --show-bin-path)/pushrelay"

# --- 9. the fault runs, small -----------------------------------------------------------------
bin="$(swift build "${scratch[@]}" --show-bin-path)/pushrelay"
step="fault-apns-errors"
log "Ops/scenarios/fault-apns-errors.sh"
PUSHRELAY_BIN="$bin" FAULT_DEVICES="${FAULT_DEVICES:-3000}" FAULT_TIMEOUT=900 bash "$ROOT/Ops/scenarios/fault-apns-errors.sh"
step="fault-postgres-restart"
log "Ops/scenarios/fault-postgres-restart.sh"
PUSHRELAY_BIN="$bin" PG_DEVICES="${PG_DEVICES:-3000}" bash "$ROOT/Ops/scenarios/fault-postgres-restart.sh"
step="fault-slow-apns"
log "Ops/scenarios/fault-slow-apns.sh"
PUSHRELAY_BIN="$bin" SLOW_DEVICES="${SLOW_DEVICES:-3000}" bash "$ROOT/Ops/scenarios/fault-slow-apns.sh"
step="fault-node-killed"
log "Ops/scenarios/fault-node-killed.sh"
PUSHRELAY_BIN="$bin" NODE_DEVICES="${NODE_DEVICES:-3000}" bash "$ROOT/Ops/scenarios/fault-node-killed.sh"

# --- 10. outages and configuration faults ---------------------------------------------------------
step="outage-apns"
log "Ops/scenarios/outage-apns.sh"
PUSHRELAY_BIN="$bin" OUTAGE_DEVICES="${OUTAGE_DEVICES:-100000}" OUTAGE_SECONDS="${OUTAGE_SECONDS:-120}" \
    bash "$ROOT/Ops/scenarios/outage-apns.sh"
step="silent-failures"
log "Ops/scenarios/silent-failures.sh"
PUSHRELAY_BIN="$bin" bash "$ROOT/Ops/scenarios/silent-failures.sh"

step="noisy-neighbour"
log "Ops/bench/bench-noisy-neighbour.sh --quick"
PUSHRELAY_BIN="$bin" bash "$ROOT/Ops/bench/bench-noisy-neighbour.sh" --quick

step="done"
printf '
test.sh: OK: deps, build (no own warnings), format lint, unit verified, swift test%s, CLI smoke, Python client, hostile clients, admin CLI, lifecycle, fan-out crash, two and three relays, load-test smoke, fault runs, the outage run and the silent failures passed in %ds
' \
    "${*:+ $*}" "$(($(date +%s) - started))"
