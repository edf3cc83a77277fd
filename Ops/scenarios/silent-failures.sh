#!/usr/bin/env bash
# Ops/scenarios/silent-failures.sh: the three total failures that used to pass unseen, each visible in the status
# endpoint, a metric, a log line and an alert that a real Prometheus, scraping real relays with the shipped rules
# (Ops/deploy/prometheus-alerts.yml), fires:
#   - a .p8 added with a wrong key id for circl (APNs answers InvalidProviderToken): its sends are held, its
#     destination faulted (PushRelayProviderFault);
#   - a tenant without a key (anky): its SENDs are refused NO_PROVIDER_KEY (PushRelaySendsRefusedForKeys);
#   - a relay started with the wrong master key: not ready, its tenants' SENDs refused PROVIDER_KEY_UNREADABLE
#     (PushRelaySigningKeysUnreadable).
# Then the fix: circl's key rotated to the same .p8 under its right key id, and the held notification is delivered
# without a restart.
#
#   bash Ops/scenarios/silent-failures.sh
#
# Needs prometheus (Debian's package; Ops/scripts/install-deps.sh installs it).
#
# Environment:
#   PUSHRELAY_BIN      the relay binary (default .build/debug/pushrelay)
#   SILENT_TIMEOUT     seconds before the script gives up (default 300)
set -euo pipefail

NAME="silent-failures.sh"
TIMEOUT="${SILENT_TIMEOUT:-300}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fl_init
PROMETHEUS="$(command -v prometheus || true)"
[ -n "$PROMETHEUS" ] || fail "prometheus is missing (Debian: prometheus)"
command -v curl >/dev/null || fail "curl is missing"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- setup ---------------------------------------------------------------------------------------
step="setup"
log "circl with a key APNs does not know, anky without a key, two relays, Prometheus with the shipped rules"
python_env
fl_setup_database
cp Tenants/anky.yaml "$TMP/tenants/"
fl_admin tenant sync "$TMP/tenants" >/dev/null
# circl's .p8 stored again under a wrong key id: APNs (the simulator) knows the key as FANOUTKEY1 only.
fl_admin key remove circl --key-id "$KEY_ID" >/dev/null
PUSHRELAY_MASTER_KEY="$(tr -d '[:space:]' <"$TMP/master.key")" fl_admin key add circl --p8 "$TMP/AuthKey.p8" \
    --key-id WRONGKEY01 --team-id "$TEAM_ID" >/dev/null
ANKY_CREDENTIAL="$(fl_admin credential issue anky --name "$NAME" | grep -oE 'prk_[A-Za-z0-9_-]+' | head -n 1)"
"$BIN" admin master-key generate >"$TMP/wrong.key"
step="simulator"
fl_start_simulator 1
step="relays"
PORT_A="$(free_port)"
PORT_B="$(free_port)"
FL_RELAY_ARGS=(--metrics-listen "127.0.0.1:$PORT_A")
fl_start_relay A
relay_start B --data-dir "$TMP/pg" --tenants "$TMP/tenants" --master-key-file "$TMP/wrong.key" \
    --apns-endpoint "127.0.0.1:$SIM_PORT" --apns-ca "$TMP/sim/ca.pem" --metrics-listen "127.0.0.1:$PORT_B"

step="prometheus"
PROM_PORT="$(free_port)"
cat >"$TMP/prometheus.yml" <<CFG
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $ROOT/Ops/deploy/prometheus-alerts.yml
scrape_configs:
  - job_name: pushrelay
    static_configs:
      - targets: ["127.0.0.1:$PORT_A", "127.0.0.1:$PORT_B"]
CFG
"$PROMETHEUS" --config.file "$TMP/prometheus.yml" --storage.tsdb.path "$TMP/prometheus-data" \
    --web.listen-address "127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
FL_OTHER_PIDS+=($!)
prom() { curl -s --max-time 5 "http://127.0.0.1:$PROM_PORT$1" || true; }
# Prometheus has scraped both relays at least twice (so counters are seen at 0 before they rise).
scrapes=0
while [ "$scrapes" -lt 2 ]; do
    check_deadline
    sleep 1
    scrapes="$(prom '/api/v1/query?query=min(count_over_time(up%7Bjob%3D%22pushrelay%22%7D%5B1m%5D))' |
        "$PY" -c 'import json, sys
try:
    result = json.load(sys.stdin)["data"]["result"]
    print(int(float(result[0]["value"][1])) if result else 0)
except Exception:
    print(0)')"
done
say "Prometheus on 127.0.0.1:$PROM_PORT scrapes relays A (:$PORT_A) and B (:$PORT_B)"

