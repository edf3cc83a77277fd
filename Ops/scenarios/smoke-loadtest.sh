#!/usr/bin/env bash
# Ops/scenarios/smoke-loadtest.sh [PUSHRELAY_BIN]: `pushrelay loadtest` at a small size (a few thousand devices, APNs
# and FCM), then Ops/bench/check-loadtest-report.py on its report: complete, and every accepted notification
# accounted for.
# No timing is judged (CI machines vary); the figures are printed for the log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${1:-${PUSHRELAY_BIN:-$ROOT/.build/debug/pushrelay}}"
[ -x "$BIN" ] || { echo "smoke-loadtest: no pushrelay binary at $BIN" >&2; exit 1; }
OUT="$(mktemp -d)"
chmod 755 "$OUT"
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"
# The FCM fan-out and the mixed one (half APNs, half FCM) at the size of the smallest APNs fan-out, which their
# relay CPU is compared with.
timeout 900 "$BIN" loadtest --fan-outs 1000,3000 --singles 100 --groups 20 --group-size 10 \
    --idle-connections 100 --baseline-count 2000 --fcm-fan-out 1000 --mixed-fan-out 1000 \
    --output "$OUT" --work-dir "$OUT/work" --progress-interval 2
python3 "$ROOT/Ops/bench/check-loadtest-report.py" "$OUT/loadtest-report.json" "$OUT/loadtest-report.svg"
