# Ops/scenarios/lib.sh: what every scenario shares (sourced, not run): the one way scripts start and stop a
# relay (`relay_start`, `relay_stop`), a cluster of them (`fl_start_relay`, `fl_start_relays_behind_haproxy`),
# the embedded PostgreSQL (`cluster_stop`), the simulator, the Python client's environment (`python_env`), and
# the accounting helpers.
#
# One embedded PostgreSQL cluster in $TMP/pg, a separately running `pushrelay apns-sim` logging every
# request to $TMP/sim.jsonl, relays (`pushrelay serve`) sending to it with a signing key both trust,
# the Python client (Protocol/python) in a virtualenv for the wire side (Ops/scenarios/fanout_tool.py), psql
# for the database side. Everything started here is stopped by fl_cleanup (the EXIT trap), also on
# failure; every wait is bounded by the script's deadline. FANOUT_KEEP_DIR=DIR keeps the logs (relays,
# simulator, its sim.jsonl) and the accounting inputs there.
#
# The caller sets NAME (for messages) and TIMEOUT (seconds) before sourcing; the fan-out scenarios then call
# fl_init (which makes $TMP and traps EXIT with fl_cleanup); others make $TMP and their own EXIT trap.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${PUSHRELAY_BIN:-.build/debug/pushrelay}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
PYTHON="${PYTHON:-python3}"
KEY_ID="FANOUTKEY1"
TEAM_ID="FANOUTTEAM"
TOPIC="com.fragne.circl"

declare -A RELAY_PID=()
declare -A RELAY_ADDRESS=()
# Exit status of each relay stopped by relay_stop ("" when it was not this shell's child).
declare -A RELAY_STATUS=()
# Other processes a script started (a load balancer): stopped by fl_cleanup before the relays.
FL_OTHER_PIDS=()
SIM_PID=""
SIM_PORT=""
# Extra arguments of `pushrelay apns-sim` (faults) and of `pushrelay serve`, set by a script before starting them.
FL_SIM_ARGS=()
FL_RELAY_ARGS=()
started=$(date +%s)
step="start"

log() { printf '\n==> %s: %s\n' "$NAME" "$*"; }
say() { printf '%s: %s\n' "$NAME" "$*"; }
fail() {
    echo "$NAME: FAIL: $*" >&2
    exit 1
}
elapsed() { echo $(($(date +%s) - started)); }
# Fails once the script has run for TIMEOUT seconds.
check_deadline() {
    [ "$(elapsed)" -lt "$TIMEOUT" ] || fail "timed out after ${TIMEOUT}s (at step \"$step\")"
}
# Seconds left before the deadline, for `timeout` around single commands.
time_left() {
    local left=$((TIMEOUT - $(elapsed)))
    [ "$left" -gt 0 ] || fail "timed out after ${TIMEOUT}s (at step \"$step\")"
    echo "$left"
}

fl_init() {
    cd "$ROOT"
    if [ -d /opt/swift/usr/bin ]; then export PATH="/opt/swift/usr/bin:$PATH"; fi
    TMP="$(mktemp -d)"
    # The embedded PostgreSQL runs as an unprivileged user when we are root: it must reach $TMP/pg.
    chmod 755 "$TMP"
    trap fl_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    [ -x "$BIN" ] || fail "no relay binary at $BIN (swift build --product pushrelay, or set PUSHRELAY_BIN)"
    command -v psql >/dev/null || fail "psql is missing (Debian: postgresql-client)"
    command -v openssl >/dev/null || fail "openssl is missing"
}

# --- accounting ----------------------------------------------------------------------------------

# Prints one accounting check: `check DESCRIPTION CONDITION...` runs the condition (eq, le or ge below) and
# prints `ok` or `FAIL`, counting failures in $failures (the caller sets it to 0 before its checks).
check() {
    local description="$1"
    shift
    if "$@"; then
        printf '  ok    %s\n' "$description"
    else
        printf '  FAIL  %s\n' "$description"
        failures=$((failures + 1))
    fi
}
eq() { [ "$1" = "$2" ]; }
le() { [ "$1" -le "$2" ]; }
ge() { [ "$1" -ge "$2" ]; }

