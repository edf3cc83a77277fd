#!/usr/bin/env bash
# Ops/bench/bench-engine.sh: benchmark (not a test) of our APNs and FCM engines against h2load, in one run.
#
#   bash Ops/bench/bench-engine.sh
#
# Both clients send the same APNs-shaped request (POST /3/device/<token>, ~150-byte JSON alert,
# apns-topic / apns-push-type / apns-priority / authorization: bearer <JWT-sized string>) over ONE
# TLS HTTP/2 connection with up to 1000 concurrent streams, to the same fast sink:
#
#   sink       nghttpd (Debian nghttp2-server), one worker, TLS, pinned to CPU $BENCH_SINK_CPU (1).
#              It serves htdocs/ where 3/device/<TOKEN> is an empty file, so each POST reads the
#              request body and gets "200" with an empty body (nghttpd answers POST like GET for a
#              file that exists; it sends HEADERS, then an empty DATA frame with END_STREAM).
#   reference  h2load -c 1 -t 1 -m 1000 -n N -d payload.json, pinned to CPU $BENCH_CLIENT_CPU (0).
#   ours       pushrelay apns push ... --count N --concurrency 1000 --connections 1, same CPU.
#
# The FCM engine likewise (BENCH_TOOLS has fcm): h2load and `pushrelay fcm push` send the same FCM-shaped
# request (POST /v1/projects/<p>/messages:send, content-type: application/json, authorization: Bearer <250-byte
# access token>, a JSON message of a notification, data and Android options to a 152-byte registration token) to
# the same sink, where v1/projects/<p>/messages:send holds FCM's answer ({"name": "projects/<p>/messages/1"}, which
# our engine reads as FCM's). The service account (RSA 2048, written here) has its token_uri on the sink too
# (https://127.0.0.1:PORT/token, a file holding an access token's JSON): the engine fetches its token there once.
# Our FCM pool is given the same streams as h2load (--max-streams; Google announces 100).
#
# For each client: notifications/s (as the tool reports it), wall time and the client's own CPU
# time (user+sys, GNU time), as CPU seconds per 100,000 notifications. The sink's CPU use over the
# same run is shown too: near 100% means the sink, not the client, set the pace, and then the
# client's CPU per 100k is the figure to compare. The report goes to stdout and to
# Ops/results/bench-engine-latest.txt (meant to be committed).
#
# Environment:
#   BENCH_COUNT=200000       notifications per run
#   BENCH_RUNS=1             runs per client (alternating h2load / pushrelay); best and median shown
#   BENCH_TOOLS="h2load pushrelay fcm"   which clients to run (fcm: h2load and pushrelay fcm push, FCM's request)
#   BENCH_CONCURRENCY=1000   concurrent streams asked of each client (h2load -m, pushrelay --concurrency)
#   BENCH_SINK_STREAMS=1000  SETTINGS_MAX_CONCURRENT_STREAMS of the sink (nghttpd -m; default 100)
#   BENCH_SINK_OPTS="-W 24"  more nghttpd options (-W 24: 16 MiB connection window, so the sink's
#                            WINDOW_UPDATE cadence does not throttle the request bodies)
#   BENCH_CLIENT_CPU=0 BENCH_SINK_CPU=1   CPUs to pin to (taskset -c)
#   PUSHRELAY_BIN            use this pushrelay binary instead of building one (swift build -c release)
#   BENCH_RESULTS            report file (default Ops/results/bench-engine-latest.txt)
#   BENCH_KEEP_TMP=1         keep the temporary directory (certs, keys, raw outputs)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# nghttpd lives in /usr/sbin, which is not on an ordinary user's PATH on Debian.
export PATH="/opt/swift/usr/bin:$PATH:/usr/sbin"

N="${BENCH_COUNT:-200000}"
RUNS="${BENCH_RUNS:-1}"
TOOLS="${BENCH_TOOLS:-h2load pushrelay fcm}"
CONCURRENCY="${BENCH_CONCURRENCY:-1000}"
SINK_STREAMS="${BENCH_SINK_STREAMS:-1000}"
SINK_OPTS="${BENCH_SINK_OPTS:--W 24}"
CLIENT_CPU="${BENCH_CLIENT_CPU:-0}"
SINK_CPU="${BENCH_SINK_CPU:-1}"
RESULTS="${BENCH_RESULTS:-$ROOT/Ops/results/bench-engine-latest.txt}"