# --- the three failures --------------------------------------------------------------------------
step="failures"
TOKEN="$("$PY" -c 'import secrets; print(secrets.token_hex(32))')"
"$PY" - "${RELAY_ADDRESS[A]}" "$CREDENTIAL" "$ANKY_CREDENTIAL" "${RELAY_ADDRESS[B]}" "$TOKEN" >"$TMP/sends.txt" <<'PY'
import sys
from pushrelay_client import RelayClient, RelayError

address, circl_secret, anky_secret, address_b, token = sys.argv[1:]
host, port = address.rsplit(":", 1)
with RelayClient(host, int(port), "circl", circl_secret) as relay:
    relay.register_device(user_id="ada", token=token, platform="ios", environment="PRODUCTION")
    result = relay.send(notification_type="message", user_ids=["ada"],
                        template_values={"circle_id": "7", "channel_id": "3"},
                        alert={"title": "Bob", "body": "See you at 8"}, wait=True)
    print("circl", result.job_id, " ".join(f"{o.outcome}/{o.reason}" for o in result.outcomes))
with RelayClient(host, int(port), "anky", anky_secret) as relay:
    relay.register_device(user_id="sam", token="ab" * 32, platform="ios", environment="PRODUCTION")
    try:
        relay.send(notification_type="daily_prompt", user_ids=["sam"], alert={"body": "Write"})
        print("anky accepted")
    except RelayError as error:
        print("anky", error.code.name)
host_b, port_b = address_b.rsplit(":", 1)
with RelayClient(host_b, int(port_b), "circl", circl_secret) as relay:
    try:
        relay.send(notification_type="message", user_ids=["ada"],
                   template_values={"circle_id": "7", "channel_id": "3"}, alert={"body": "x"})
        print("relayB accepted")
    except RelayError as error:
        print("relayB", error.code.name)
PY
cat "$TMP/sends.txt"
CIRCL_JOB="$(awk '$1 == "circl" { print $2 }' "$TMP/sends.txt")"

# Waits until Prometheus has the alert $1 firing with label $2="$3"; prints the seconds it took.
wait_alert() {
    local alert="$1" label="$2" value="$3" waited=0
    while :; do
        check_deadline
        if prom /api/v1/alerts | "$PY" -c '
import json, sys
alert, label, value = sys.argv[1:]
alerts = json.load(sys.stdin)["data"]["alerts"]
sys.exit(0 if any(a["labels"].get("alertname") == alert and a["state"] == "firing"
                  and a["labels"].get(label) == value for a in alerts) else 1)' "$alert" "$label" "$value"; then
            echo "$waited"
            return 0
        fi
        [ "$waited" -lt 60 ] || { echo "never"; return 0; }
        sleep 1
        waited=$((waited + 1))
    done
}
# The value of the series `$2` on the operator port `$1`, once it is above 0 (gauges are sampled every 5 s); 0 after 15 s.
metric() {
    local value
    for _ in $(seq 1 30); do
        value="$(curl -s --max-time 5 "http://127.0.0.1:$1/metrics" | grep -v '^#' | grep -F "$2" | awk '{ print $NF }' |
            head -n 1 || true)"
        if [ -n "$value" ] && [ "${value%%.*}" -gt 0 ] 2>/dev/null; then
            echo "$value"
            return 0
        fi
        sleep 0.5
    done
    echo 0
}
status_a="$(curl -s --max-time 5 "http://127.0.0.1:$PORT_A/status")"
ready_b="$(curl -s --max-time 5 "http://127.0.0.1:$PORT_B/readyz" || true)"
ready_b_code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT_B/readyz" || true)"
status_b="$(curl -s --max-time 5 "http://127.0.0.1:$PORT_B/status")"
circl_fault_status="$("$PY" -c '
import json, sys
doc = json.loads(sys.argv[1])
circl = [t for t in doc["tenants"] if t["tenant"] == "circl"][0]
env = [e for e in circl["environments"] if e["environment"] == "production"][0]
print(env["state"], (env.get("fault") or {}).get("reason", "-"), sum(h["devices"] for h in env["held"]))' "$status_a")"
anky_key_status="$("$PY" -c '
import json, sys
doc = json.loads(sys.argv[1])
anky = [t for t in doc["tenants"] if t["tenant"] == "anky"][0]
print(sum(1 for e in anky["environments"] if "no APNs signing key" in (e.get("key_problem") or "")))' "$status_a")"
b_not_ready_status="$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["ready"])' "$status_b")"
fault_metric="$(metric "$PORT_A" 'pushrelay_provider_fault{tenant="circl",environment="production",reason="InvalidProviderToken"}')"
refused_metric="$(metric "$PORT_A" 'pushrelay_sends_refused_total{tenant="anky",reason="NO_PROVIDER_KEY"}')"
unreadable_metric="$(metric "$PORT_B" 'pushrelay_signing_keys_unreadable ')"
fault_log="$(grep -c 'tenant=circl .*delivery stopped: configuration fault' "$TMP/relay-A.log" || true)"
refused_log="$(grep -c 'tenant=anky .*sends refused: no usable signing key' "$TMP/relay-A.log" || true)"
unreadable_log="$(grep -c 'stored signing keys cannot be opened' "$TMP/relay-B.log" || true)"
fault_alert="$(wait_alert PushRelayProviderFault tenant circl)"
refused_alert="$(wait_alert PushRelaySendsRefusedForKeys tenant anky)"
unreadable_alert="$(wait_alert PushRelaySigningKeysUnreadable instance "127.0.0.1:$PORT_B")"

