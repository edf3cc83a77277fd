# Ops/fanout-lib.sh: shared by Ops/crash-test.sh, Ops/two-relays.sh and Ops/three-relays.sh (sourced, not run).
#
# One embedded PostgreSQL cluster in $TMP/pg, a separately running `pushrelay apns-sim` logging every
# request to $TMP/sim.jsonl, relays (`pushrelay serve`) sending to it with a signing key both trust,
# the Python client (Protocol/python) in a virtualenv for the wire side (Ops/fanout_tool.py), psql
# for the database side. Everything started here is stopped by fl_cleanup (the EXIT trap), also on
# failure; every wait is bounded by the script's deadline. FANOUT_KEEP_DIR=DIR keeps the logs (relays,
# simulator, its sim.jsonl) and the accounting inputs there.
#
# The caller sets NAME (for messages) and TIMEOUT (seconds) before sourcing, then calls fl_init.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${PUSHRELAY_BIN:-.build/debug/pushrelay}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
PYTHON="${PYTHON:-python3}"
KEY_ID="FANOUTKEY1"
TEAM_ID="FANOUTTEAM"
TOPIC="com.fragne.circl"

declare -A RELAY_PID=()
declare -A RELAY_ADDRESS=()
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

# Stops a process we started: SIGTERM, then SIGKILL after `$2` seconds (default 30).
fl_stop_pid() {
    local pid="$1" grace="${2:-30}"
    kill -0 "$pid" 2>/dev/null || {
        wait "$pid" 2>/dev/null || true
        return 0
    }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((grace * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$NAME: pid $pid did not stop within ${grace}s of SIGTERM; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
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

# Stops the embedded cluster (a relay killed with SIGKILL, or one that did not start it, leaves it running).
fl_stop_postgres() {
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
        fl_stop_pid "${RELAY_PID[$name]}" 30
    done
    if [ -n "$SIM_PID" ]; then fl_stop_pid "$SIM_PID" 10; fi
    if [ -n "${TMP:-}" ] && [ -d "$TMP/pg" ]; then fl_stop_postgres; fi
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

# A virtualenv with the Python client (as Ops/test-python.sh makes it).
fl_python_env() {
    if "$PYTHON" -m venv "$TMP/venv" >/dev/null 2>&1 && "$TMP/venv/bin/python" -m pip --version >/dev/null 2>&1; then
        PY="$TMP/venv/bin/python"
        timeout "$(time_left)" "$PY" -m pip install --quiet --disable-pip-version-check ./Protocol/python
    else
        echo "$NAME: no virtualenv ($PYTHON -m venv failed); using $PYTHON's environment"
        PY="$PYTHON"
        "$PY" -c 'import pushrelay_client' 2>/dev/null ||
            timeout "$(time_left)" "$PY" -m pip install --quiet --disable-pip-version-check ./Protocol/python ||
            timeout "$(time_left)" "$PY" -m pip install --quiet --disable-pip-version-check --break-system-packages ./Protocol/python
    fi
}

fl_tool() { (cd "$TMP" && timeout "$(time_left)" "$PY" "$ROOT/Ops/fanout_tool.py" "$@"); }

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

# Starts relay `$1` (`pushrelay serve` on a free port, embedded cluster in $TMP/pg, APNs = the simulator)
# and waits for its ready file. The request limit is raised so the registrations are not paced by it.
fl_start_relay() {
    local name="$1" ready="$TMP/ready-$1" address=""
    rm -f "$ready"
    "$BIN" serve --listen 127.0.0.1:0 --data-dir "$TMP/pg" --tenants "$TMP/tenants" \
        --master-key-file "$TMP/master.key" --apns-endpoint "127.0.0.1:$SIM_PORT" --apns-ca "$TMP/sim/ca.pem" \
        --requests-per-second 100000 --request-burst 100000 --ready-file "$ready" \
        ${FL_RELAY_ARGS[@]+"${FL_RELAY_ARGS[@]}"} >>"$TMP/relay-$name.log" 2>&1 &
    RELAY_PID[$name]=$!
    while [ -z "$address" ]; do
        check_deadline
        kill -0 "${RELAY_PID[$name]}" 2>/dev/null || fail "relay $name exited before it was ready"
        if [ -s "$ready" ]; then
            address="$(head -n 1 "$ready" | tr -d '[:space:]')"
            [[ "$address" =~ :[0-9]+$ ]] || address=""
        fi
        [ -n "$address" ] || sleep 0.1
    done
    RELAY_ADDRESS[$name]="$address"
    say "relay $name ready at $address (pid ${RELAY_PID[$name]})"
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

# The most devices a crash may leave sent but unrecorded, from FanOutWorker's constants:
# (concurrency + 2 x recordBatch) per page being sent, pageLoops pages at once.
fl_duplicate_window() {
    local source="$ROOT/Sources/RelayServer/FanOutWorker.swift" concurrency batch loops
    concurrency="$(grep -oE 'static let concurrency = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    batch="$(grep -oE 'static let recordBatch = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    loops="$(grep -oE 'static let pageLoops = [0-9_]+' "$source" | grep -oE '[0-9_]+$' | tr -d _)"
    [ -n "$concurrency" ] && [ -n "$batch" ] && [ -n "$loops" ] || fail "cannot read FanOutWorker's constants"
    echo $(((concurrency + 2 * batch) * loops))
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