TOKEN="a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90" # 64 hex chars
TOPIC="com.example.app"
KEY_ID="ABCDE12345"
TEAM_ID="TEAM123456"
FCM_PROJECT="bench-fcm"
# A registration token of Google's shape and length (152 bytes).
FCM_TOKEN="$(python3 -c 'import sys; t = "bench-0:APA91b"; f = "bk3RNwTe3H0-xBq9tLvZ_fHZt4QmQd2kP7sYc1uWJrLoE8gA6vMnS5hK0iXyU"; print((t + f * 3)[:152])')"

log() { printf 'bench-engine: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# --- preflight -----------------------------------------------------------------------------------
for tool in h2load nghttp nghttpd openssl taskset python3; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found; run: bash Ops/scripts/install-deps.sh"
done
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) not found; run: bash Ops/scripts/install-deps.sh"
case "$N" in '' | *[!0-9]*) die "BENCH_COUNT must be a positive integer" ;; esac
case "$RUNS" in '' | *[!0-9]* | 0) die "BENCH_RUNS must be a positive integer" ;; esac
if ! taskset -c "$CLIENT_CPU" true 2>/dev/null || ! taskset -c "$SINK_CPU" true 2>/dev/null; then
    log "warning: cannot pin to CPUs $CLIENT_CPU and $SINK_CPU ($(nproc) usable); sink and client share CPU 0"
    CLIENT_CPU=0
    SINK_CPU=0
fi

want() { case " $TOOLS " in *" $1 "*) return 0 ;; *) return 1 ;; esac }

# --- pushrelay binary ----------------------------------------------------------------------------
PUSHRELAY_STATUS="not requested"
FCM_STATUS="not requested"
if want pushrelay || want fcm; then
    if [ -z "${PUSHRELAY_BIN:-}" ]; then
        command -v swift >/dev/null 2>&1 || die "'swift' not found; see Ops/scripts/install-deps.sh"
        log "building pushrelay (release)"
        swift build -c release --product pushrelay >&2
        PUSHRELAY_BIN="$(swift build -c release --show-bin-path)/pushrelay"
    fi
    [ -x "$PUSHRELAY_BIN" ] || die "pushrelay binary not found at $PUSHRELAY_BIN"
    if want pushrelay; then
        if "$PUSHRELAY_BIN" apns push --help >/dev/null 2>&1; then
            PUSHRELAY_STATUS="ok"
        else
            PUSHRELAY_STATUS="skipped: '$PUSHRELAY_BIN apns push' does not exist in this build"
            log "warning: $PUSHRELAY_STATUS"
        fi
    fi
    if want fcm; then
        if "$PUSHRELAY_BIN" fcm push --help >/dev/null 2>&1; then
            FCM_STATUS="ok"
        else
            FCM_STATUS="skipped: '$PUSHRELAY_BIN fcm push' does not exist in this build"
            log "warning: $FCM_STATUS"
        fi
    fi
fi