# --- the fix -------------------------------------------------------------------------------------
step="fix"
# Relay B cannot open circl's key: stopped, so that it does not take the held page in turn.
relay_stop B
PUSHRELAY_MASTER_KEY="$(tr -d '[:space:]' <"$TMP/master.key")" fl_admin key rotate circl --old-key-id WRONGKEY01 \
    --p8 "$TMP/AuthKey.p8" --key-id "$KEY_ID" --team-id "$TEAM_ID" >/dev/null
resumed="no"
for _ in $(seq 1 60); do
    check_deadline
    if [ "$(fl_psql "SELECT state || '/' || delivered FROM jobs WHERE id = '$CIRCL_JOB'")" = "completed/1" ]; then
        resumed="yes"
        break
    fi
    sleep 1
done

failures=0
echo "silent-failures accounting (run $(date -u +%F)):"
echo "  wrong key id (circl)     send: $(awk '$1 == "circl" { print $3 }' "$TMP/sends.txt"); /status: $circl_fault_status; metric $fault_metric; log lines $fault_log; alert firing after ${fault_alert}s; after the rotation delivered: $resumed"
echo "  no key (anky)            send: $(awk '$1 == "anky" { print $2 }' "$TMP/sends.txt"); /status key problems $anky_key_status; metric $refused_metric; log lines $refused_log; alert firing after ${refused_alert}s"
echo "  wrong master key (B)     send: $(awk '$1 == "relayB" { print $2 }' "$TMP/sends.txt"); /readyz $ready_b_code ($(head -c 120 <<<"$ready_b")); /status ready $b_not_ready_status; metric $unreadable_metric; log lines $unreadable_log; alert firing after ${unreadable_alert}s"
check "circl's send is held, not failed" eq "$(awk '$1 == "circl" { print $3 }' "$TMP/sends.txt")" "waiting/InvalidProviderToken"
check "circl faulted in /status, its notification held" eq "$circl_fault_status" "faulted InvalidProviderToken 1"
check "circl's fault metric is 1" eq "$fault_metric" "1.0"
check "circl's fault logged once" eq "$fault_log" 1
check "PushRelayProviderFault fired for circl" eq "$([ "$fault_alert" != never ] && echo yes)" yes
check "circl's key rotation delivered the held notification without a restart" eq "$resumed" yes
check "anky's send refused NO_PROVIDER_KEY" eq "$(awk '$1 == "anky" { print $2 }' "$TMP/sends.txt")" NO_PROVIDER_KEY
check "anky's key problem in /status for each environment" ge "$anky_key_status" 1
check "anky's refusal counted" eq "$refused_metric" 1
check "anky's refusal logged once" eq "$refused_log" 1
check "PushRelaySendsRefusedForKeys fired for anky" eq "$([ "$refused_alert" != never ] && echo yes)" yes
check "relay B's send refused PROVIDER_KEY_UNREADABLE" eq "$(awk '$1 == "relayB" { print $2 }' "$TMP/sends.txt")" PROVIDER_KEY_UNREADABLE
check "relay B not ready (/readyz 503, /status ready false)" eq "$ready_b_code:$b_not_ready_status" "503:False"
check "relay B's unreadable keys metric is above 0" eq "$([ "${unreadable_metric%%.*}" -ge 1 ] 2>/dev/null && echo yes)" yes
check "relay B logged it" ge "$unreadable_log" 1
check "PushRelaySigningKeysUnreadable fired for relay B" eq "$([ "$unreadable_alert" != never ] && echo yes)" yes
[ "$failures" -eq 0 ] || fail "$failures check(s) failed"
step="done"
say "OK in $(elapsed)s"
