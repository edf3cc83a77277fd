#!/usr/bin/env bash
# Ops/scenarios/test-python.sh: the Python client's tests, then the same client against a real relay.
#
#   bash Ops/scenarios/test-python.sh
#
# Steps, each fatal:
#   1. a virtualenv in a temporary folder with ./Protocol/python and pytest installed (falls back to
#      the system python3 when venv is unavailable)
#   2. the tests that need no relay: Protocol/vectors.json, the frame codec, the clients against a
#      fake relay
#   3. a relay on a fresh embedded PostgreSQL: tenant sync, a credential for circl and familyportal,
#      `pushrelay serve --apns-simulator` on a free port (it writes host:port to its --ready-file)
#   4. Protocol/python/tests/test_relay.py against it, then SIGTERM and wait for the relay
#
# Environment:
#   PUSHRELAY_BIN  the relay binary (default .build/debug/pushrelay; build it first)
#   PYTHON         the python to build the virtualenv from (default python3)
set -euo pipefail

NAME=test-python.sh
TIMEOUT=900
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
TMP="$(mktemp -d)"
# The embedded PostgreSQL runs as an unprivileged user when we are root: it must reach $TMP/pg.
chmod 755 "$TMP"

on_exit() {
    local rc=$?
    for name in "${!RELAY_PID[@]}"; do relay_stop "$name"; done
    cluster_stop
    if [ "$rc" -ne 0 ]; then
        if [ -f "$TMP/relay-main.log" ]; then
            printf '\ntest-python.sh: last lines of the relay log:\n' >&2
            tail -n 40 "$TMP/relay-main.log" >&2
        fi
        printf '\ntest-python.sh: FAILED at step "%s" (exit %d) after %ds\n' "$step" "$rc" "$(elapsed)"
    fi
    rm -rf "$TMP"
}
trap on_exit EXIT

# The "N passed ..." line of a pytest run's output file.
pytest_summary() { grep -E '[0-9]+ (passed|failed|skipped|error)' "$1" | tail -n 1 | tr -d '='; }

# --- 1. python environment -----------------------------------------------------------------------
step="python-env"
log "$step"
python_env pytest
# Run from $TMP so the tests import the installed package, not the source folder.
(cd "$TMP" && "$PY" -c 'import pushrelay_client, sys; print("pushrelay_client", pushrelay_client.__version__, "from", pushrelay_client.__file__, "on python", sys.version.split()[0])')

# --- 2. tests without a relay --------------------------------------------------------------------
step="unit-tests"
log "vectors, frame codec, clients against a fake relay"
(cd "$TMP" && env -u PUSHRELAY_ADDRESS "$PY" -m pytest -q -p no:cacheprovider \
    "$ROOT/Protocol/python/tests/test_vectors.py" "$ROOT/Protocol/python/tests/test_client.py") | tee "$TMP/unit.txt"
unit_summary="$(pytest_summary "$TMP/unit.txt")"

# --- 3. a relay ----------------------------------------------------------------------------------
step="relay-setup"
log "relay: tenants, credentials, serve"
[ -x "$BIN" ] || fail "no relay binary at $BIN (swift build first, or set PUSHRELAY_BIN)"
"$BIN" admin migrate --data-dir "$TMP/pg"
"$BIN" admin tenant sync Tenants --data-dir "$TMP/pg"
# `credential issue --secret-only` prints the secret alone, once.
issue_secret() {
    local secret
    secret="$("$BIN" admin credential issue "$1" --name python-tests --secret-only --data-dir "$TMP/pg")"
    [[ "$secret" =~ ^prk_[A-Za-z0-9_-]+$ ]] || fail "credential issue $1 --secret-only printed no bare secret"
    printf '%s' "$secret"
}
CIRCL_SECRET="$(issue_secret circl)"
FAMILYPORTAL_SECRET="$(issue_secret familyportal)"

step="relay-start"
relay_start main --apns-simulator --sim-dir "$TMP/sim" --data-dir "$TMP/pg" --tenants Tenants \
    --metrics-listen 127.0.0.1:0