# --- temporary directory, cleanup ----------------------------------------------------------------
TMP="$(mktemp -d "${TMPDIR:-/tmp}/bench-engine.XXXXXX")"
SINK_PID=""
stop_sink() {
    if [ -n "$SINK_PID" ] && kill -0 "$SINK_PID" 2>/dev/null; then
        kill "$SINK_PID" 2>/dev/null || true
        wait "$SINK_PID" 2>/dev/null || true
    fi
    SINK_PID=""
}
cleanup() {
    stop_sink
    if [ "${BENCH_KEEP_TMP:-0}" = "1" ]; then
        log "kept $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- certificates, APNs key, payload, JWT-sized bearer -------------------------------------------
log "generating CA, server certificate (127.0.0.1, localhost) and APNs key in $TMP"
(
    cd "$TMP"
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 30 \
        -keyout ca.key -out ca.pem -subj "/CN=pushrelay bench CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
        -keyout server.key -out server.csr -subj "/CN=localhost"
    cat >server.ext <<'EOF'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EOF
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 30 \
        -extfile server.ext -out server.pem
    openssl verify -CAfile ca.pem server.pem
    # An APNs-style signing key: P-256, PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----"), like a .p8.
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.p8
    # A Google service account's key: RSA 2048, PKCS#8 PEM.
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out fcm-key.pem
) >"$TMP/openssl.log" 2>&1 || {
    cat "$TMP/openssl.log" >&2
    die "openssl failed"
}

mkdir -p "$TMP/htdocs/3/device"
: >"$TMP/htdocs/3/device/$TOKEN"
# A typical alert, ~150 bytes of JSON, no trailing newline (h2load sends the file as is).
printf '%s' '{"aps":{"alert":{"title":"Benchmark","body":"Hello from the pushrelay engine benchmark: a typical alert of about 150 bytes."},"sound":"default","badge":1}}' \
    >"$TMP/payload.json"
PAYLOAD_BYTES="$(wc -c <"$TMP/payload.json")"

# A bearer token the size of a real ES256 provider token (header.claims.64-byte signature),
# ~190 characters; the sink does not check it. h2load sends it on every request (HPACK-indexed).
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
JWT="$(printf '%s' "{\"alg\":\"ES256\",\"kid\":\"$KEY_ID\"}" | b64url).$(printf '%s' \
    "{\"iss\":\"$TEAM_ID\",\"iat\":1700000000}" | b64url).$(openssl rand 64 | b64url)"

# FCM: an OAuth access token of Google's length (ya29. and 245 more characters), which the sink's token endpoint
# hands our engine and h2load sends as it is; FCM's answer to messages:send; and the message body, as
# FCMMessage.body(to:) encodes it (sorted keys, no spaces): what `pushrelay fcm push` below sends.
FCM_ACCESS_TOKEN="ya29.$(openssl rand 240 | b64url | cut -c1-245)"
FCM_PATH="v1/projects/$FCM_PROJECT/messages:send"
mkdir -p "$TMP/htdocs/v1/projects/$FCM_PROJECT"
printf '{"name":"projects/%s/messages/1"}' "$FCM_PROJECT" >"$TMP/htdocs/$FCM_PATH"
printf '{"access_token":"%s","expires_in":3599,"token_type":"Bearer"}' "$FCM_ACCESS_TOKEN" >"$TMP/htdocs/token"
FCM_TITLE="Benchmark"
FCM_BODY="Hello from the pushrelay engine benchmark: a typical message of about 150 bytes."
python3 - "$FCM_TOKEN" "$FCM_TITLE" "$FCM_BODY" >"$TMP/fcm-body.json" <<'PY'
import json, sys
token, title, body = sys.argv[1:4]
message = {"message": {"android": {"notification": {"channel_id": "events"}, "priority": "HIGH"},
                       "data": {"event_id": "7", "type": "event_created"},
                       "notification": {"body": body, "title": title}, "token": token}}
sys.stdout.write(json.dumps(message, sort_keys=True, separators=(",", ":")))
PY
FCM_BODY_BYTES="$(wc -c <"$TMP/fcm-body.json")"

# --- sink ----------------------------------------------------------------------------------------
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
# Starts nghttpd on a free port, and checks that a POST to the device path gets 200.
start_sink() {
    local attempt i
    for attempt in 1 2 3 4 5; do
        PORT="$(free_port)"
        # shellcheck disable=SC2086 # SINK_OPTS is a list of options
        taskset -c "$SINK_CPU" nghttpd -n 1 -m "$SINK_STREAMS" $SINK_OPTS -a 127.0.0.1 \
            -d "$TMP/htdocs" "$PORT" "$TMP/server.key" "$TMP/server.pem" >"$TMP/nghttpd.log" 2>&1 &
        SINK_PID=$!
        URL="https://127.0.0.1:$PORT/3/device/$TOKEN"
        for i in $(seq 50); do
            kill -0 "$SINK_PID" 2>/dev/null || break
            if nghttp -v -d "$TMP/payload.json" -H "apns-topic: $TOPIC" "$URL" >"$TMP/nghttp-check.log" 2>&1 \
                && grep -q ':status: 200' "$TMP/nghttp-check.log"; then
                return 0
            fi
            sleep 0.1
        done
        log "sink did not answer on port $PORT (attempt $attempt); nghttpd said: $(tail -n 3 "$TMP/nghttpd.log")"
        stop_sink
    done
    cat "$TMP/nghttp-check.log" >&2 || true
    die "could not start nghttpd"
}
# CPU seconds (user+sys) the sink has used so far.
CLK_TCK="$(getconf CLK_TCK)"
sink_cpu() {
    awk -v hz="$CLK_TCK" '{ printf "%.2f\n", ($14 + $15) / hz }' "/proc/$SINK_PID/stat"
}

start_sink
log "sink: nghttpd pid $SINK_PID on 127.0.0.1:$PORT, CPU $SINK_CPU; POST $URL -> 200 checked"

# The service account, its token_uri on the sink (the port is known now); FCM's URL checked.
FCM_URL="https://127.0.0.1:$PORT/$FCM_PATH"
if want fcm; then
    python3 - "$TMP/fcm-key.pem" "$FCM_PROJECT" "https://127.0.0.1:$PORT/token" >"$TMP/fcm-account.json" <<'PY'
import json, sys
key, project, token_uri = sys.argv[1:4]
print(json.dumps({
    "type": "service_account", "project_id": project, "private_key_id": "bench0000000000000000000000000000000001",
    "private_key": open(key).read(), "client_email": f"firebase-adminsdk-bench@{project}.iam.gserviceaccount.com",
    "client_id": "100000000000000000001", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
    "token_uri": token_uri}, indent=2))
PY
    nghttp -v -d "$TMP/fcm-body.json" -H 'content-type: application/json' "$FCM_URL" >"$TMP/nghttp-fcm.log" 2>&1 \
        && grep -q ':status: 200' "$TMP/nghttp-fcm.log" && grep -q '"name":"projects/' "$TMP/nghttp-fcm.log" \
        || { cat "$TMP/nghttp-fcm.log" >&2; die "the sink does not answer POST $FCM_URL with FCM's answer"; }
    log "sink: POST $FCM_URL -> 200 {\"name\": ...} checked; token endpoint https://127.0.0.1:$PORT/token"
fi

# --- runs ----------------------------------------------------------------------------------------
ROWS="$TMP/rows.tsv" # tool run ok rate wall cpu sink_cpu delivered note
: >"$ROWS"
FAILED=0

# Runs "$@" pinned to the client CPU under GNU time; sets USER_S SYS_S WALL_S and CMD_RC.
timed() {
    local out="$1"
    shift
    CMD_RC=0
    /usr/bin/time -o "$out.time" -f '%U %S %e' taskset -c "$CLIENT_CPU" "$@" >"$out" 2>&1 || CMD_RC=$?
    # GNU time puts "Command exited with non-zero status N" first when the command fails.
    read -r USER_S SYS_S WALL_S < <(tail -n 1 "$out.time")
}

run_h2load() {
    local run="$1" out="$TMP/h2load-$1.out" s0 s1 rate ok2xx ok=1 note=""
    s0="$(sink_cpu)"
    timed "$out" h2load -c 1 -t 1 -m "$CONCURRENCY" -n "$N" -d "$TMP/payload.json" \
        -H "apns-topic: $TOPIC" -H 'apns-push-type: alert' -H 'apns-priority: 10' \
        -H "authorization: bearer $JWT" "$URL"
    s1="$(sink_cpu)"
    # "finished in 4.16s, 48077.47 req/s, 1.24MB/s" and "status codes: 200000 2xx, 0 3xx, ..."
    rate="$(awk '/^finished in/ { print $4; exit }' "$out")"
    ok2xx="$(awk '/^status codes:/ { print $3; exit }' "$out")"
    if [ "$CMD_RC" -ne 0 ] || [ -z "$rate" ] || [ "${ok2xx:-0}" != "$N" ]; then
        ok=0
        note="exit $CMD_RC, 2xx ${ok2xx:-?} of $N; $(grep -E '^(requests|status codes):' "$out" | tr '\n' ' ')"
        FAILED=1
    fi
    printf 'h2load\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$ok" "${rate:-0}" "$WALL_S" \
        "$(awk -v u="$USER_S" -v s="$SYS_S" 'BEGIN { print u + s }')" \
        "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" "${ok2xx:-0}" "$note" >>"$ROWS"
    log "h2load run $run: $(grep -E '^finished in' "$out" || echo 'no result') cpu ${USER_S}u+${SYS_S}s wall ${WALL_S}s"
}

run_pushrelay() {
    local run="$1" out="$TMP/pushrelay-$1.out" s0 s1 rate delivered ok=1 note=""
    s0="$(sink_cpu)"
    timed "$out" "$PUSHRELAY_BIN" apns push --endpoint "127.0.0.1:$PORT" --ca-file "$TMP/ca.pem" \
        --p8 "$TMP/key.p8" --key-id "$KEY_ID" --team-id "$TEAM_ID" --topic "$TOPIC" \
        --token "$TOKEN" --payload "$(cat "$TMP/payload.json")" \
        --count "$N" --concurrency "$CONCURRENCY" --connections 1
    s1="$(sink_cpu)"
    # "delivered 200000" and, last, "notifications/s: 12345.6"
    rate="$(grep -E 'notifications/s' "$out" | tail -n 1 \
        | sed -nE 's|.*notifications/s[^0-9]*([0-9]+(\.[0-9]+)?).*|\1|p')"
    delivered="$(grep -E 'delivered' "$out" | tail -n 1 | sed -nE 's/.*delivered[: ]+([0-9]+).*/\1/p')"
    if [ "$CMD_RC" -ne 0 ] || [ -z "$rate" ]; then
        ok=0
        note="exit $CMD_RC, delivered ${delivered:-?} of $N; last line: $(tail -n 1 "$out")"
        FAILED=1
    fi
    printf 'pushrelay\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$ok" "${rate:-0}" "$WALL_S" \
        "$(awk -v u="$USER_S" -v s="$SYS_S" 'BEGIN { print u + s }')" \
        "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" "${delivered:-0}" "$note" >>"$ROWS"
    log "pushrelay run $run: $(grep -E 'notifications/s' "$out" | tail -n 1 || echo 'no result') cpu ${USER_S}u+${SYS_S}s wall ${WALL_S}s (exit $CMD_RC)"
}

run_h2load_fcm() {
    local run="$1" out="$TMP/h2load-fcm-$1.out" s0 s1 rate ok2xx ok=1 note=""
    s0="$(sink_cpu)"
    timed "$out" h2load -c 1 -t 1 -m "$CONCURRENCY" -n "$N" -d "$TMP/fcm-body.json" \
        -H 'content-type: application/json' -H "authorization: Bearer $FCM_ACCESS_TOKEN" "$FCM_URL"
    s1="$(sink_cpu)"
    rate="$(awk '/^finished in/ { print $4; exit }' "$out")"
    ok2xx="$(awk '/^status codes:/ { print $3; exit }' "$out")"
    if [ "$CMD_RC" -ne 0 ] || [ -z "$rate" ] || [ "${ok2xx:-0}" != "$N" ]; then
        ok=0
        note="exit $CMD_RC, 2xx ${ok2xx:-?} of $N; $(grep -E '^(requests|status codes):' "$out" | tr '\n' ' ')"
        FAILED=1
    fi
    printf 'h2load-fcm\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$ok" "${rate:-0}" "$WALL_S" \
        "$(awk -v u="$USER_S" -v s="$SYS_S" 'BEGIN { print u + s }')" \
        "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" "${ok2xx:-0}" "$note" >>"$ROWS"
    log "h2load (FCM request) run $run: $(grep -E '^finished in' "$out" || echo 'no result') cpu ${USER_S}u+${SYS_S}s wall ${WALL_S}s"
}

run_fcm() {
    local run="$1" out="$TMP/pushrelay-fcm-$1.out" s0 s1 rate delivered body_bytes ok=1 note=""
    s0="$(sink_cpu)"
    timed "$out" "$PUSHRELAY_BIN" fcm push --endpoint "127.0.0.1:$PORT" --ca "$TMP/ca.pem" \
        --account "$TMP/fcm-account.json" --token "$FCM_TOKEN" --title "$FCM_TITLE" --body "$FCM_BODY" \
        --data type=event_created --data event_id=7 --android-priority HIGH --channel-id events \
        --count "$N" --concurrency "$CONCURRENCY" --connections 1 --max-streams "$CONCURRENCY"
    s1="$(sink_cpu)"
    # "delivered 200000", "message body: 412 bytes" and, last, "messages/s: 12345.6"
    rate="$(grep -E 'messages/s' "$out" | tail -n 1 | sed -nE 's|.*messages/s[^0-9]*([0-9]+(\.[0-9]+)?).*|\1|p')"
    delivered="$(grep -E '^delivered' "$out" | tail -n 1 | sed -nE 's/^delivered[: ]+([0-9]+).*/\1/p')"
    body_bytes="$(sed -nE 's/^message body: ([0-9]+) bytes/\1/p' "$out")"
    if [ "$CMD_RC" -ne 0 ] || [ -z "$rate" ]; then
        ok=0
        note="exit $CMD_RC, delivered ${delivered:-?} of $N; $(grep -vE '^(delivered|connections|sent|messages)' "$out" | head -n 3 | tr '\n' ' ')"
        FAILED=1
    elif [ "${body_bytes:-0}" != "$FCM_BODY_BYTES" ]; then
        note="its body is ${body_bytes:-?} bytes, h2load's $FCM_BODY_BYTES"
    fi
    printf 'pushrelay-fcm\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$ok" "${rate:-0}" "$WALL_S" \
        "$(awk -v u="$USER_S" -v s="$SYS_S" 'BEGIN { print u + s }')" \
        "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" "${delivered:-0}" "$note" >>"$ROWS"
    log "pushrelay fcm push run $run: $(grep -E 'messages/s' "$out" | tail -n 1 || echo 'no result') cpu ${USER_S}u+${SYS_S}s wall ${WALL_S}s (exit $CMD_RC)"
}

for run in $(seq "$RUNS"); do
    if want h2load; then run_h2load "$run"; fi
    if want pushrelay && [ "$PUSHRELAY_STATUS" = "ok" ]; then run_pushrelay "$run"; fi
    if want fcm && [ "$FCM_STATUS" = "ok" ]; then
        run_h2load_fcm "$run"
        run_fcm "$run"
    fi
done
stop_sink

# --- report --------------------------------------------------------------------------------------
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$ROOT" status --porcelain -- Sources Package.swift 2>/dev/null)" ]; then
    commit="$commit+uncommitted"
