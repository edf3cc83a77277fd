#!/usr/bin/env bash
# Ops/scenarios/admin-cli.sh: `pushrelay admin` and `serve` against their database, as an operator meets them.
#
#   PUSHRELAY_BIN=.build/debug/pushrelay bash Ops/scenarios/admin-cli.sh
#
# Steps, each checked:
#   1. a missing embedded cluster (a typo in --data-dir): every command but `admin migrate` says where it looked
#      and exits non-zero, creating nothing; a command that only reads refuses --create
#   2. `admin migrate` creates and migrates it; then sync, list, issue work on it
#   3. a schema behind this build (its last migration unrecorded): the commands say so and name `admin migrate`,
#      exit non-zero, and migrate nothing
#   4. settings PostgreSQL refuses (no such role, no such database, nothing listening on the port): `admin` and
#      `serve` print PostgreSQL's reason in one sentence at once (each bounded by ADMIN_CLI_COMMAND_TIMEOUT, 15 s:
#      the pool's retries took 67 s)
#
# Environment: PUSHRELAY_BIN (default .build/debug/pushrelay), ADMIN_CLI_TIMEOUT (180 s).
set -euo pipefail

NAME="admin-cli"
TIMEOUT="${ADMIN_CLI_TIMEOUT:-180}"
COMMAND_TIMEOUT="${ADMIN_CLI_COMMAND_TIMEOUT:-15}"
# shellcheck source=Ops/scenarios/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fl_init
failures=0

# outcome ARGS...: runs `pushrelay ARGS` (bounded), its output in $TMP/out.txt, its exit status in $status and
# its duration in $took (milliseconds, printed, not checked).
outcome() {
    local started_ms
    started_ms=$(date +%s%3N)
    status=0
    timeout "$COMMAND_TIMEOUT" "$BIN" "$@" >"$TMP/out.txt" 2>&1 || status=$?
    took=$(($(date +%s%3N) - started_ms))
}
# refuses LABEL EXPECTED ARGS...: `pushrelay ARGS` exits non-zero (not by the timeout) saying EXPECTED.
refuses() {
    local label="$1" expected="$2"
    shift 2
    outcome "$@"
    check "$label: exit $status in ${took} ms: $(head -n 1 "$TMP/out.txt" | cut -c1-110)" \
        eval '[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && grep -qF -- "$expected" "$TMP/out.txt"'
}
migrations() { fl_psql "SELECT count(*) FROM schema_migrations"; }

# --- 1. a missing cluster ------------------------------------------------------------------------
step="missing-cluster"
log "a missing embedded cluster"
cd "$TMP"
for command in "tenant list" "tenant show circl" "key list circl" "credential list circl" "tenant disable circl" \
    "credential issue circl --name x" "tenant sync $ROOT/Tenants"; do
    # shellcheck disable=SC2086
    refuses "admin $command --data-dir pgg" "no embedded PostgreSQL cluster in $TMP/pgg" admin $command --data-dir pgg
done
check "nothing was created" eval '[ ! -e "$TMP/pgg" ]'
refuses "a command that only reads refuses --create" "only reads" admin tenant list --data-dir pgg --create
cd "$ROOT"

# --- 2. admin migrate creates it -----------------------------------------------------------------
step="migrate"
log "admin migrate creates the cluster; the other commands then work"
outcome admin migrate --data-dir "$TMP/pg"
latest="$(sed -n 's/^schema at version \([0-9]*\) .*/\1/p' "$TMP/out.txt")"
check "admin migrate creates and migrates (schema at version ${latest:-?})" eval '[ "$status" -eq 0 ] && [ -n "$latest" ]'
outcome admin tenant sync "$ROOT/Tenants" --data-dir "$TMP/pg"
check "tenant sync on it" eval '[ "$status" -eq 0 ] && grep -q "created circl" "$TMP/out.txt"'
outcome admin credential issue circl --name admin-cli --data-dir "$TMP/pg"
check "credential issue on it" eval '[ "$status" -eq 0 ] && grep -q "prk_" "$TMP/out.txt"'
outcome admin tenant list --data-dir "$TMP/pg"
check "tenant list on it" eval '[ "$status" -eq 0 ] && grep -q "^circl " "$TMP/out.txt"'

# --- 3. a schema behind --------------------------------------------------------------------------
step="schema-behind"
log "a schema behind this build"
# The cluster started as the admin commands start it, so that they reuse it and psql reaches it.
quoted="'$TMP/pg'"
fl_as_pg_owner "$(fl_pg_bin)/pg_ctl" start -D "$TMP/pg" -l "$TMP/pg/server.log" -w -s \
    -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories=$quoted"
fl_psql "DELETE FROM schema_migrations WHERE version = $latest" >/dev/null
before="$(migrations)"
for command in "tenant list" "tenant show circl" "key list circl" "credential list circl" "tenant disable circl"; do
    # shellcheck disable=SC2086
    refuses "admin $command, schema behind" "this pushrelay needs $latest: run \`pushrelay admin migrate\`" \
        admin $command --data-dir "$TMP/pg"
done
check "they migrated nothing ($before of $latest migrations recorded)" eq "$(migrations)" "$before"

# --- 4. settings PostgreSQL refuses --------------------------------------------------------------
step="refused-login"
log "PostgreSQL's own reasons, at once"
socket="host=$TMP/pg"
refuses "admin, a role that does not exist" "refused the login: role \"nobody\" does not exist" \
    admin tenant list --database-url "postgres://nobody@/pushrelay?$socket"
refuses "admin, a database that does not exist" "refused the login: database \"nope\" does not exist" \
    admin credential list circl --database-url "postgres://pushrelay@/nope?$socket"
refuses "admin, nothing on the port" "cannot reach PostgreSQL at 127.0.0.1:1: connection refused" \
    admin tenant list --database-url "postgres://pushrelay@127.0.0.1:1/pushrelay?sslmode=disable"
refuses "serve, a role that does not exist" "refused the login: role \"nobody\" does not exist" \
    serve --listen 127.0.0.1:0 --metrics-listen "" --tenants "" --database-url "postgres://nobody@/pushrelay?$socket"
refuses "serve, nothing on the port" "connection refused" \
    serve --listen 127.0.0.1:0 --metrics-listen "" --tenants "" \
    --database-url "postgres://pushrelay@127.0.0.1:1/pushrelay?sslmode=disable"

step="done"
[ "$failures" -eq 0 ] || fail "$failures checks failed"
printf '\n%s: OK: missing cluster, admin migrate, schema behind, refused logins in %ds\n' "$NAME" "$(elapsed)"
