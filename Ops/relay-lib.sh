# Ops/relay-lib.sh: what the scripts that run a relay with the Python client share. Source it; it needs
# ROOT, TMP and PYTHON set, and the caller's own `fail`.

# python_env [PACKAGE...]: a virtualenv in $TMP/venv with ./Protocol/python and PACKAGEs installed (falls back
# to $PYTHON's own environment when venv is unavailable); sets PY to its python.
python_env() {
    if "$PYTHON" -m venv "$TMP/venv" >/dev/null 2>&1 && "$TMP/venv/bin/python" -m pip --version >/dev/null 2>&1; then
        PY="$TMP/venv/bin/python"
        "$PY" -m pip install --quiet --disable-pip-version-check "$ROOT/Protocol/python" "$@"
        return
    fi
    echo "$(basename "$0"): no virtualenv ($PYTHON -m venv failed); installing into $PYTHON's environment"
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