# --- processes -----------------------------------------------------------------------------------

# Stops a process we started: SIGTERM, then SIGKILL after `$2` seconds (default 30); sets FL_STOP_STATUS to its
# exit status (127 when it is not this shell's child).
fl_stop_pid() {
    local pid="$1" grace="${2:-30}"
    FL_STOP_STATUS=0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 $((grace * 10))); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "$NAME: pid $pid did not stop within ${grace}s of SIGTERM; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || FL_STOP_STATUS=$?
}

# Stops relay `$1` (SIGTERM, then SIGKILL after `$2` seconds, default 30) and sets RELAY_STATUS[$1] to its exit
# status ("" when it is not this shell's child: a relay another program restarted).
relay_stop() {
    local name="$1" pid="${RELAY_PID[$1]:-}"
    unset "RELAY_PID[$name]"
    RELAY_STATUS[$name]=""
    [ -n "$pid" ] || return 0
    fl_stop_pid "$pid" "${2:-30}"
    if [ "$FL_STOP_STATUS" -ne 127 ]; then RELAY_STATUS[$name]="$FL_STOP_STATUS"; fi
}

fl_pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

# Runs a PostgreSQL server tool as the cluster's owner (EmbeddedPostgres runs the server as `postgres`,
# else `nobody`, when we are root; it refuses to run as root).
fl_as_pg_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u "$(stat -c %U "$TMP/pg")" -- "$@")
    else
        "$@"
    fi
}