fi
REPORT="$TMP/report.txt"
{
    echo "# pushrelay engine benchmark (Ops/bench/bench-engine.sh)"
    echo "date:       $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine:    $(nproc) CPUs, $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -m)"
    echo "kernel:     $(uname -sr)"
    echo "load avg:   $(cut -d' ' -f1-3 /proc/loadavg) (after the runs)"
    echo "tree:       commit $commit (the binary below may be older when PUSHRELAY_BIN is given)"
    echo "tools:      $(h2load --version | head -n 1); $(nghttpd --version | head -n 1); $(openssl version)"
    if command -v swift >/dev/null 2>&1; then echo "swift:      $(swift --version 2>/dev/null | head -n 1)"; fi
    echo "workload:   $N x POST /3/device/<64 hex>, $PAYLOAD_BYTES-byte JSON, bearer ${#JWT} chars; 1 TLS connection, $CONCURRENCY streams asked"
    if want fcm; then
        echo "FCM:        $N x POST /$FCM_PATH, $FCM_BODY_BYTES-byte JSON message (${#FCM_TOKEN}-byte token), bearer ${#FCM_ACCESS_TOKEN} chars; answer {\"name\": ...}; pushrelay fcm push --max-streams $CONCURRENCY ($FCM_STATUS)"
    fi
    echo "sink:       nghttpd -n 1 -m $SINK_STREAMS $SINK_OPTS (TLS, empty 200), taskset -c $SINK_CPU"
    echo "clients:    taskset -c $CLIENT_CPU; h2load -c 1 -t 1 -m $CONCURRENCY; pushrelay apns push --connections 1 --concurrency $CONCURRENCY"
    if [ -n "${PUSHRELAY_BIN:-}" ] && [ -f "$PUSHRELAY_BIN" ]; then
        echo "pushrelay:  $PUSHRELAY_BIN, built $(date -u -r "$PUSHRELAY_BIN" +%Y-%m-%dT%H:%M:%SZ) ($PUSHRELAY_STATUS)"
    else
        echo "pushrelay:  n/a ($PUSHRELAY_STATUS)"
    fi
    echo "runs:       $RUNS per client"
    echo
    python3 - "$ROWS" "$N" <<'PY'
import statistics, sys

rows_path, n = sys.argv[1], int(sys.argv[2])
rows = []
with open(rows_path) as f:
    for line in f:
        tool, run, ok, rate, wall, cpu, sink, delivered, note = line.rstrip("\n").split("\t")
        rows.append(dict(tool=tool, run=int(run), ok=ok == "1", rate=float(rate), wall=float(wall),
                         cpu=float(cpu), sink=float(sink), delivered=delivered, note=note))

def per100k(cpu):
    return cpu / n * 100_000

summary = {}
for tool in ("h2load", "pushrelay", "h2load-fcm", "pushrelay-fcm"):
    good = [r for r in rows if r["tool"] == tool and r["ok"]]
    if not good:
        continue
    summary[tool] = dict(
        runs=len(good),
        rate_best=max(r["rate"] for r in good),
        rate_med=statistics.median(r["rate"] for r in good),
        cpu_best=min(per100k(r["cpu"]) for r in good),
        cpu_med=statistics.median(per100k(r["cpu"]) for r in good),
        wall_med=statistics.median(r["wall"] for r in good),
        sink_med=statistics.median(100 * r["sink"] / r["wall"] for r in good if r["wall"] > 0),
    )

print(f"{'tool':<14} {'ok runs':>7} {'notif/s best':>13} {'notif/s median':>15} "
      f"{'CPU s/100k best':>16} {'CPU s/100k median':>18} {'wall s':>7} {'sink CPU':>9}")
for tool, s in summary.items():
    print(f"{tool:<14} {s['runs']:>7} {s['rate_best']:>13.0f} {s['rate_med']:>15.0f} "
          f"{s['cpu_best']:>16.3f} {s['cpu_med']:>18.3f} {s['wall_med']:>7.2f} {s['sink_med']:>8.0f}%")

def compare(ours, reference, what):
    if ours not in summary or reference not in summary:
        return
    p, h = summary[ours], summary[reference]
    print()
    print(f"{ours}/{reference} ({what}), notifications/s:  {100 * p['rate_med'] / h['rate_med']:.1f}% (median), "
          f"{100 * p['rate_best'] / h['rate_best']:.1f}% (best)   [higher is better]")
    print(f"{ours}/{reference} ({what}), CPU s per 100k:   {100 * p['cpu_med'] / h['cpu_med']:.1f}% (median), "
          f"{100 * p['cpu_best'] / h['cpu_best']:.1f}% (best)   [lower is better]")

compare("pushrelay", "h2load", "APNs request")
compare("pushrelay-fcm", "h2load-fcm", "FCM request")
compare("pushrelay-fcm", "pushrelay", "our FCM engine over our APNs engine")
print()
print("h2load, pushrelay: the APNs request (pushrelay apns push); h2load-fcm, pushrelay-fcm: the FCM request")
print("(pushrelay fcm push). notif/s: as reported by each tool; CPU s/100k: client user+sys seconds per")
print("100,000 notifications (GNU time); sink CPU: nghttpd CPU time / client wall time (near 100%: the")
print("sink set the pace, compare CPU s/100k).")
print()
print("runs:")
print(f"  {'tool':<14} {'run':>3} {'ok':>3} {'notif/s':>10} {'wall s':>7} {'CPU s':>7} {'sink CPU s':>10} {'done':>8}  note")
for r in rows:
    print(f"  {r['tool']:<14} {r['run']:>3} {'yes' if r['ok'] else 'NO':>3} {r['rate']:>10.0f} "
          f"{r['wall']:>7.2f} {r['cpu']:>7.2f} {r['sink']:>10.2f} {r['delivered']:>8}  {r['note']}")
PY
} >"$REPORT"

mkdir -p "$(dirname "$RESULTS")"
cp "$REPORT" "$RESULTS"
echo
cat "$REPORT"
echo
log "written to ${RESULTS#"$ROOT"/}"
if [ "$FAILED" -ne 0 ]; then
    log "some runs FAILED (see the runs above)"
    exit 1
fi
if want pushrelay && [ "$PUSHRELAY_STATUS" != "ok" ]; then
    log "pushrelay was not measured: $PUSHRELAY_STATUS"
    exit 1
fi
if want fcm && [ "$FCM_STATUS" != "ok" ]; then
    log "the FCM engine was not measured: $FCM_STATUS"
    exit 1
fi