address="${RELAY_ADDRESS[main]}"
# The ready file's second line names the operator port (chosen at random here); the start lines are in the
# log at once, not at exit.
metrics="$(sed -n 's/^metrics //p' "$TMP/ready-main")"
[[ "$metrics" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "the ready file names no operator port: $(cat "$TMP/ready-main")"
"$PY" -c 'import sys, urllib.request; print("readyz:", urllib.request.urlopen(f"http://{sys.argv[1]}/readyz").read().decode().strip())' "$metrics"
grep -q "pushrelay: listening" "$TMP/relay-main.log" || fail "the relay's log does not say where it listens"

# --- 4. integration tests ------------------------------------------------------------------------
step="relay-tests"
log "Protocol/python/tests/test_relay.py against $address"
(cd "$TMP" && PUSHRELAY_ADDRESS="$address" \
    PUSHRELAY_TENANT=circl PUSHRELAY_CREDENTIAL="$CIRCL_SECRET" \
    PUSHRELAY_OTHER_TENANT=familyportal PUSHRELAY_OTHER_CREDENTIAL="$FAMILYPORTAL_SECRET" \
    "$PY" -m pytest -q -p no:cacheprovider -rs "$ROOT/Protocol/python/tests/test_relay.py") | tee "$TMP/relay.txt"
relay_summary="$(pytest_summary "$TMP/relay.txt")"
grep -q skipped <<<"$relay_summary" && fail "relay tests were skipped: $relay_summary"

# --- 5. the CLI client: `pushrelay send` to a device registered by the Python client ----------
step="cli-send"
log "pushrelay send against $address"
cli_token="$(printf 'c1%.0s' $(seq 1 32))"
"$PY" - "$address" "$CIRCL_SECRET" "$cli_token" <<'PY'
import sys
from pushrelay_client import RelayClient
host, port = sys.argv[1].rsplit(":", 1)
with RelayClient(host, int(port), "circl", sys.argv[2]) as relay:
    relay.register_device(user_id="cli-user", token=sys.argv[3], platform="ios", environment="PRODUCTION")
PY
cli_out="$(PUSHRELAY_CREDENTIAL="$CIRCL_SECRET" "$BIN" send --relay "$address" --tenant circl --type message \
    --user cli-user --value circle_id=1 --value channel_id=2 --title CLI --body hello \
    --idempotency-key cli-1 --wait)"
echo "$cli_out"
grep -q "cli-user c1c1c1c1…: delivered" <<<"$cli_out" || fail "pushrelay send did not deliver"
again="$(PUSHRELAY_CREDENTIAL="$CIRCL_SECRET" "$BIN" send --relay "$address" --tenant circl --type message \
    --user cli-user --value circle_id=1 --value channel_id=2 --title CLI --body hello --idempotency-key cli-1)"
grep -q "duplicate" <<<"$again" || fail "a repeated idempotency key was not answered as a duplicate: $again"
if PUSHRELAY_CREDENTIAL=prk_wrong "$BIN" send --relay "$address" --tenant circl --type message --user x \
    --value circle_id=1 --value channel_id=2 >"$TMP/cli-wrong.txt" 2>&1; then
    fail "pushrelay send with a wrong credential exited 0"
fi
grep -q AUTHENTICATION_FAILED "$TMP/cli-wrong.txt" || fail "wrong credential: $(cat "$TMP/cli-wrong.txt")"
echo "test-python.sh: pushrelay send delivered, answered the repeat as a duplicate, refused a wrong credential"

step="relay-stop"
relay_stop main
[ "${RELAY_STATUS[main]}" = 0 ] || fail "the relay exited with status ${RELAY_STATUS[main]} after SIGTERM (expected 0)"

# A tenants folder that does not exist is refused at start, naming the setting.
if "$BIN" serve --listen 127.0.0.1:0 --metrics-listen "" --data-dir "$TMP/pg" --tenants "$TMP/no-tenants" \
    >"$TMP/no-tenants.log" 2>&1; then
    fail "serve with a missing tenants folder exited 0"
fi
grep -q -- "--tenants" "$TMP/no-tenants.log" || fail "missing tenants folder: $(cat "$TMP/no-tenants.log")"

step="done"
printf '\ntest-python.sh: OK: unit (%s), relay (%s), pushrelay send, relay stopped cleanly, in %ds\n' \
    "$(echo $unit_summary)" "$(echo $relay_summary)" "$(elapsed)"