# The postmaster's pid while the cluster runs, else nothing.
fl_postgres_pid() {
    local pid
    [ -f "$TMP/pg/postmaster.pid" ] || return 0
    pid="$(head -n 1 "$TMP/pg/postmaster.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

# Stops the embedded cluster in $TMP/pg (a relay killed with SIGKILL, or one that did not start it, leaves it
# running).
cluster_stop() {
    [ -n "$(fl_postgres_pid)" ] || return 0
    fl_as_pg_owner "$(fl_pg_bin)/pg_ctl" stop -D "$TMP/pg" -m fast -w -t 60 -s ||
        echo "$NAME: pg_ctl stop failed for $TMP/pg" >&2
}

fl_cleanup() {
    local rc=$? name pid
    trap - EXIT
    for pid in "${FL_OTHER_PIDS[@]}"; do
        fl_stop_pid "$pid" 10
    done
    for name in "${!RELAY_PID[@]}"; do
        relay_stop "$name"
    done
    if [ -n "$SIM_PID" ]; then fl_stop_pid "$SIM_PID" 10; fi
    if [ -n "${TMP:-}" ] && [ -d "$TMP/pg" ]; then cluster_stop; fi
    if [ "$rc" -ne 0 ] && [ -n "${TMP:-}" ]; then
        for file in "$TMP"/relay-*.log "$TMP/sim.log" "$TMP/haproxy.log"; do
            [ -f "$file" ] || continue
            printf '\n%s: last lines of %s:\n' "$NAME" "$(basename "$file")" >&2
            tail -n 25 "$file" >&2
        done
        if [ "$rc" -eq 124 ]; then echo "$NAME: a command ran into the script's ${TIMEOUT}s deadline" >&2; fi
        printf '\n%s: FAILED at step "%s" (exit %d) after %ds\n' "$NAME" "$step" "$rc" "$(elapsed)" >&2
    fi
    if [ -n "${FANOUT_KEEP_DIR:-}" ] && [ -n "${TMP:-}" ]; then
        mkdir -p "$FANOUT_KEEP_DIR"
        cp "$TMP"/*.log "$TMP"/*.jsonl "$TMP"/*.tsv "$TMP"/*.txt "$FANOUT_KEEP_DIR"/ 2>/dev/null || true
    fi
    if [ -n "${TMP:-}" ]; then rm -rf "$TMP"; fi
    exit "$rc"
}

# --- setup ---------------------------------------------------------------------------------------

# python_env [PACKAGE...]: a virtualenv in $TMP/venv with ./Protocol/python and PACKAGEs installed (falls back
# to $PYTHON's own environment when venv is unavailable); sets PY to its python.
python_env() {
    if "$PYTHON" -m venv "$TMP/venv" >/dev/null 2>&1 && "$TMP/venv/bin/python" -m pip --version >/dev/null 2>&1; then
        PY="$TMP/venv/bin/python"
        "$PY" -m pip install --quiet --disable-pip-version-check "$ROOT/Protocol/python" "$@"
        return
    fi
    echo "$NAME: no virtualenv ($PYTHON -m venv failed); installing into $PYTHON's environment"
    PY="$PYTHON"
    if ! "$PY" -m pip install --quiet --disable-pip-version-check "$ROOT/Protocol/python" "$@" 2>"$TMP/pip.err"; then
        if grep -q externally-managed-environment "$TMP/pip.err"; then
            "$PY" -m pip install --quiet --disable-pip-version-check --break-system-packages \
                "$ROOT/Protocol/python" "$@"
        else
            cat "$TMP/pip.err" >&2
            return 1
        fi
    fi
}

fl_tool() { (cd "$TMP" && timeout "$(time_left)" "$PY" "$ROOT/Ops/scenarios/fanout_tool.py" "$@"); }

fl_admin() { timeout "$(time_left)" "$BIN" admin "$@" --data-dir "$TMP/pg"; }

# The cluster with circl (only circl's tenant file, so edits to other tenants cannot disturb the run), a
# signing key for circl (a fresh P-256 PKCS#8 .p8, sealed with a fresh master key) and a credential.
fl_setup_database() {
    mkdir -p "$TMP/tenants"
    cp Tenants/circl.yaml "$TMP/tenants/"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/AuthKey.p8" 2>/dev/null
    grep -q "BEGIN PRIVATE KEY" "$TMP/AuthKey.p8" || fail "openssl did not write a PKCS#8 key"
    "$BIN" admin master-key generate >"$TMP/master.key"
    chmod 600 "$TMP/master.key" "$TMP/AuthKey.p8"
    fl_admin migrate
    fl_admin tenant sync "$TMP/tenants"
    PUSHRELAY_MASTER_KEY="$(tr -d '[:space:]' <"$TMP/master.key")" \
        fl_admin key add circl --p8 "$TMP/AuthKey.p8" --key-id "$KEY_ID" --team-id "$TEAM_ID"
    local output
    output="$(fl_admin credential issue circl --name "$NAME")"
    CREDENTIAL="$(printf '%s\n' "$output" | grep -oE 'prk_[A-Za-z0-9_-]+' | head -n 1)"
    [ -n "$CREDENTIAL" ] || fail "no prk_ secret in the output of credential issue: $output"
}

# `pushrelay apns-sim` on a free port, trusting circl's key, answering after `$1` ms, logging to $TMP/sim.jsonl.
fl_start_simulator() {
    local lines_before=0
    [ -f "$TMP/sim.log" ] && lines_before="$(wc -l <"$TMP/sim.log")"
    "$BIN" apns-sim --host 127.0.0.1 --port "${SIM_PORT:-0}" --cert-dir "$TMP/sim" --key "$KEY_ID:$TEAM_ID:$TMP/AuthKey.p8" \
        --topic "$TOPIC" --latency-ms "$1" --log-requests "$TMP/sim.jsonl" --threads 1 ${FL_SIM_ARGS[@]+"${FL_SIM_ARGS[@]}"} >>"$TMP/sim.log" 2>&1 &
    SIM_PID=$!
    local port_wanted="${SIM_PORT:-}"
    SIM_PORT=""
    while [ -z "$SIM_PORT" ]; do
        check_deadline
        kill -0 "$SIM_PID" 2>/dev/null || fail "apns-sim exited: $(tail -n 20 "$TMP/sim.log")"
        SIM_PORT="$(tail -n +"$((lines_before + 1))" "$TMP/sim.log" | grep -oE 'listening on https://[^ ]+:[0-9]+' | grep -oE '[0-9]+$' || true)"
        if [ -n "$port_wanted" ] && [ "$SIM_PORT" != "$port_wanted" ]; then SIM_PORT=""; fi
        [ -n "$SIM_PORT" ] || sleep 0.1
    done
    [ -s "$TMP/sim/ca.pem" ] || fail "apns-sim wrote no $TMP/sim/ca.pem"
    say "apns-sim on 127.0.0.1:$SIM_PORT (pid $SIM_PID, latency $1 ms), logging to sim.jsonl"
}

# relay_start NAME ARGS...: starts `pushrelay serve --listen 127.0.0.1:0 --ready-file $TMP/ready-NAME ARGS...` in
# the background, logging to $TMP/relay-NAME.log, and waits for its ready file (within the script's deadline);
# sets RELAY_PID[NAME] and RELAY_ADDRESS[NAME].
relay_start() {
    local name="$1" ready="$TMP/ready-$1"
    shift
    rm -f "$ready"
    "$BIN" serve --listen 127.0.0.1:0 --ready-file "$ready" "$@" >>"$TMP/relay-$name.log" 2>&1 &
    RELAY_PID[$name]=$!
    RELAY_ADDRESS[$name]="$(ready_address "$ready" "${RELAY_PID[$name]}" "$(time_left)")" ||
        fail "relay $name was not ready"
    say "relay $name ready at ${RELAY_ADDRESS[$name]} (pid ${RELAY_PID[$name]})"
}

# ready_address FILE PID SECONDS: waits until relay PID has written host:port as the first line of its ready
# FILE (read twice, in case it was still being written) and prints it; fails when the relay exits first or
# SECONDS pass.
ready_address() {
    local file="$1" pid="$2" seconds="$3" first
    for _ in $(seq 1 $((seconds * 10))); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "the relay exited before it was ready" >&2
            return 1
        fi
        if [ -s "$file" ]; then
            first="$(head -n 1 "$file" | tr -d '[:space:]')"
            sleep 0.1
            if [ "$first" = "$(head -n 1 "$file" | tr -d '[:space:]')" ] && [[ "$first" =~ :[0-9]+$ ]]; then
                printf '%s\n' "$first"
                return 0
            fi
        else
            sleep 0.1
        fi
    done
    echo "the relay wrote no host:port to its ready file within ${seconds}s" >&2
    return 1
}

# fl_start_relay NAME: a relay of the scenario's cluster (embedded PostgreSQL in $TMP/pg, APNs = the simulator,
# FL_RELAY_ARGS). The request limit is raised so the registrations are not paced by it. No operator port unless
# FL_RELAY_ARGS asks for one (a later flag wins): several relays on one host cannot share the default, and a relay
# whose operator port cannot be opened does not start.
fl_start_relay() {
    relay_start "$1" --data-dir "$TMP/pg" --tenants "$TMP/tenants" --metrics-listen "" \
        --master-key-file "$TMP/master.key" --apns-endpoint "127.0.0.1:$SIM_PORT" --apns-ca "$TMP/sim/ca.pem" \
        --requests-per-second 100000 --request-burst 100000 ${FL_RELAY_ARGS[@]+"${FL_RELAY_ARGS[@]}"}
}

# psql on the embedded cluster's unix socket (in the data folder, port 5432, superuser pushrelay, trust).
# The statement goes in on stdin: a list of thousands of job ids is longer than one program argument may be.
fl_psql() {
    printf '%s\n' "$1" | timeout 30 psql -X -A -t -q -v ON_ERROR_STOP=1 -F ' ' \
        "host=$TMP/pg port=5432 user=pushrelay dbname=pushrelay" -f -
}

# Waits until job `$1` is completed (or failed/cancelled: then fails).
fl_wait_job_completed() {
    local state=""
    while :; do
        check_deadline
        state="$(fl_psql "SELECT state FROM jobs WHERE id = '$1'" || true)"
        case "$state" in
        completed) return 0 ;;
        failed | cancelled) fail "job $1 ended $state: $(fl_psql "SELECT error FROM jobs WHERE id = '$1'")" ;;
        esac
        sleep 0.2
    done
}

# Requests of run `$1` the simulator has answered so far.
fl_sim_requests() { grep -c -F "$1" "$TMP/sim.jsonl" 2>/dev/null || true; }

# Reads key=value lines (fanout_tool.py account) into the associative array ACC.
declare -A ACC=()
fl_read_accounting() {
    local key value
    while IFS='=' read -r key value; do
        [ -n "$key" ] && ACC[$key]="$value"
    done <<<"$1"
}

# The most devices a crash may leave sent but unrecorded, from the fan-out's tuning (FanOutTuning): the send
# window + 2 x recordBatch per page being sent, pageLoops pages at once. The window is minimumSendsInFlight on
# loopback, where the scenarios run (it grows with the round trip to APNs: SendWindow; the relay's metric
# pushrelay_fanout_send_window shows it).
fl_duplicate_window() {
    local source="$ROOT/Sources/RelayServer/FanOut/FanOutTuning.swift" in_flight batch loops
    in_flight="$(grep -oE 'var minimumSendsInFlight = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    batch="$(grep -oE 'var recordBatch = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    loops="$(grep -oE 'var pageLoops = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    [ -n "$in_flight" ] && [ -n "$batch" ] && [ -n "$loops" ] || fail "cannot read FanOutTuning's values"
    echo $((in_flight + 2 * batch * loops))
}

# fl_start_relays_behind_haproxy: relays A, B and C on the one cluster (`fl_start_relay`, with FL_RELAY_ARGS),
# then HAProxy (mode tcp, round robin, TCP health checks) in front of them on a free port of 127.0.0.1, and
# waits until each relay has seen the three heartbeats (its log says "relays=3"). Sets LB (host:port) and
# live_nodes (relays live in relay_nodes); HAProxy's pid is FL_OTHER_PIDS[0]. Needs HAPROXY (the binary).
fl_start_relays_behind_haproxy() {
    log "relays A, B and C on one cluster"
    for name in A B C; do fl_start_relay "$name"; done

    step="haproxy"
    HAPROXY_PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    {
        cat <<CFG
global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
frontend relays
    bind 127.0.0.1:$HAPROXY_PORT
    default_backend relays
backend relays
    balance roundrobin
CFG
        for name in A B C; do
            echo "    server relay-$name ${RELAY_ADDRESS[$name]} check inter 2s"
        done
    } >"$TMP/haproxy.cfg"
    "$HAPROXY" -c -q -f "$TMP/haproxy.cfg" || fail "haproxy refuses its configuration: $(cat "$TMP/haproxy.cfg")"
    "$HAPROXY" -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
    FL_OTHER_PIDS+=($!)
    until (exec 3<>"/dev/tcp/127.0.0.1/$HAPROXY_PORT") 2>/dev/null; do
        check_deadline
        kill -0 "${FL_OTHER_PIDS[0]}" 2>/dev/null || fail "haproxy exited: $(cat "$TMP/haproxy.log")"
        sleep 0.1
    done
    LB="127.0.0.1:$HAPROXY_PORT"
    say "haproxy on $LB (pid ${FL_OTHER_PIDS[0]}) in front of ${RELAY_ADDRESS[A]}, ${RELAY_ADDRESS[B]}, ${RELAY_ADDRESS[C]}"

    step="heartbeats"
    for name in A B C; do
        until grep -q "relays=3" "$TMP/relay-$name.log"; do
            check_deadline
            sleep 0.2
        done
    done
    live_nodes="$(fl_psql "SELECT count(*) FROM relay_nodes WHERE heartbeat_at > now() - interval '15 seconds'")"
    say "every relay paces its share: $live_nodes live relays in relay_nodes"
}
